package mockstack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"time"

	"github.com/railgrid/railgrid-kcp/naming"
)

// fakeServerCAValidity is how long the fake root-server-ca is valid from FakeMintTime.
const fakeServerCAValidity = 10 * 365 * 24 * time.Hour

// mintedCerts are the certificates of the fake operator's hub kubeconfig, PEM-encoded:
// kcp's server CA and the admin's client certificate with its key.
type mintedCerts struct {
	caPEM, certPEM, keyPEM []byte
}

// mintCerts makes what the operator's cert-manager would: a self-signed root-server-ca
// valid for ten years from FakeMintTime, and a client certificate for the admin in the
// admin group, marked with FakeKubeconfigMarker, valid from FakeMintTime for validity
// (ECDSA P-256, the key as PKCS #8). It is the program's own code, not the tests' PKI
// (internal/testkit/pki), so that cmd/plan links no test support.
func mintCerts(validity time.Duration) (*mintedCerts, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "root-server-ca"},
		NotBefore:             FakeMintTime,
		NotAfter:              FakeMintTime.Add(fakeServerCAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := createCertificate(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := createCertificate(&x509.Certificate{
		Subject:     pkix.Name{CommonName: naming.KubeconfigUsername, Organization: []string{naming.KubeconfigAdminGroup}, OrganizationalUnit: []string{FakeKubeconfigMarker}},
		NotBefore:   FakeMintTime,
		NotAfter:    FakeMintTime.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &mintedCerts{
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// createCertificate signs tmpl with a random serial number.
func createCertificate(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
}
