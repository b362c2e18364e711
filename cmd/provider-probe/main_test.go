package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeFiles writes a hub kubeconfig (self-signed client certificate) and a CA file.
func writeFiles(t *testing.T, server string) (kubeconfigPath, caPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kcp-admin"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kcp"] = &clientcmdapi.Cluster{Server: server}
	kc.AuthInfos["kcp-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "kcp", AuthInfo: "kcp-admin"}
	kc.CurrentContext = "default"
	dir := t.TempDir()
	kubeconfigPath, caPath = filepath.Join(dir, "admin.kubeconfig"), filepath.Join(dir, "ca.crt")
	if err := clientcmd.WriteToFile(*kc, kubeconfigPath); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caPath, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfigPath, caPath
}

// Bad usage exits 2 before any request, naming the flag and the rule.
func TestUsageErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	kubeconfig, ca := writeFiles(t, "https://frontproxy-front-proxy.kcp-system.svc.cluster.local:6443/clusters/root")
	addressKubeconfig, _ := writeFiles(t, "https://10.96.0.100:6443")
	notPEM := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"-kubeconfig", kubeconfig, "-shard-url", "alpha=https://alpha.kcp.localhost"}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"system trust and a CA file": {append(base, "-trust", "system", "-ca-file", ca), "-ca-file and -trust system exclude each other"},
		"unknown trust":              {append(base, "-trust", "any", "-ca-file", ca), `-trust "any": want ca-file or system`},
		"CA file not PEM":            {append(base, "-ca-file", notPEM), "holds data that is not PEM"},
		"no kubeconfig":              {[]string{"-kubeconfig", filepath.Join(t.TempDir(), "none"), "-ca-file", ca}, "-kubeconfig: open"},
		"server by address":          {[]string{"-kubeconfig", addressKubeconfig, "-ca-file", ca}, "names the address 10.96.0.100"},
		"shard URL with a port":      {append(base, "-ca-file", ca, "-shard-url", "root=https://root.kcp.localhost:8443"), "names port 8443"},
		"no shard hostname":          {[]string{"-kubeconfig", kubeconfig, "-ca-file", ca, "-shard", "beta"}, "public hostname is empty"},
		"unknown step":               {append(base, "-ca-file", ca, "-steps", "dns"), `unknown step "dns"`},
		"arguments":                  {append(base, "-ca-file", ca, "extra"), "unexpected arguments: extra"},
		"no request time":            {append(base, "-ca-file", ca, "-request-timeout", "0s"), "-request-timeout must be positive"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want exit 2 with %q", name, code, stderr.String(), stdout.String(), tc.want)
		}
	}
}
