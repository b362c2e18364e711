package verify_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

// The hub's credential is a system:kcp:admin client certificate for the in-cluster
// front proxy (design document, "Mint the hub's kubeconfig"); the fake front proxy reads
// the user from the certificate as kcp's x509 authenticator does.
const credentialItem = "SelfSubjectReview at https://frontproxy-front-proxy.kcp-system.svc.cluster.local:6443/clusters/root"

var inClusterRoot = "https://frontproxy-front-proxy.kcp-system.svc.cluster.local:6443/clusters/root"

// hubCredential is a kubeconfig for the in-cluster front proxy, trusting serverCA, with a
// client certificate for user in groups issued by clientCA.
func hubCredential(t *testing.T, serverCA, clientCA *pki.CA, user string, groups ...string) (kubeconfig, certPEM, keyPEM []byte) {
	t.Helper()
	c := clientCA.MustClientCert(t, user, groups, pki.Valid(verifytest.Now.Add(-time.Hour), verifytest.Now.Add(365*24*time.Hour)))
	return verifytest.Kubeconfig(t, inClusterRoot, serverCA.PEM, c.CertPEM, c.KeyPEM), c.CertPEM, c.KeyPEM
}

func TestHubCredentialPassesForTheAdminThroughTheFrontProxy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	results := f.run(t, verify.CheckHubCredential)
	requireStatus(t, results, credentialItem, verify.StatusPass,
		`kcp sees user "kcp-admin" in groups [system:kcp:admin, system:authenticated]`,
		"client certificate CN=kcp-admin,O=system:kcp:admin issued by CN=verify-test-ca")
	if got := f.kcp.Dials(); !slices.Equal(got, []string{"kcp-system/kcp-frontproxy:6443"}) {
		t.Errorf("dialled %v, want only the front proxy's owned Service", got)
	}
}

// VerifyHubCredential takes any kubeconfig: each case is a credential or a server the
// front proxy and the hub would refuse, and the check fails saying so.
func TestVerifyHubCredentialFailsForAWrongCredential(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ours, other := f.cluster.CA, verifytest.NewCA(t)
	cases := map[string]struct {
		serverCA, clientCA *pki.CA
		user               string
		groups             []string
		want               []string
	}{
		"client certificate from another CA": {ours, other, "kcp-admin", []string{"system:kcp:admin"},
			[]string{"kcp answered 401 Unauthorized", "must be issued by kcp's root-client-ca", "issued by CN=verify-test-ca"}},
		"server from another CA": {other, ours, "kcp-admin", []string{"system:kcp:admin"},
			[]string{"TLS: the server's certificate is not verified by the kubeconfig's certificate-authority-data for frontproxy-front-proxy.kcp-system.svc.cluster.local", "certificate signed by unknown authority"}},
		"another user": {ours, ours, "someone", []string{"system:kcp:admin"},
			[]string{`kcp sees user "someone"`, `want user "kcp-admin" (the Kubeconfig object's spec.username)`, "re-mint"}},
		"no admin group": {ours, ours, "kcp-admin", []string{"system:masters"},
			[]string{"in groups [system:masters, system:authenticated]", "want group system:kcp:admin", "the front proxy drops system:masters"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kubeconfig, certPEM, keyPEM := hubCredential(t, tc.serverCA, tc.clientCA, tc.user, tc.groups...)
			r := verify.VerifyHubCredential(context.Background(), kubeconfig, verify.ServiceDialFunc(f.kcp, "kcp-system", "kcp-frontproxy", 6443))
			results := []verify.Result{r}
			requireFail(t, results, credentialItem, tc.want...)
			requireNoCredential(t, results, certPEM, keyPEM)
		})
	}
}

// The check reads the hub Secret: a credential from another CA there fails the check.
func TestHubCredentialFailsWhenTheHubSecretHoldsAnotherCAsCredential(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kubeconfig, certPEM, keyPEM := hubCredential(t, f.cluster.CA, verifytest.NewCA(t), "kcp-admin", "system:kcp:admin")
	setHubSecret(t, f, verifytest.HubSecret(f.cfg, kubeconfig))
	results := f.run(t, verify.CheckHubCredential)
	requireFail(t, results, credentialItem, "kcp answered 401 Unauthorized", "kubectl -n kcp-system logs deploy/frontproxy-front-proxy")
	requireNoCredential(t, results, certPEM, keyPEM)

	f.cfg.Hub.SecretName = "missing"
	requireFail(t, f.run(t, verify.CheckHubCredential), "Secret railgrid-system/missing", "not found")
}

// A server URL without a path reads the root workspace, as the operator's context does.
func TestHubCredentialAddsTheRootWorkspaceToABareServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setHubKubeconfig(t, f, inCluster, verifytest.Now.Add(-time.Hour), verifytest.Now.Add(time.Hour))
	requireStatus(t, f.run(t, verify.CheckHubCredential), credentialItem, verify.StatusPass, `user "kcp-admin"`)
}

// A kubeconfig from a Secret never makes verify run a plugin, read a file or skip TLS
// verification.
func TestKubeconfigRESTConfigAcceptsOnlyInlineClientCertificates(t *testing.T) {
	t.Parallel()
	ca := verifytest.NewCA(t)
	marker := filepath.Join(t.TempDir(), "ran")
	cases := map[string]struct {
		edit func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)
		want string
	}{
		"exec plugin": {func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Exec = &clientcmdapi.ExecConfig{Command: "touch", Args: []string{marker}, APIVersion: "client.authentication.k8s.io/v1"}
		}, "exec plugin"},
		"file":     {func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.ClientKey = "/etc/passwd" }, "names files"},
		"token":    {func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "abc" }, "carries a token"},
		"insecure": {func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.InsecureSkipTLSVerify = true }, "skips TLS verification"},
		"no CA":    {func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.CertificateAuthorityData = nil }, "no inline CA"},
		"CA file":  {func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.CertificateAuthority = "/etc/ssl/ca.pem" }, "names a CA file"},
		"no key":   {func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.ClientKeyData = nil }, "no inline client certificate and key"},
		"http": {func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.Server = "http://frontproxy-front-proxy.kcp-system.svc.cluster.local:6443"
		}, "is not an https URL"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kubeconfig, _, _ := hubCredential(t, ca, ca, "kcp-admin", "system:kcp:admin")
			kc, err := clientcmd.Load(kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(kc.Clusters["kcp"], kc.AuthInfos["kcp-admin"])
			edited, err := clientcmd.Write(*kc)
			if err != nil {
				t.Fatal(err)
			}
			_, err = verify.KubeconfigRESTConfig(edited, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			r := verify.VerifyHubCredential(context.Background(), edited, nil)
			requireFail(t, []verify.Result{r}, "hub kubeconfig", "unusable", tc.want)
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the exec plugin ran")
	}
}
