package verify

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/errtext"
	"github.com/railgrid/railgrid-kcp/internal/pemcert"
	"github.com/railgrid/railgrid-kcp/naming"
)

// HubServerHost is the host:port the hub's kubeconfig must point at: the in-cluster
// front-proxy Service, so the hub never leaves the cluster to reach kcp.
func HubServerHost() string {
	return fmt.Sprintf("%s:%d", naming.OperatorServiceHost(naming.FrontProxyDeployment(naming.FrontProxyName)), naming.KcpPort)
}

// RemintHint is the re-mint procedure, appended to expiry messages.
const RemintHint = "re-mint: pulumi config set --path railgrid-kcp:hub.remintGeneration <n+1>, pulumi up, then restart the hub"

// checkHubKubeconfig reads the hub's Secret and checks its kubeconfig: the server is the
// in-cluster front-proxy Service and the client certificate is valid, with a warning
// when it expires within MinValidity. Nothing of the kubeconfig is ever printed beyond
// the server URL, the certificate subject and its validity dates.
func checkHubKubeconfig(ctx context.Context, o *Options) []Result {
	data, failed := readHubKubeconfig(ctx, o, CheckHubKubeconfig)
	if failed != nil {
		return []Result{*failed}
	}
	item := fmt.Sprintf("Secret %s/%s key %s", o.Config.Hub.Namespace, o.Config.Hub.SecretName, o.Config.Hub.SecretKey)

	kc, err := clientcmd.Load(data)
	if err != nil {
		// Only the error's first line, which names the problem, never the content.
		return []Result{fail(CheckHubKubeconfig, item, "is not a valid kubeconfig: %s", errtext.FirstLine(err.Error()))}
	}
	ctxName, kctx := currentContext(kc)
	if kctx == nil {
		return []Result{fail(CheckHubKubeconfig, item, "has no usable current context (current-context %q)", kc.CurrentContext)}
	}
	var problems, notes []string
	status := StatusPass

	cluster := kc.Clusters[kctx.Cluster]
	switch {
	case cluster == nil:
		problems = append(problems, fmt.Sprintf("context %q names cluster %q, which is missing", ctxName, kctx.Cluster))
	default:
		u, err := url.Parse(cluster.Server)
		if err != nil || u.Scheme != "https" || u.Host != HubServerHost() {
			problems = append(problems, fmt.Sprintf("server is %q, want the in-cluster front-proxy Service https://%s (a path may follow)", errtext.URL(cluster.Server), HubServerHost()))
		} else {
			notes = append(notes, "server "+errtext.URL(cluster.Server))
		}
	}

	user := kc.AuthInfos[kctx.AuthInfo]
	switch {
	case user == nil:
		problems = append(problems, fmt.Sprintf("context %q names user %q, which is missing", ctxName, kctx.AuthInfo))
	case len(user.ClientCertificateData) == 0:
		problems = append(problems, "user has no inline client certificate (client-certificate-data)")
	default:
		cert, err := pemcert.Leaf(user.ClientCertificateData)
		if err != nil {
			problems = append(problems, "client certificate: "+err.Error())
			break
		}
		now := o.Now()
		left := cert.NotAfter.Sub(now)
		days := int(math.Floor(left.Hours() / 24))
		until := cert.NotAfter.UTC().Format(time.RFC3339)
		subject := "client certificate CN=" + cert.Subject.CommonName
		switch {
		case now.Before(cert.NotBefore):
			problems = append(problems, fmt.Sprintf("%s is not valid before %s", subject, cert.NotBefore.UTC().Format(time.RFC3339)))
		case left <= 0:
			problems = append(problems, fmt.Sprintf("%s expired at %s (%d day(s) ago); %s", subject, until, int(math.Ceil(-left.Hours()/24)), RemintHint))
		case left < o.MinValidity:
			status = StatusWarn
			notes = append(notes, fmt.Sprintf("%s expires at %s, in %d day(s), less than the %d-day threshold; %s", subject, until, days, int(o.MinValidity.Hours()/24), RemintHint))
		default:
			notes = append(notes, fmt.Sprintf("%s valid until %s (%d days left)", subject, until, days))
		}
	}
	if len(problems) > 0 {
		return []Result{fail(CheckHubKubeconfig, item, "%s", strings.Join(problems, "; "))}
	}
	return []Result{{Check: CheckHubKubeconfig, Item: item, Status: status, Message: strings.Join(notes, "; ")}}
}

// readHubKubeconfig reads the kubeconfig the hub mounts: the configured key of the hub
// Secret. When it cannot, the failed Result of check says why.
func readHubKubeconfig(ctx context.Context, o *Options, check string) ([]byte, *Result) {
	hub := o.Config.Hub
	item := fmt.Sprintf("Secret %s/%s", hub.Namespace, hub.SecretName)
	secret, err := o.Kube.CoreV1().Secrets(hub.Namespace).Get(ctx, hub.SecretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r := fail(check, item, "not found: pulumi up copies the minted kubeconfig there")
		return nil, &r
	case err != nil:
		r := fail(check, item, "cannot read: %v", err)
		return nil, &r
	}
	data, ok := secret.Data[hub.SecretKey]
	if !ok || len(data) == 0 {
		keys := make([]string, 0, len(secret.Data))
		for k := range secret.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		r := fail(check, item, "has no key %s (keys: %s); the hub chart mounts that key", hub.SecretKey, errtext.List(keys))
		return nil, &r
	}
	return data, nil
}

// currentContext is the kubeconfig's current context, or its only context.
func currentContext(kc *clientcmdapi.Config) (string, *clientcmdapi.Context) {
	if c := kc.Contexts[kc.CurrentContext]; c != nil {
		return kc.CurrentContext, c
	}
	if kc.CurrentContext == "" && len(kc.Contexts) == 1 {
		for name, c := range kc.Contexts {
			return name, c
		}
	}
	return "", nil
}

// HubKubeconfigCA returns the CA certificates (PEM) of the hub kubeconfig's cluster: the
// kcp server CA, which also issued the certificates the shards and the front proxy
// present. The kind edge passes TLS through, so the ingress check trusts it there.
func HubKubeconfigCA(ctx context.Context, kube kubernetes.Interface, cfg *config.Config) ([]byte, error) {
	secret, err := kube.CoreV1().Secrets(cfg.Hub.Namespace).Get(ctx, cfg.Hub.SecretName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	kc, err := clientcmd.Load(secret.Data[cfg.Hub.SecretKey])
	if err != nil {
		return nil, fmt.Errorf("hub kubeconfig: %s", errtext.FirstLine(err.Error()))
	}
	_, kctx := currentContext(kc)
	if kctx == nil || kc.Clusters[kctx.Cluster] == nil || len(kc.Clusters[kctx.Cluster].CertificateAuthorityData) == 0 {
		return nil, errors.New("hub kubeconfig has no certificate-authority-data")
	}
	return kc.Clusters[kctx.Cluster].CertificateAuthorityData, nil
}
