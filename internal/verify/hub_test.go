package verify_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

const hubItem = "Secret railgrid-system/railgrid-kcp key admin.kubeconfig"

// setHubKubeconfig replaces the hub Secret's kubeconfig with one for server whose client
// certificate is valid from notBefore to notAfter; it returns the certificate and key.
func setHubKubeconfig(t *testing.T, f *fixture, server string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	c := verifytest.AdminCert(t, f.cluster.CA, "kcp-admin", notBefore, notAfter)
	setHubSecret(t, f, verifytest.HubSecret(f.cfg, verifytest.Kubeconfig(t, server, f.cluster.CA.PEM, c.CertPEM, c.KeyPEM)))
	return c.CertPEM, c.KeyPEM
}

func setHubSecret(t *testing.T, f *fixture, s *corev1.Secret) {
	t.Helper()
	if _, err := f.cluster.Kube.CoreV1().Secrets(s.Namespace).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var inCluster = "https://frontproxy-front-proxy.kcp-system.svc.cluster.local:6443"

func TestHubKubeconfigPasses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	certPEM, keyPEM := setHubKubeconfig(t, f, inCluster+"/clusters/root", verifytest.Now.Add(-time.Hour), verifytest.Now.Add(200*24*time.Hour))
	results := f.run(t, verify.CheckHubKubeconfig)
	requireStatus(t, results, hubItem, verify.StatusPass,
		"server "+inCluster+"/clusters/root",
		"client certificate CN=kcp-admin valid until 2027-04-19T12:00:00Z (200 days left)")
	requireNoCredential(t, results, certPEM, keyPEM)
}

// requireNoCredential asserts no part of the certificate or key appears in the output,
// in text or JSON.
func requireNoCredential(t *testing.T, results []verify.Result, secrets ...[]byte) {
	t.Helper()
	var out bytes.Buffer
	report := verify.NewReport("kind", "ctx", false, results)
	if err := report.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		for _, line := range strings.Split(string(s), "\n") {
			if len(line) > 16 && !strings.HasPrefix(line, "-----") && strings.Contains(out.String(), line) {
				t.Fatalf("output contains credential material %q", line)
			}
		}
		if enc := base64.StdEncoding.EncodeToString(s); strings.Contains(out.String(), enc[:40]) {
			t.Fatal("output contains base64 credential material")
		}
	}
	if strings.Contains(out.String(), "PRIVATE KEY") {
		t.Fatal("output mentions a private key block")
	}
}

func TestHubKubeconfigWarnsBeforeExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setHubKubeconfig(t, f, inCluster, verifytest.Now.Add(-300*24*time.Hour), verifytest.Now.Add(10*24*time.Hour+time.Hour))
	results := f.run(t, verify.CheckHubKubeconfig)
	requireStatus(t, results, hubItem, verify.StatusWarn,
		"expires at 2026-10-11T13:00:00Z, in 10 day(s), less than the 30-day threshold",
		"pulumi config set --path railgrid-kcp:hub.remintGeneration")
	if !verify.Passed(results, false) {
		t.Error("a warning must not fail the run")
	}
	if verify.Passed(results, true) {
		t.Error("with -strict a warning fails the run")
	}

	// The threshold is configurable: 7 days passes the same certificate.
	f.opts.MinValidity = 7 * 24 * time.Hour
	requireStatus(t, f.run(t, verify.CheckHubKubeconfig), hubItem, verify.StatusPass, "(10 days left)")
}

func TestHubKubeconfigFailsWhenExpired(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	certPEM, keyPEM := setHubKubeconfig(t, f, inCluster, verifytest.Now.Add(-400*24*time.Hour), verifytest.Now.Add(-3*24*time.Hour))
	results := f.run(t, verify.CheckHubKubeconfig)
	requireFail(t, results, hubItem, "client certificate CN=kcp-admin expired at 2026-09-28T12:00:00Z (3 day(s) ago)", "re-mint")
	requireNoCredential(t, results, certPEM, keyPEM)
}

func TestHubKubeconfigFailsWhenNotYetValid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setHubKubeconfig(t, f, inCluster, verifytest.Now.Add(time.Hour), verifytest.Now.Add(400*24*time.Hour))
	requireFail(t, f.run(t, verify.CheckHubKubeconfig), hubItem, "is not valid before 2026-10-01T13:00:00Z")
}

func TestHubKubeconfigFailsWhenTheServerIsThePublicName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	certPEM, keyPEM := setHubKubeconfig(t, f, "https://kcp.example.com:443", verifytest.Now.Add(-time.Hour), verifytest.Now.Add(365*24*time.Hour))
	results := f.run(t, verify.CheckHubKubeconfig)
	requireFail(t, results, hubItem, `server is "https://kcp.example.com:443", want the in-cluster front-proxy Service `+inCluster)
	requireNoCredential(t, results, certPEM, keyPEM)
}

func TestHubKubeconfigFailsWhenTheSecretIsMissingOrIncomplete(t *testing.T) {
	t.Parallel()
	t.Run("no secret", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		if err := f.cluster.Kube.CoreV1().Secrets("railgrid-system").Delete(context.Background(), "railgrid-kcp", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		requireFail(t, f.run(t, verify.CheckHubKubeconfig), "Secret railgrid-system/railgrid-kcp", "not found")
	})
	t.Run("wrong key", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		s := verifytest.HubSecret(f.cfg, nil)
		s.Data = map[string][]byte{"kubeconfig": []byte("apiVersion: v1")}
		setHubSecret(t, f, s)
		requireFail(t, f.run(t, verify.CheckHubKubeconfig), "Secret railgrid-system/railgrid-kcp", "has no key admin.kubeconfig (keys: kubeconfig)")
	})
	t.Run("not a kubeconfig", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		setHubSecret(t, f, verifytest.HubSecret(f.cfg, []byte("{not yaml: [")))
		requireFail(t, f.run(t, verify.CheckHubKubeconfig), hubItem, "is not a valid kubeconfig")
	})
	t.Run("no client certificate", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		setHubSecret(t, f, verifytest.HubSecret(f.cfg, verifytest.Kubeconfig(t, inCluster, f.cluster.CA.PEM, nil, nil)))
		requireFail(t, f.run(t, verify.CheckHubKubeconfig), hubItem, "user has no inline client certificate")
	})
}

// The configured hub namespace and Secret name are the ones read.
func TestHubKubeconfigReadsTheConfiguredSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.cfg.Hub.Namespace, f.cfg.Hub.SecretName = "hub", "kcp-creds"
	results := f.run(t, verify.CheckHubKubeconfig)
	requireFail(t, results, "Secret hub/kcp-creds", "not found")
	raw, _ := json.Marshal(results)
	if !strings.Contains(string(raw), `"check":"hub-kubeconfig"`) {
		t.Errorf("json %s", raw)
	}
}
