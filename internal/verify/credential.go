package verify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/railgrid/railgrid-kcp/internal/errtext"
	"github.com/railgrid/railgrid-kcp/internal/pemcert"
	"github.com/railgrid/railgrid-kcp/naming"
)

// RootWorkspacePath is the path under a kcp server URL of the root workspace.
const RootWorkspacePath = "/clusters/root"

// KubeconfigRESTConfig turns a kubeconfig into client-go's config for its current
// context, as the hub loads it (clientcmd), with every connection dialled by dial and no
// HTTP proxy. A server URL without a path gets the root workspace's; the operator writes
// it into the current context already. Only a client-certificate credential with inline
// data is accepted: a kubeconfig read from a Secret must not make verify run an exec
// plugin, read a file it names, send another kind of credential or skip verifying the
// server.
func KubeconfigRESTConfig(kubeconfig []byte, dial DialFunc) (*rest.Config, error) {
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("not a valid kubeconfig: %s", errtext.FirstLine(err.Error()))
	}
	name, kctx := currentContext(kc)
	if kctx == nil {
		return nil, fmt.Errorf("no usable current context (current-context %q)", kc.CurrentContext)
	}
	cluster, user := kc.Clusters[kctx.Cluster], kc.AuthInfos[kctx.AuthInfo]
	var problems []string
	switch {
	case cluster == nil:
		problems = append(problems, fmt.Sprintf("context %q names cluster %q, which is missing", name, kctx.Cluster))
	case cluster.InsecureSkipTLSVerify:
		problems = append(problems, "the cluster skips TLS verification (insecure-skip-tls-verify)")
	case cluster.CertificateAuthority != "":
		problems = append(problems, "the cluster names a CA file (certificate-authority), which verify does not read")
	case len(cluster.CertificateAuthorityData) == 0:
		problems = append(problems, "the cluster has no inline CA (certificate-authority-data)")
	}
	switch {
	case user == nil:
		problems = append(problems, fmt.Sprintf("context %q names user %q, which is missing", name, kctx.AuthInfo))
	case user.Exec != nil || user.AuthProvider != nil:
		problems = append(problems, "the user runs an exec plugin or auth provider, which verify does not run")
	case user.ClientCertificate != "" || user.ClientKey != "" || user.TokenFile != "":
		problems = append(problems, "the user names files (client-certificate, client-key or tokenFile), which verify does not read")
	case user.Token != "" || user.Username != "" || user.Password != "" || user.Impersonate != "":
		problems = append(problems, "the user carries a token, a password or impersonation besides a client certificate")
	case len(user.ClientCertificateData) == 0 || len(user.ClientKeyData) == 0:
		problems = append(problems, "the user has no inline client certificate and key (client-certificate-data, client-key-data)")
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*kc, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %s", errtext.FirstLine(err.Error()))
	}
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("server %q is not an https URL", errtext.URL(cfg.Host))
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = RootWorkspacePath
		cfg.Host = u.String()
	}
	if cfg.TLSClientConfig.ServerName == "" {
		cfg.TLSClientConfig.ServerName = u.Hostname()
	}
	cfg.Dial = dial
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	cfg.UserAgent = "railgrid-kcp-verify"
	cfg.Timeout = 15 * time.Second
	return cfg, nil
}

// ReviewSelf asks kcp who the config's credential is: a SelfSubjectReview
// (authentication.k8s.io/v1) in the workspace of the config's server URL.
func ReviewSelf(ctx context.Context, cfg *rest.Config) (authenticationv1.UserInfo, error) {
	client, err := authenticationv1client.NewForConfig(cfg)
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	review, err := client.SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return review.Status.UserInfo, nil
}

// VerifyHubCredential is the hub-credential check on any kubeconfig: it authenticates
// with the kubeconfig as the hub does (its client certificate, its CA, its server name),
// every connection dialled by dial, and passes when kcp sees the admin user the hub's
// Kubeconfig object asks for (naming.KubeconfigUsername) in group
// naming.KubeconfigAdminGroup. A credential kcp refuses fails naming the 401, a server
// the kubeconfig's CA does not verify fails naming the TLS error. Nothing of the
// kubeconfig is printed but the server URL and the client certificate's subject.
func VerifyHubCredential(ctx context.Context, kubeconfig []byte, dial DialFunc) Result {
	item := "hub kubeconfig"
	cfg, err := KubeconfigRESTConfig(kubeconfig, dial)
	if err != nil {
		return fail(CheckHubCredential, item, "unusable: %v; the operator writes a client-certificate kubeconfig: %s", err, RemintHint)
	}
	item = "SelfSubjectReview at " + errtext.URL(cfg.Host)
	subject := "client certificate (unparsable)"
	if cert, err := pemcert.Leaf(cfg.TLSClientConfig.CertData); err == nil {
		subject = fmt.Sprintf("client certificate %s issued by %s", cert.Subject, cert.Issuer)
	}
	logs := fmt.Sprintf("kubectl -n %s logs deploy/%s", naming.NamespaceKcp, naming.FrontProxyDeployment(naming.FrontProxyName))
	user, err := ReviewSelf(ctx, cfg)
	if err != nil {
		return fail(CheckHubCredential, item, "%s (%s); look at %s", describeKcpError(err, cfg), subject, logs)
	}
	seen := fmt.Sprintf("kcp sees user %q in groups [%s]", user.Username, strings.Join(user.Groups, ", "))
	var problems []string
	if user.Username != naming.KubeconfigUsername {
		problems = append(problems, fmt.Sprintf("want user %q (the Kubeconfig object's spec.username)", naming.KubeconfigUsername))
	}
	if !slices.Contains(user.Groups, naming.KubeconfigAdminGroup) {
		problems = append(problems, fmt.Sprintf("want group %s (the Kubeconfig object's spec.groups): the front proxy drops system:masters, so admin access through it needs %s",
			naming.KubeconfigAdminGroup, naming.KubeconfigAdminGroup))
	}
	if len(problems) > 0 {
		return fail(CheckHubCredential, item, "%s, %s (%s); %s", seen, strings.Join(problems, "; "), subject, RemintHint)
	}
	return pass(CheckHubCredential, item, "%s (%s)", seen, subject)
}

// describeKcpError says what a failed request to kcp means: a refused credential (401),
// a refused request (403), a server the kubeconfig's CA does not verify, or another
// failure to connect.
func describeKcpError(err error, cfg *rest.Config) string {
	var verifyErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case apierrors.IsUnauthorized(err):
		return "kcp answered 401 Unauthorized: the front proxy does not accept the client certificate; it must be issued by kcp's root-client-ca and be valid"
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("kcp answered 403 Forbidden (%s): the credential authenticates but may not do this", errtext.FirstLine(err.Error()))
	case errors.As(err, &verifyErr), errors.As(err, &unknownCA), errors.As(err, &hostname):
		return fmt.Sprintf("TLS: the server's certificate is not verified by the kubeconfig's certificate-authority-data for %s: %v", cfg.TLSClientConfig.ServerName, unwrapURLError(err))
	case strings.Contains(err.Error(), "tls:"):
		return fmt.Sprintf("TLS handshake failed: %v", unwrapURLError(err))
	}
	return fmt.Sprintf("request failed: %v", unwrapURLError(err))
}

func unwrapURLError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return fmt.Errorf("%s %s: %w", uerr.Op, errtext.URL(uerr.URL), uerr.Err)
	}
	return err
}

// checkHubCredential runs VerifyHubCredential on the hub Secret's kubeconfig through the
// front proxy's owned Service, retrying until it passes or the check times out.
func checkHubCredential(ctx context.Context, o *Options) []Result {
	return poll(ctx, o.Interval, func(ctx context.Context) []Result {
		data, failed := readHubKubeconfig(ctx, o, CheckHubCredential)
		if failed != nil {
			return []Result{*failed}
		}
		return []Result{VerifyHubCredential(ctx, data, frontProxyService(o.Config).dial(o))}
	})
}
