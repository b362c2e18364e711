// Package pki is the one PKI of the tests: certificate authorities of their own (CA),
// self-signed or signed by another (Intermediate), the server and client certificates
// they issue (Cert), ECDSA P-256 throughout, and the PEM files and bundles a server or a
// config reads them from. Every test that needs a certificate makes it here: the verify
// fakes (internal/testkit/verifytest), the servers of internal/testkit/testenv, the kcp
// PKIs of tests/kcpadmin and tests/providerprobe, and the unit tests. It imports nothing
// of this repository. The program never links it: the mock stack mints its fake
// kubeconfig's certificates itself (internal/mockstack), and tests/testkit_test.go keeps
// it so.
//
// A certificate is valid as its Options say; without one, a CA is valid from an hour ago
// for a day and what a CA signs (a leaf or an intermediate) as long as that CA. Expired
// makes one that has expired, and NotACA a self-signed certificate that is not a CA, for
// the refusals of a CA file that holds none. Each constructor returns an error; the Must
// forms fail the test instead.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority of a test's own.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is Cert, PEM-encoded.
	PEM []byte
}

// Cert is a certificate a CA issued, with its key, both PEM-encoded (the key as PKCS #8).
type Cert struct {
	Cert            *x509.Certificate
	CertPEM, KeyPEM []byte
}

// Option changes the certificate being made.
type Option func(*x509.Certificate)

// Valid makes the certificate valid from notBefore until notAfter.
func Valid(notBefore, notAfter time.Time) Option {
	return func(c *x509.Certificate) { c.NotBefore, c.NotAfter = notBefore, notAfter }
}

// Expired makes the certificate valid from two days ago until an hour ago.
func Expired() Option {
	now := time.Now()
	return Valid(now.Add(-48*time.Hour), now.Add(-time.Hour))
}

// NotACA makes NewCA's certificate a self-signed leaf: no CA basic constraint and no
// certificate signing in its key usage.
func NotACA() Option {
	return func(c *x509.Certificate) {
		c.IsCA = false
		c.KeyUsage = x509.KeyUsageDigitalSignature
	}
}

// CommonName sets the subject's common name (a server certificate's is its first name
// otherwise).
func CommonName(name string) Option {
	return func(c *x509.Certificate) { c.Subject.CommonName = name }
}

// NewCA creates a self-signed CA named commonName, valid from an hour ago for a day
// unless an Option says otherwise.
func NewCA(commonName string, opts ...Option) (*CA, error) {
	now := time.Now()
	tmpl := caTemplate(commonName)
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
	return newCA(tmpl, nil, opts)
}

// MustCA is NewCA that fails t on an error.
func MustCA(t testing.TB, commonName string, opts ...Option) *CA {
	t.Helper()
	return must[*CA](t)(NewCA(commonName, opts...))
}

// Intermediate creates a CA named commonName that ca signs, as cert-manager's CA issuer
// signs root-client-ca with root-ca; it is valid as long as ca unless an Option says
// otherwise.
func (ca *CA) Intermediate(commonName string, opts ...Option) (*CA, error) {
	tmpl := caTemplate(commonName)
	tmpl.NotBefore, tmpl.NotAfter = ca.Cert.NotBefore, ca.Cert.NotAfter
	return newCA(tmpl, ca, opts)
}

// MustIntermediate is Intermediate that fails t on an error.
func (ca *CA) MustIntermediate(t testing.TB, commonName string, opts ...Option) *CA {
	t.Helper()
	return must[*CA](t)(ca.Intermediate(commonName, opts...))
}

func caTemplate(commonName string) *x509.Certificate {
	return &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
}

// newCA signs tmpl, changed by opts, for a new key: by parent, or by the new key itself
// when parent is nil.
func newCA(tmpl *x509.Certificate, parent *CA, opts []Option) (*CA, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		o(tmpl)
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, err
	}
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: certificatePEM(der)}, nil
}

// Issue signs tmpl for a new key and returns the certificate and the key, PEM-encoded.
// What tmpl leaves unset is filled in: a random serial number, the CA's validity and
// the digital-signature key usage.
func (ca *CA) Issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	c, err := ca.issue(tmpl)
	if err != nil {
		return nil, nil, err
	}
	return c.CertPEM, c.KeyPEM, nil
}

// ServerCert issues a serving certificate for names, each a DNS name or an IP address.
func (ca *CA) ServerCert(names []string, opts ...Option) (*Cert, error) {
	if len(names) == 0 {
		return nil, errors.New("pki: a server certificate needs a name")
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: names[0]}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, name := range names {
		if ip := net.ParseIP(name); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, name)
		}
	}
	return ca.issue(tmpl, opts...)
}

// ClientCert issues a client certificate for the user commonName in groups, which
// Kubernetes and kcp read from the subject's organizations.
func (ca *CA) ClientCert(commonName string, groups []string, opts ...Option) (*Cert, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, opts...)
}

// MustServerCert is ServerCert that fails t on an error.
func (ca *CA) MustServerCert(t testing.TB, names []string, opts ...Option) *Cert {
	t.Helper()
	return must[*Cert](t)(ca.ServerCert(names, opts...))
}

// MustClientCert is ClientCert that fails t on an error.
func (ca *CA) MustClientCert(t testing.TB, commonName string, groups []string, opts ...Option) *Cert {
	t.Helper()
	return must[*Cert](t)(ca.ClientCert(commonName, groups, opts...))
}

// Pool is a certificate pool that holds the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// WriteCA writes the CA's certificate to path.
func (ca *CA) WriteCA(path string) error { return WriteFile(path, ca.PEM) }

// CAFile writes the CA's certificate to dir/ca.crt and returns its path; it fails t on
// an error.
func (ca *CA) CAFile(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ca.crt")
	if err := ca.WriteCA(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Bundle is the certificates of cas, in order, as one PEM bundle (a CA file that trusts
// several CAs, or a chain).
func Bundle(cas ...*CA) []byte {
	var b []byte
	for _, ca := range cas {
		b = append(b, ca.PEM...)
	}
	return b
}

// TLS is the certificate and key as a TLS server or client presents them.
func (c *Cert) TLS() (tls.Certificate, error) { return tls.X509KeyPair(c.CertPEM, c.KeyPEM) }

// MustTLS is TLS that fails t on an error.
func (c *Cert) MustTLS(t testing.TB) tls.Certificate {
	t.Helper()
	return must[tls.Certificate](t)(c.TLS())
}

// WriteFiles writes the certificate to certPath and the key to keyPath.
func (c *Cert) WriteFiles(certPath, keyPath string) error {
	if err := WriteFile(certPath, c.CertPEM); err != nil {
		return err
	}
	return WriteFile(keyPath, c.KeyPEM)
}

// WriteFile writes PEM data to path, readable by its owner alone: a key among them must
// not be, and a server that reads a CA or a certificate needs no more.
func WriteFile(path string, data []byte) error { return os.WriteFile(path, data, 0o600) }

func (ca *CA) issue(tmpl *x509.Certificate, opts ...Option) (*Cert, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	t := *tmpl
	if t.SerialNumber == nil {
		if t.SerialNumber, err = serialNumber(); err != nil {
			return nil, err
		}
	}
	if t.NotBefore.IsZero() && t.NotAfter.IsZero() {
		t.NotBefore, t.NotAfter = ca.Cert.NotBefore, ca.Cert.NotAfter
	}
	if t.KeyUsage == 0 {
		t.KeyUsage = x509.KeyUsageDigitalSignature
	}
	for _, o := range opts {
		o(&t)
	}
	der, err := x509.CreateCertificate(rand.Reader, &t, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Cert{Cert: cert, CertPEM: certificatePEM(der), KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}, nil
}

// must returns a function that returns its value, or fails t with its error.
func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

// serialNumber is random, so that no two certificates of one issuer share one.
func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
}

func certificatePEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
