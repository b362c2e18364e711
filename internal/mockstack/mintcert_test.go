package mockstack

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"
	"time"

	"github.com/railgrid/railgrid-kcp/naming"
)

// The fake kubeconfig's client certificate is the admin's, in the admin group, marked,
// valid from FakeMintTime for the configured validity, and signed by the fake
// root-server-ca; the key pairs with it.
func TestMintedCertsAreTheAdminsSignedByTheServerCA(t *testing.T) {
	validity := 90 * 24 * time.Hour
	certs, err := mintCerts(validity)
	if err != nil {
		t.Fatal(err)
	}
	parse := func(data []byte) *x509.Certificate {
		t.Helper()
		block, _ := pem.Decode(data)
		if block == nil || block.Type != "CERTIFICATE" {
			t.Fatalf("no CERTIFICATE block in %q", data)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ca, leaf := parse(certs.caPEM), parse(certs.certPEM)
	if !ca.IsCA || ca.Subject.CommonName != "root-server-ca" || !ca.NotBefore.Equal(FakeMintTime) || !ca.NotAfter.Equal(FakeMintTime.Add(fakeServerCAValidity)) {
		t.Errorf("CA %s, IsCA %v, valid %s to %s", ca.Subject, ca.IsCA, ca.NotBefore, ca.NotAfter)
	}
	if leaf.Subject.CommonName != naming.KubeconfigUsername || !slices.Equal(leaf.Subject.Organization, []string{naming.KubeconfigAdminGroup}) ||
		!slices.Equal(leaf.Subject.OrganizationalUnit, []string{FakeKubeconfigMarker}) {
		t.Errorf("subject %s", leaf.Subject)
	}
	if !leaf.NotBefore.Equal(FakeMintTime) || !leaf.NotAfter.Equal(FakeMintTime.Add(validity)) {
		t.Errorf("valid %s to %s, want %s for %s", leaf.NotBefore, leaf.NotAfter, FakeMintTime, validity)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: FakeMintTime.Add(time.Hour), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the client certificate does not verify against the CA: %v", err)
	}
	if _, err := tls.X509KeyPair(certs.certPEM, certs.keyPEM); err != nil {
		t.Errorf("the certificate and key do not pair: %v", err)
	}
}
