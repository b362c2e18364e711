// Package testpki is the one PKI of the tests and the mock stack: certificate
// authorities of their own and the server and client certificates they issue, ECDSA
// P-256 throughout, and the PEM files a server or a config reads them from. It imports
// nothing of this repository, so the mock stack (internal/mockstack), the verify fakes
// (internal/verify/verifytest) and every test package can use it.
//
// A certificate is valid as its Options say; without one, a CA is valid from an hour ago
// for a day and a leaf as long as its CA. Expired makes one that has expired, and NotACA
// a self-signed certificate that is not a CA, for the refusals of a CA file that holds
// none.
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

// NewCA creates a CA named commonName, valid from an hour ago for a day unless an
// Option says otherwise.
func NewCA(commonName string, opts ...Option) (*CA, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, o := range opts {
		o(tmpl)
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
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
		return nil, errors.New("testpki: a server certificate needs a name")
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

// Pool is a certificate pool that holds the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// WriteCA writes the CA's certificate to path.
func (ca *CA) WriteCA(path string) error { return WriteFile(path, ca.PEM) }

// TLS is the certificate and key as a TLS server or client presents them.
func (c *Cert) TLS() (tls.Certificate, error) { return tls.X509KeyPair(c.CertPEM, c.KeyPEM) }

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

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

// serialNumber is random, so that no two certificates of one issuer share one.
func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
}

func certificatePEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
