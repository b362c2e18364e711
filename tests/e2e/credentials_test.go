//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// credential is a hub credential as the operator wrote it into its Kubeconfig's Secret.
type credential struct {
	Secret     string // <ns>/<name> of the operator's Secret
	Kubeconfig []byte
	Cert       *x509.Certificate
	// Marker is the certificate's serial number (as bytes): unique per issuance, so
	// the leak search can look for it in the state.
	Marker string
}

// readCredential reads the kubeconfig the operator wrote for the Kubeconfig object name.
func readCredential(ctx context.Context, c *cluster, name string) (credential, error) {
	secret, err := c.kube.CoreV1().Secrets(naming.NamespaceKcp).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return credential{}, err
	}
	return parseCredential(naming.NamespaceKcp+"/"+name, secret)
}

func parseCredential(id string, secret *corev1.Secret) (credential, error) {
	data := secret.Data[naming.KubeconfigSecretKey]
	if len(data) == 0 {
		return credential{}, fmt.Errorf("%s has no key %s", id, naming.KubeconfigSecretKey)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return credential{}, fmt.Errorf("%s: %w", id, err)
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil || cfg.AuthInfos[kctx.AuthInfo] == nil {
		return credential{}, fmt.Errorf("%s: no current context with a user", id)
	}
	block, _ := pem.Decode(cfg.AuthInfos[kctx.AuthInfo].ClientCertificateData)
	if block == nil {
		return credential{}, fmt.Errorf("%s: the client certificate is not PEM", id)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return credential{}, fmt.Errorf("%s: %w", id, err)
	}
	return credential{Secret: id, Kubeconfig: data, Cert: cert, Marker: string(cert.SerialNumber.Bytes())}, nil
}

// certificateSecrets lists the cert-manager Certificates of kcp-system that issue the hub
// credential (kubeconfig-cert-<Kubeconfig>) with their Secrets, if still there.
func certificateSecrets(ctx context.Context, c *cluster) ([]string, error) {
	list, err := c.dyn.Resource(certificateGVR).Namespace(naming.NamespaceKcp).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, crt := range list.Items {
		if !strings.HasPrefix(crt.GetName(), "kubeconfig-cert-") {
			continue
		}
		secretName, _, _ := unstructured.NestedString(crt.Object, "spec", "secretName")
		state := "Secret " + secretName
		if _, err := c.kube.CoreV1().Secrets(naming.NamespaceKcp).Get(ctx, secretName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			state += " (gone)"
		}
		out = append(out, "Certificate "+crt.GetName()+", "+state)
	}
	slices.Sort(out)
	return out, nil
}

// checkHubSecret checks the hub Secret against the credential the operator wrote and the
// stack outputs.
func checkHubSecret(t *testing.T, ctx context.Context, e *env, p rendered, minted credential) {
	t.Helper()
	hub := p.cfg.Hub
	secret, err := e.c.kube.CoreV1().Secrets(hub.Namespace).Get(ctx, hub.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the hub Secret %s/%s: %v", hub.Namespace, hub.SecretName, err)
	}
	var keys []string
	for k := range secret.Data {
		keys = append(keys, k)
	}
	if len(keys) != 1 || keys[0] != hub.SecretKey {
		t.Errorf("the hub Secret has keys %v, want exactly %s", keys, hub.SecretKey)
	}
	got := secret.Data[hub.SecretKey]
	if !bytes.Equal(got, minted.Kubeconfig) {
		t.Errorf("the hub Secret's %s is not the kubeconfig the operator wrote into %s (serial %x)", hub.SecretKey, minted.Secret, minted.Cert.SerialNumber)
	}
	facts, err := parseMinted(got)
	if err != nil {
		t.Fatalf("the hub Secret's kubeconfig: %v", err)
	}
	wantServer := fmt.Sprintf("https://%s:%d", naming.OperatorServiceHost(naming.FrontProxyDeployment(naming.FrontProxyName)), naming.KcpPort)
	if facts.server != wantServer {
		t.Errorf("the hub kubeconfig's server is %s, want the in-cluster front proxy %s", facts.server, wantServer)
	}
	if facts.cn != naming.KubeconfigUsername || !slices.Contains(facts.orgs, naming.KubeconfigAdminGroup) {
		t.Errorf("the hub credential is CN=%s O=%v, want CN=%s and O %s", facts.cn, facts.orgs, naming.KubeconfigUsername, naming.KubeconfigAdminGroup)
	}
	validity := p.cfg.KubeconfigValidity()
	if d := minted.Cert.NotAfter.Sub(minted.Cert.NotBefore); d < validity-2*time.Minute || d > validity+2*time.Minute {
		t.Errorf("the hub credential is valid for %s, want %s", d, validity)
	}
	outs, err := e.stack.stack.Outputs(ctx)
	if err != nil {
		t.Fatalf("stack outputs: %v", err)
	}
	if v := outs["hubKubeconfigExpiresAt"]; v.Value != facts.notAfter {
		t.Errorf("output hubKubeconfigExpiresAt is %v, the certificate expires %s", v.Value, facts.notAfter)
	}
	if v := outs["kcpRootServerCA"]; v.Value != facts.caPEM || v.Secret {
		t.Errorf("output kcpRootServerCA (secret %v) is not the kubeconfig's CA", v.Secret)
	}
	ca, err := e.c.kube.CoreV1().Secrets(naming.NamespaceKcp).Get(ctx, naming.RootShardName+"-server-ca", metav1.GetOptions{})
	if err != nil || string(ca.Data["tls.crt"]) != facts.caPEM {
		t.Errorf("the kubeconfig's CA is not kcp-system/root-server-ca (%v)", err)
	}
	if v := outs["hubSecretName"]; v.Value != hub.SecretName {
		t.Errorf("output hubSecretName is %v, want %s", v.Value, hub.SecretName)
	}
}

// checkNoPlaintext checks that `pulumi stack export` holds none of the minted
// credentials in plaintext (nor base64 of it, at any depth), while it does hold the hub
// Secret, encrypted.
func checkNoPlaintext(t *testing.T, ctx context.Context, e *env, mints []credential) {
	t.Helper()
	d := e.stack.export(ctx)
	var needles []string
	for _, m := range mints {
		needles = append(needles, m.Marker)
		cfg, err := parseMintedRaw(m.Kubeconfig)
		if err == nil {
			needles = append(needles, cfg.clientKeyB64, cfg.clientCertB64)
		}
	}
	// The search must be able to see a leak: the hub Secret as the API returns it
	// (base64 of the kubeconfig) has to light up.
	probe := fmt.Sprintf(`{"data":{"admin.kubeconfig":%q}}`, base64.StdEncoding.EncodeToString(mints[len(mints)-1].Kubeconfig))
	if len(leakSearch([]byte(probe), mints[len(mints)-1].Marker)) == 0 {
		t.Fatalf("the leak search does not find the certificate's serial in the hub Secret's own data; it proves nothing")
	}
	leaked := false
	search := newLeakSearcher(needles...)
	if leaks := search.search(d.raw); len(leaks) > 0 {
		leaked = true
		t.Errorf("pulumi stack export holds the hub credential in plaintext:%s", indent(leaks))
	}
	files, err := e.stack.stateFiles()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if leaks := search.search(data); len(leaks) > 0 {
			leaked = true
			t.Errorf("the backend's %s holds the hub credential in plaintext:%s", name, indent(leaks))
		}
	}
	// The hub Secret is declared without data (its copy fills it in the cluster): none
	// in its inputs, and any its outputs hold (after a refresh) encrypted. The read of
	// the operator's kubeconfig Secret holds it, encrypted.
	hubURN := e.plan.urnOf("Secret", e.plan.cfg.Hub.SecretName)
	found, foundRead := false, false
	for _, r := range d.Resources {
		switch {
		case r.URN == hubURN:
			found = true
			if r.Inputs["data"] != nil {
				t.Errorf("the hub Secret has data in its inputs in the state: %s", compact(r.Inputs["data"]))
			}
			if r.Outputs["data"] != nil && !encryptedSecret(r.Outputs["data"]) {
				t.Errorf("the hub Secret's data is not an encrypted secret in the state: %s", compact(r.Outputs["data"]))
			}
		case strings.HasSuffix(r.URN, "::"+hubMintedRead):
			foundRead = true
			if !encryptedSecret(r.Outputs["data"]) {
				t.Errorf("the read of the operator's kubeconfig Secret is not an encrypted secret in the state: %s", compact(r.Outputs["data"]))
			}
		}
	}
	if !found || !foundRead {
		t.Errorf("the hub Secret %s (%v) or the read of the operator's Secret (%v) is not in the state", shortURN(hubURN), found, foundRead)
	}
	if !leaked {
		t.Logf("pulumi stack export (%d bytes, %d resources) and the %d files of the backend hold none of the %d credentials (marker, certificate, key)",
			len(d.raw), len(d.Resources), len(files), len(mints))
	}
}

// hubMintedRead is the resource name of the stack's read of the operator's kubeconfig
// Secret (components/hubkubeconfig.go, readMintedKubeconfig).
const hubMintedRead = "railgrid-kcp-hub-minted"

// encryptedSecret says whether a value of the state is a secret, encrypted.
func encryptedSecret(v any) bool {
	data, _ := v.(map[string]any)
	return data != nil && data[secretSig] == secretSigValue && data["ciphertext"] != nil && data["plaintext"] == nil
}

// The signature Pulumi marks a secret value with in the state.
const (
	secretSig      = "4dabf18193072939515e22adb298388d"
	secretSigValue = "1b47061264138c4ac30d75fd1eb44270"
)

type rawKubeconfig struct{ clientCertB64, clientKeyB64 string }

// parseMintedRaw returns the base64 certificate and key data as written in the kubeconfig.
func parseMintedRaw(data []byte) (rawKubeconfig, error) {
	var out rawKubeconfig
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "client-certificate-data: "); ok {
			out.clientCertB64 = v
		}
		if v, ok := strings.CutPrefix(line, "client-key-data: "); ok {
			out.clientKeyB64 = v
		}
	}
	if out.clientCertB64 == "" || out.clientKeyB64 == "" {
		return out, fmt.Errorf("no client certificate or key data")
	}
	return out, nil
}

// kubeconfigFacts are what the test checks of a minted kubeconfig.
type kubeconfigFacts struct {
	server   string
	cn       string
	orgs     []string
	ous      []string
	notAfter string
	caPEM    string
}

func parseMinted(data []byte) (kubeconfigFacts, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return kubeconfigFacts{}, err
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return kubeconfigFacts{}, fmt.Errorf("no current context")
	}
	user := cfg.AuthInfos[ctx.AuthInfo]
	base := cfg.Clusters["base"]
	if user == nil || base == nil {
		return kubeconfigFacts{}, fmt.Errorf("no user or no base cluster")
	}
	block, _ := pem.Decode(user.ClientCertificateData)
	if block == nil {
		return kubeconfigFacts{}, fmt.Errorf("client certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return kubeconfigFacts{}, err
	}
	return kubeconfigFacts{
		server: base.Server, cn: cert.Subject.CommonName, orgs: cert.Subject.Organization,
		ous: cert.Subject.OrganizationalUnit, notAfter: cert.NotAfter.UTC().Format("2006-01-02T15:04:05Z07:00"),
		caPEM: string(base.CertificateAuthorityData),
	}, nil
}

// hubKubeconfig reads the kubeconfig the hub reads.
func hubKubeconfig(t *testing.T, ctx context.Context, e *env) []byte {
	t.Helper()
	hub := e.plan.cfg.Hub
	secret, err := e.c.kube.CoreV1().Secrets(hub.Namespace).Get(ctx, hub.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the hub Secret: %v", err)
	}
	if len(secret.Data[hub.SecretKey]) == 0 {
		t.Fatalf("the hub Secret has no %s", hub.SecretKey)
	}
	return secret.Data[hub.SecretKey]
}

// frontProxyDial reaches the front proxy's owned Service.
func frontProxyDial(e *env) verify.DialFunc {
	return verify.ServiceDialFunc(&verify.PortForwardDialer{Kube: e.c.kube, Config: e.c.rest},
		naming.NamespaceKcp, naming.OwnedServiceName(naming.FrontProxyName), naming.KcpPort)
}

// checkHubCredentialWorks uses the hub's credential through the front proxy, and shows
// that the check refuses a credential of the same name from another CA.
func checkHubCredentialWorks(t *testing.T, ctx context.Context, e *env, label string) {
	t.Helper()
	kubeconfig := hubKubeconfig(t, ctx, e)
	dial := frontProxyDial(e)
	var got verify.Result
	// The front proxy reloads a renewed client CA bundle within seconds; a re-mint does
	// not change the CA, so the first answer must already be right.
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	got = verify.VerifyHubCredential(cctx, kubeconfig, dial)
	if got.Status != verify.StatusPass {
		t.Fatalf("%s: the hub's credential does not work through the front proxy: %s", label, got.Message)
	}
	t.Logf("%s: %s", label, got.Message)

	forged, err := withClientCertFromAnotherCA(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	refused := verify.VerifyHubCredential(cctx, forged, dial)
	if refused.Status != verify.StatusFail || !strings.Contains(refused.Message, "401") {
		t.Errorf("%s: a client certificate for %s from another CA was not refused with 401: %s %s", label, naming.KubeconfigUsername, refused.Status, refused.Message)
	} else {
		t.Logf("%s: a credential from another CA: %s", label, refused.Message)
	}
}

// withClientCertFromAnotherCA is kubeconfig with its client certificate and key replaced
// by ones of the same user and group, signed by a CA of the test's own.
func withClientCertFromAnotherCA(kubeconfig []byte) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	ca, err := pki.NewCA("railgrid-e2e-other-ca")
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.Issue(&x509.Certificate{SerialNumber: big.NewInt(2),
		Subject:     pkix.Name{CommonName: naming.KubeconfigUsername, Organization: []string{naming.KubeconfigAdminGroup}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return nil, err
	}
	for _, auth := range cfg.AuthInfos {
		auth.ClientCertificateData, auth.ClientKeyData = cert, key
	}
	return clientcmd.Write(*cfg)
}
