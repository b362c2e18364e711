package pki

import (
	"crypto/x509"
	"encoding/pem"
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

// An intermediate is a CA its parent signs, valid as long as its parent: a leaf it
// issues verifies against the parent with the intermediate in the chain, and not
// without it.
func TestAnIntermediateChainsToItsParent(t *testing.T) {
	root := MustCA(t, "root-ca")
	mid := root.MustIntermediate(t, "root-client-ca")
	if !mid.Cert.IsCA || mid.Cert.Issuer.CommonName != "root-ca" || !mid.Cert.NotAfter.Equal(root.Cert.NotAfter) {
		t.Fatalf("intermediate: IsCA %v, issuer %s, valid until %s (root until %s)", mid.Cert.IsCA, mid.Cert.Issuer, mid.Cert.NotAfter, root.Cert.NotAfter)
	}
	leaf := mid.MustClientCert(t, "kcp-admin", []string{"system:kcp:admin"})
	intermediates := x509.NewCertPool()
	intermediates.AddCert(mid.Cert)
	opts := x509.VerifyOptions{Roots: root.Pool(), Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := leaf.Cert.Verify(opts); err != nil {
		t.Errorf("the leaf does not verify through the intermediate: %v", err)
	}
	opts.Intermediates = nil
	if _, err := leaf.Cert.Verify(opts); err == nil {
		t.Error("the leaf verifies against the root without the intermediate")
	}
}

// Bundle holds the CAs' certificates in order; CAFile writes one CA as dir/ca.crt.
func TestBundleAndCAFile(t *testing.T) {
	a, b := MustCA(t, "a"), MustCA(t, "b")
	var got []string
	for rest := Bundle(a, b); ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c.Subject.CommonName)
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("bundle holds %v, want [a b]", got)
	}
	path := a.CAFile(t, t.TempDir())
	data, err := os.ReadFile(path)
	if err != nil || filepath.Base(path) != "ca.crt" || string(data) != string(a.PEM) {
		t.Errorf("CAFile wrote %s: %v", path, err)
	}
}

// The Must forms give what their error-returning forms give; a server certificate's
// TLS pair is its certificate.
func TestMustForms(t *testing.T) {
	ca := MustCA(t, "ca", CommonName("renamed"))
	if ca.Cert.Subject.CommonName != "renamed" {
		t.Errorf("MustCA ignored its option: %s", ca.Cert.Subject)
	}
	pair := ca.MustServerCert(t, []string{"a.example.com"}).MustTLS(t)
	if pair.Leaf == nil || pair.Leaf.DNSNames[0] != "a.example.com" {
		t.Errorf("TLS pair leaf %v", pair.Leaf)
	}
}
