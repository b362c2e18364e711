package verify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// kcpService is a Service this program owns in front of a kcp component (the front
// proxy, the root shard or a shard), with what a check needs to reach it and to say
// where to look when it answers wrong.
type kcpService struct {
	// what names the component in messages: "the front proxy", "shard alpha".
	what string
	// service is the owned Service in naming.NamespaceKcp.
	service string
	// hostname is the component's public hostname. Its serving certificate carries it
	// (components' serverCertificate: the in-cluster path presents this certificate
	// under that name too), so it is the TLS server name of a request to the Service.
	hostname string
	// deployment is the operator's Deployment of the component, whose logs explain it.
	deployment string
	// certificateSecret is the operator's serving certificate Secret; cert-manager puts
	// the CA that issued it under ca.crt.
	certificateSecret string
}

func frontProxyService(cfg *config.Config) kcpService {
	return kcpService{
		what:              "the front proxy",
		service:           naming.OwnedServiceName(naming.FrontProxyName),
		hostname:          cfg.Kcp.FrontProxy.Hostname,
		deployment:        naming.FrontProxyDeployment(naming.FrontProxyName),
		certificateSecret: naming.FrontProxyServerCertificate(naming.RootShardName, naming.FrontProxyName),
	}
}

// shardServices are the root shard's and every configured shard's owned Services.
func shardServices(cfg *config.Config) []kcpService {
	var out []kcpService
	for _, s := range cfg.Kcp.AllShards() {
		deployment := naming.ShardDeployment(s.Name)
		if s.Name == naming.RootShardName {
			deployment = naming.RootShardDeployment(s.Name)
		}
		out = append(out, kcpService{
			what:              "shard " + s.Name,
			service:           naming.OwnedServiceName(s.Name),
			hostname:          s.Hostname,
			deployment:        deployment,
			certificateSecret: naming.ShardServerCertificate(s.Name),
		})
	}
	return out
}

// id is the Service as namespace/name.
func (s kcpService) id() string { return naming.NamespaceKcp + "/" + s.service }

// logs is the command that shows the component's side of a wrong answer.
func (s kcpService) logs() string {
	return fmt.Sprintf("kubectl -n %s logs deploy/%s", naming.NamespaceKcp, s.deployment)
}

// dial connects to the Service's kcp port, whatever address the client asks for.
func (s kcpService) dial(o *Options) DialFunc {
	return ServiceDialFunc(o.Services, naming.NamespaceKcp, s.service, naming.KcpPort)
}

// httpClient sends requests to the Service through o.Services, verifying the server
// against roots. Like the ingress client it follows no redirects, uses no proxy and
// sends no credentials.
func (s kcpService) httpClient(o *Options, roots *x509.CertPool) *http.Client {
	return &http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{
			DialContext:         s.dial(o),
			TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots},
			TLSHandshakeTimeout: 10 * time.Second,
			DisableKeepAlives:   true,
			Proxy:               nil,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// servingCA is the CA cert-manager put beside the component's serving certificate
// (ca.crt of its Secret): what a client of the component should trust.
func servingCA(ctx context.Context, kube kubernetes.Interface, s kcpService) (*x509.CertPool, error) {
	pem, err := servingCAPEM(ctx, kube, s)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return pool, nil
}

// servingCAPEM is servingCA as PEM.
func servingCAPEM(ctx context.Context, kube kubernetes.Interface, s kcpService) ([]byte, error) {
	id := naming.NamespaceKcp + "/" + s.certificateSecret
	secret, err := kube.CoreV1().Secrets(naming.NamespaceKcp).Get(ctx, s.certificateSecret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("serving certificate Secret %s not found: the operator has not issued it (kubectl -n %s get certificates)", id, naming.NamespaceKcp)
	case err != nil:
		return nil, fmt.Errorf("cannot read the serving certificate Secret %s: %v", id, err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(secret.Data["ca.crt"]) {
		return nil, fmt.Errorf("serving certificate Secret %s has no PEM certificate under ca.crt (kubectl -n %s describe certificate %s)", id, naming.NamespaceKcp, s.certificateSecret)
	}
	return secret.Data["ca.crt"], nil
}
