package verify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

const hubCopyItem = "Secret railgrid-system/railgrid-kcp key admin.kubeconfig (the hub's credential)"

// setServingCert replaces a TLS Secret's certificate with one of ca valid until notAfter.
func setServingCert(t *testing.T, f *fixture, name string, ca *pki.CA, notAfter time.Time) {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: naming.NamespaceKcp, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{"ca.crt": ca.PEM, "tls.key": []byte("not read"),
			"tls.crt": ca.MustServerCert(t, []string{name}, pki.Valid(verifytest.Now.Add(-time.Hour), notAfter)).CertPEM},
	}
	if _, err := f.cluster.Kube.CoreV1().Secrets(s.Namespace).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestCertificatesPassWithExpiryOfEach(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	results := f.run(t, verify.CheckCertificates)
	requireAll(t, results, verify.StatusPass)
	requireStatus(t, results, "Secret kcp-system/alpha-server tls.crt", verify.StatusPass, "CN=alpha-server valid until 2027-10-01T12:00:00Z (365 days left)")
	requireStatus(t, results, "Secret kcp-system/alpha-server ca.crt", verify.StatusPass, "CN=verify-test-ca valid until 2100-01-01T00:00:00Z")
	requireStatus(t, results, hubCopyItem, verify.StatusPass, "CN=kcp-admin valid until", "the operator's current certificate")
}

// A serving certificate within the threshold of its end was not renewed: it fails,
// named; one just outside passes.
func TestCertificatesFailOnOneCloseToExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setServingCert(t, f, "root-server", f.cluster.CA, verifytest.Now.Add(71*time.Hour))
	setServingCert(t, f, "alpha-server", f.cluster.CA, verifytest.Now.Add(73*time.Hour))
	results := f.run(t, verify.CheckCertificates)
	requireFail(t, results, "Secret kcp-system/root-server tls.crt", "CN=root-server expires at 2026-10-04T11:00:00Z, in 71h0m0s, within the 72h0m0s threshold: it was not renewed")
	requireStatus(t, results, "Secret kcp-system/alpha-server tls.crt", verify.StatusPass, "(3 days left)")

	f.opts.MinCertificateValidity = 100 * time.Hour
	results = f.run(t, verify.CheckCertificates)
	requireFail(t, results, "Secret kcp-system/alpha-server tls.crt", "within the 100h0m0s threshold")
}

// A CA is checked once, under the first Secret that holds it, and fails near its end.
func TestCertificatesCheckEachCAOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	old := pki.MustCA(t, "old-ca", pki.Valid(verifytest.Now.Add(-24*time.Hour), verifytest.Now.Add(24*time.Hour)))
	setServingCert(t, f, "alpha-server", old, verifytest.Now.Add(12*time.Hour))
	results := f.run(t, verify.CheckCertificates)
	requireFail(t, results, "Secret kcp-system/alpha-server ca.crt", "CN=old-ca expires at")
	requireStatus(t, results, "Secret kcp-system/root-frontproxy-server ca.crt", verify.StatusPass, "CN=verify-test-ca")
	cas := 0
	for _, r := range results {
		if r.Item == "Secret kcp-system/root-server ca.crt" {
			cas++
		}
	}
	if cas != 0 {
		t.Errorf("verify-test-ca reported again under root-server:\n%s", dump(results))
	}
}

// The hub's Secret is the stack's copy: once the operator wrote a renewed certificate,
// the stale copy is named with both serials. Within two of the copy's periods of that
// write it is a warning (the copy has not had its turn); after them a failure that
// points at the copy's CronJob.
func TestCertificatesNameAHubCopyThatIsNotTheOperatorsCurrentCertificate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	renewed := verifytest.AdminCert(t, f.cluster.CA, "kcp-admin", verifytest.Now.Add(-time.Minute), verifytest.Now.Add(365*24*time.Hour))
	current := verifytest.OperatorKubeconfigSecret(f.cfg, verifytest.Kubeconfig(t, inCluster, f.cluster.CA.PEM, renewed.CertPEM, renewed.KeyPEM))
	updated, err := f.cluster.Kube.CoreV1().Secrets(current.Namespace).Update(context.Background(), current, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var written time.Time
	for _, m := range updated.ManagedFields {
		if m.Time != nil && m.Time.After(written) {
			written = m.Time.Time
		}
	}
	stale := "not the operator's current certificate, serial " + renewed.Cert.SerialNumber.Text(16)
	for _, c := range []struct {
		after  time.Duration
		status verify.Status
		says   string
	}{
		{time.Minute, verify.StatusWarn, "puts it there at its next run"},
		{time.Hour, verify.StatusFail, `the copy (CronJob kcp-system/railgrid-kcp-hub-copy, hub.copySchedule "*/10 * * * *") has not put it there in 25m0s`},
	} {
		f.opts.Now = func() time.Time { return written.Add(c.after) }
		results := f.run(t, verify.CheckCertificates)
		r := only(t, results, hubCopyItem)
		if r.Status != c.status || !strings.Contains(r.Message, stale) || !strings.Contains(r.Message, "in Secret kcp-system/kcp-kubeconfig-frontproxy key kubeconfig") ||
			!strings.Contains(r.Message, c.says) {
			t.Errorf("%s after the operator's write: %s %s", c.after, r.Status, r.Message)
		}
		requireNoCredential(t, results, renewed.CertPEM, renewed.KeyPEM)
	}
}

func TestCertificatesFailOnAnExpiredHubCopy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setHubKubeconfig(t, f, inCluster, verifytest.Now.Add(-48*time.Hour), verifytest.Now.Add(-time.Hour))
	results := f.run(t, verify.CheckCertificates)
	// The operator's certificate is another one still: both are said.
	requireFail(t, results, hubCopyItem, "CN=kcp-admin expired at 2026-10-01T11:00:00Z; it holds serial", "not the operator's current certificate")
}

func TestCertificatesFailWithoutAnyTLSSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, name := range []string{"root-server", "alpha-server", "root-frontproxy-server"} {
		if err := f.cluster.Kube.CoreV1().Secrets(naming.NamespaceKcp).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	results := f.run(t, verify.CheckCertificates)
	requireFail(t, results, "Secrets in kcp-system", "no TLS Secret")
}
