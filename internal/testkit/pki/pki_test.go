package pki

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func mustCA(t *testing.T, name string, opts ...Option) *CA {
	t.Helper()
	ca, err := NewCA(name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// A server certificate verifies against its CA for each DNS name and IP address it was
// issued for, and against no other CA.
func TestAServerCertificateVerifiesForItsNamesAgainstItsCA(t *testing.T) {
	ca, other := mustCA(t, "dex-ca"), mustCA(t, "foreign-ca")
	c, err := ca.ServerCert([]string{"dex.example.com", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"dex.example.com", "127.0.0.1"} {
		if _, err := c.Cert.Verify(x509.VerifyOptions{DNSName: name, Roots: ca.Pool()}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := c.Cert.Verify(x509.VerifyOptions{DNSName: "other.example.com", Roots: ca.Pool()}); err == nil {
		t.Error("verified for a name it was not issued for")
	}
	if _, err := c.Cert.Verify(x509.VerifyOptions{DNSName: "dex.example.com", Roots: other.Pool()}); err == nil {
		t.Error("verified against a foreign CA")
	}
	if _, err := c.TLS(); err != nil {
		t.Errorf("the certificate and key do not pair: %v", err)
	}
}

// A client certificate names the user in its CN and the groups in its O, for client
// authentication.
func TestAClientCertificateNamesItsUserAndGroups(t *testing.T) {
	c, err := mustCA(t, "client-ca").ClientCert("kcp-admin", []string{"system:kcp:admin"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Cert.Subject.CommonName != "kcp-admin" || !slices.Equal(c.Cert.Subject.Organization, []string{"system:kcp:admin"}) {
		t.Errorf("subject %v", c.Cert.Subject)
	}
	if !slices.Equal(c.Cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("extended key usage %v", c.Cert.ExtKeyUsage)
	}
}

// Expired and Valid set the validity of a CA and of a leaf; a leaf is otherwise as valid
// as its CA.
func TestValidityOptions(t *testing.T) {
	now := time.Now()
	if ca := mustCA(t, "expired-ca", Expired()); !ca.Cert.NotAfter.Before(now) {
		t.Errorf("an expired CA is valid until %s", ca.Cert.NotAfter)
	}
	ca := mustCA(t, "ca")
	leaf, err := ca.ClientCert("u", nil, Expired())
	if err != nil {
		t.Fatal(err)
	}
	if !leaf.Cert.NotAfter.Before(now) {
		t.Errorf("an expired leaf is valid until %s", leaf.Cert.NotAfter)
	}
	from, until := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	if leaf, err = ca.ClientCert("u", nil, Valid(from, until)); err != nil {
		t.Fatal(err)
	}
	if !leaf.Cert.NotBefore.Equal(from) || !leaf.Cert.NotAfter.Equal(until) {
		t.Errorf("valid %s to %s, want %s to %s", leaf.Cert.NotBefore, leaf.Cert.NotAfter, from, until)
	}
	if leaf, err = ca.ServerCert([]string{"a.example.com"}); err != nil {
		t.Fatal(err)
	}
	if !leaf.Cert.NotBefore.Equal(ca.Cert.NotBefore) || !leaf.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("a leaf without an option is valid %s to %s, its CA %s to %s", leaf.Cert.NotBefore, leaf.Cert.NotAfter, ca.Cert.NotBefore, ca.Cert.NotAfter)
	}
}

// NotACA makes a certificate that x509 does not take for a CA: what it signs does not
// verify.
func TestNotACAIsNoCA(t *testing.T) {
	ca := mustCA(t, "leaf", NotACA())
	if ca.Cert.IsCA || ca.Cert.KeyUsage&x509.KeyUsageCertSign != 0 {
		t.Fatalf("IsCA %v, key usage %v", ca.Cert.IsCA, ca.Cert.KeyUsage)
	}
	c, err := ca.ServerCert([]string{"a.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cert.Verify(x509.VerifyOptions{DNSName: "a.example.com", Roots: ca.Pool()}); err == nil {
		t.Error("a certificate signed by a leaf verifies")
	}
}

// The files are readable by their owner alone.
func TestFilesAreWrittenForTheOwnerAlone(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, "ca")
	c, err := ca.ServerCert([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")}
	if err := ca.WriteCA(paths[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFiles(paths[1], paths[2]); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", p, info.Mode().Perm())
		}
	}
}
