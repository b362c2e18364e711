package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net"
	"path/filepath"

	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
)

// ControlPlaneFiles are the files a test's control plane is started with, made with the
// tests' PKI (internal/testkit/pki): a CA, a serving certificate for the API server on
// loopback, a client certificate for calling kubelets, and the service-account signing
// key pair.
type ControlPlaneFiles struct {
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

	ca *pki.CA
}

// writeControlPlaneFiles creates a CA named after the test, a serving certificate for
// 127.0.0.1 and the further addresses the API server serves on, a client certificate for
// calling kubelets, both signed by it, and a service-account signing key pair, in dir.
func writeControlPlaneFiles(dir, name string, addresses ...net.IP) (*ControlPlaneFiles, error) {
	ca, err := pki.NewCA("railgrid-kcp-" + name + "-ca")
	if err != nil {
		return nil, err
	}
	names := []string{Loopback}
	for _, ip := range addresses {
		names = append(names, ip.String())
	}
	names = append(names, "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	serving, err := ca.ServerCert(names, pki.CommonName("kube-apiserver"))
	if err != nil {
		return nil, err
	}
	kubeletClient, err := ca.ClientCert("kube-apiserver-kubelet-client", []string{"system:masters"})
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	p := &ControlPlaneFiles{
		CAPEM:       ca.PEM,
		CAFile:      filepath.Join(dir, "ca.crt"),
		ServingCert: filepath.Join(dir, "serving.crt"),
		ServingKey:  filepath.Join(dir, "serving.key"),
		SAPublic:    filepath.Join(dir, "sa.pub"),
		SAPrivate:   filepath.Join(dir, "sa.key"),
		ca:          ca,

		KubeletClientCert: filepath.Join(dir, "kubelet-client.crt"),
		KubeletClientKey:  filepath.Join(dir, "kubelet-client.key"),
	}
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
		p.ServingCert: append(serving.CertPEM, p.CAPEM...),
		p.ServingKey:  serving.KeyPEM,
		p.SAPrivate:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: saKeyDER}),
		p.SAPublic:    pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),

		p.KubeletClientCert: kubeletClient.CertPEM,
		p.KubeletClientKey:  kubeletClient.KeyPEM,
	}
	for path, data := range files {
		if err := pki.WriteFile(path, data); err != nil {
			return nil, err
		}
	}
	return p, nil
}
