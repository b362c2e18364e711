package kcpadmin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/errtext"
	"github.com/railgrid/railgrid-kcp/internal/pemcert"
	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// OperatorKubeconfigKey is the key under which the kcp-operator writes a Kubeconfig
// object's kubeconfig into its Secret. components.KubeconfigSecretKey names the same
// key; it is repeated here because this package must not link the Pulumi SDK.
const OperatorKubeconfigKey = "kubeconfig"

// CredentialSecret is the Secret the operator writes for the Kubeconfig object of the
// stack's current re-mint generation: the hub's credential, kcp-admin in
// system:kcp:admin through the front proxy.
func CredentialSecret(cfg *config.Config) (namespace, name string) {
	return naming.NamespaceKcp, naming.KubeconfigObjectName(cfg.Hub.RemintGeneration)
}

// Credential is what the admin kubeconfig is made of, taken from the operator's
// kubeconfig: the front proxy's address and TLS name, the CA that verifies it, and the
// client certificate with its key. Only Describe's parts (subject, issuer, dates) are
// ever printed.
type Credential struct {
	// Secret is where it was read, namespace/name.
	Secret string
	// Server is the operator's server URL, the in-cluster front-proxy Service with the
	// root workspace's path.
	Server *url.URL
	// ServerName is the name the front proxy's serving certificate carries: the
	// kubeconfig's tls-server-name, or else the host of Server.
	ServerName string
	// CAData verifies the front proxy (certificate-authority-data).
	CAData []byte
	// CertData is the client certificate chain as the operator wrote it, leaf first,
	// and KeyData its key.
	CertData, KeyData []byte
	// Leaf is the client certificate.
	Leaf *x509.Certificate
}

// ReadCredential reads the operator's Secret for the stack's current re-mint generation
// and parses its kubeconfig. Its errors say which Secret and what to do.
func ReadCredential(ctx context.Context, kube kubernetes.Interface, cfg *config.Config, now time.Time) (*Credential, error) {
	namespace, name := CredentialSecret(cfg)
	id := namespace + "/" + name
	generation := cfg.Hub.RemintGeneration
	secret, err := kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("Secret %s not found: the kcp-operator writes it for the Kubeconfig object %s of hub.remintGeneration %d once that object is Available; run pulumi up, then look at kubectl -n %s get kubeconfig %s",
			id, name, generation, namespace, name)
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("cannot read Secret %s: forbidden: the kube context needs get on secrets in %s (%s)", id, namespace, errtext.FirstLine(err.Error()))
	case err != nil:
		return nil, fmt.Errorf("cannot read Secret %s: %s", id, errtext.FirstLine(err.Error()))
	}
	data := secret.Data[OperatorKubeconfigKey]
	if len(data) == 0 {
		keys := make([]string, 0, len(secret.Data))
		for k := range secret.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return nil, fmt.Errorf("Secret %s has no key %s (keys: %s): it is not the operator's kubeconfig Secret (kubectl -n %s get kubeconfig %s)",
			id, OperatorKubeconfigKey, errtext.List(keys), namespace, name)
	}
	cred, err := ParseCredential(data, now)
	if err != nil {
		return nil, fmt.Errorf("Secret %s key %s: %w", id, OperatorKubeconfigKey, err)
	}
	cred.Secret = id
	return cred, nil
}

// ParseCredential takes the current context's server, CA and client certificate out of
// the operator's kubeconfig. It accepts only inline data: nothing named in the
// kubeconfig is read or run. An expired certificate is refused, with the re-mint
// procedure; error messages never quote the kubeconfig.
func ParseCredential(kubeconfig []byte, now time.Time) (*Credential, error) {
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("not a valid kubeconfig: %s", errtext.FirstLine(err.Error()))
	}
	kctx := kc.Contexts[kc.CurrentContext]
	if kctx == nil {
		return nil, fmt.Errorf("no usable current context (current-context %q)", kc.CurrentContext)
	}
	cluster, user := kc.Clusters[kctx.Cluster], kc.AuthInfos[kctx.AuthInfo]
	var problems []string
	switch {
	case cluster == nil:
		problems = append(problems, fmt.Sprintf("the current context names cluster %q, which is missing", kctx.Cluster))
	case cluster.InsecureSkipTLSVerify:
		problems = append(problems, "the cluster skips TLS verification (insecure-skip-tls-verify)")
	case len(cluster.CertificateAuthorityData) == 0:
		problems = append(problems, "the cluster has no inline CA (certificate-authority-data)")
	}
	switch {
	case user == nil:
		problems = append(problems, fmt.Sprintf("the current context names user %q, which is missing", kctx.AuthInfo))
	case len(user.ClientCertificateData) == 0 || len(user.ClientKeyData) == 0:
		problems = append(problems, "the user has no inline client certificate and key (client-certificate-data, client-key-data)")
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	server, err := url.Parse(cluster.Server)
	if err != nil || server.Scheme != "https" || server.Host == "" {
		return nil, fmt.Errorf("server %q is not an https URL", errtext.URL(cluster.Server))
	}
	server.User, server.RawQuery, server.Fragment = nil, "", ""
	if server.Path == "" || server.Path == "/" {
		server.Path = verify.RootWorkspacePath
	}
	if !x509.NewCertPool().AppendCertsFromPEM(cluster.CertificateAuthorityData) {
		return nil, errors.New("certificate-authority-data holds no PEM certificate")
	}
	if _, err := tls.X509KeyPair(user.ClientCertificateData, user.ClientKeyData); err != nil {
		return nil, fmt.Errorf("client certificate and key are not a usable pair: %s", errtext.FirstLine(err.Error()))
	}
	leaf, err := pemcert.Leaf(user.ClientCertificateData)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	cred := &Credential{
		Server:     server,
		ServerName: cluster.TLSServerName,
		CAData:     cluster.CertificateAuthorityData,
		CertData:   user.ClientCertificateData,
		KeyData:    user.ClientKeyData,
		Leaf:       leaf,
	}
	if cred.ServerName == "" {
		cred.ServerName = server.Hostname()
	}
	if !now.Before(leaf.NotAfter) {
		return nil, fmt.Errorf("%s expired at %s; %s", cred.Describe(), leaf.NotAfter.UTC().Format(time.RFC3339), verify.RemintHint)
	}
	return cred, nil
}

// Describe names the client certificate without anything secret: subject and issuer.
func (c *Credential) Describe() string {
	return fmt.Sprintf("client certificate %s issued by %s", c.Leaf.Subject, c.Leaf.Issuer)
}
