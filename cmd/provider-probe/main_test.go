package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
)

// writeFiles writes a hub kubeconfig (a client certificate of a test CA) and that CA's
// file.
func writeFiles(t *testing.T, server string) (kubeconfigPath, caPath string) {
	t.Helper()
	ca := pki.MustCA(t, "kcp-admin-ca")
	leaf := ca.MustClientCert(t, "kcp-admin", nil)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kcp"] = &clientcmdapi.Cluster{Server: server}
	kc.AuthInfos["kcp-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: leaf.CertPEM, ClientKeyData: leaf.KeyPEM}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "kcp", AuthInfo: "kcp-admin"}
	kc.CurrentContext = "default"
	dir := t.TempDir()
	kubeconfigPath, caPath = filepath.Join(dir, "admin.kubeconfig"), filepath.Join(dir, "ca.crt")
	if err := clientcmd.WriteToFile(*kc, kubeconfigPath); err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCA(caPath); err != nil {
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
