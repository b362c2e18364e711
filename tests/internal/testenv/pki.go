package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI holds the files a test's control plane is started with: a CA, a serving
// certificate for the API server on loopback, and the service-account signing key pair.
type PKI struct {
	// CAPEM is the CA certificate; CAFile holds it (--client-ca-file, --root-ca-file).
	CAPEM  []byte
	CAFile string
	// ServingCert (with the CA appended) and ServingKey are the API server's.
	ServingCert, ServingKey string
	// SAPublic and SAPrivate sign and verify service-account tokens.
	SAPublic, SAPrivate string
	// KubeletClientCert and KubeletClientKey are the API server's credential when it
	// calls a real node's kubelet (logs, exec), in group system:masters.
	KubeletClientCert, KubeletClientKey string

	caPool *x509.CertPool
}

// CA is a certificate authority of a test's own.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is Cert, PEM-encoded.
	PEM []byte
}

// NewCA creates a CA valid from an hour ago for a day.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue signs a certificate for a new key: tmpl gives the serial number, subject, names
// and usages; the validity is the CA's. It returns the certificate and the key (PKCS #8),
// PEM-encoded.
func (ca *CA) Issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	t := *tmpl
	t.NotBefore, t.NotAfter = ca.Cert.NotBefore, ca.Cert.NotAfter
	if t.KeyUsage == 0 {
		t.KeyUsage = x509.KeyUsageDigitalSignature
	}
	der, err := x509.CreateCertificate(rand.Reader, &t, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// writePKI creates a CA named after the test, a serving certificate for 127.0.0.1 and
// the further addresses the API server serves on, a client certificate for calling
// kubelets, both signed by it, and a service-account signing key pair, in dir.
func writePKI(dir, name string, addresses ...net.IP) (*PKI, error) {
	ca, err := NewCA("railgrid-kcp-" + name + "-ca")
	if err != nil {
		return nil, err
	}
	servingCert, servingKey, err := ca.Issue(&x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  append([]net.IP{net.ParseIP(Loopback)}, addresses...),
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	})
	if err != nil {
		return nil, err
	}
	clientCert, clientKey, err := ca.Issue(&x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	p := &PKI{
		CAPEM:       ca.PEM,
		CAFile:      filepath.Join(dir, "ca.crt"),
		ServingCert: filepath.Join(dir, "serving.crt"),
		ServingKey:  filepath.Join(dir, "serving.key"),
		SAPublic:    filepath.Join(dir, "sa.pub"),
		SAPrivate:   filepath.Join(dir, "sa.key"),
		caPool:      x509.NewCertPool(),

		KubeletClientCert: filepath.Join(dir, "kubelet-client.crt"),
		KubeletClientKey:  filepath.Join(dir, "kubelet-client.key"),
	}
	p.caPool.AddCert(ca.Cert)
	saKeyDER, err := x509.MarshalPKCS8PrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		p.CAFile:      p.CAPEM,
		p.ServingCert: append(servingCert, p.CAPEM...),
		p.ServingKey:  servingKey,
		p.SAPrivate:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: saKeyDER}),
		p.SAPublic:    pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),

		p.KubeletClientCert: clientCert,
		p.KubeletClientKey:  clientKey,
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}
