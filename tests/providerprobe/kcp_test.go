package providerprobe

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
)

// The names a cluster gives kcp, as the program deploys it on kind: the public shard
// names (split horizon answers them with the owned Services) and the operator's
// in-cluster Service names. In the test's namespace each component has its own loopback
// address.
const (
	rootPublic   = "root.kcp.localhost"
	alphaPublic  = "alpha.kcp.localhost"
	rootService  = "root-kcp.kcp-system.svc.cluster.local"
	alphaService = "alpha-shard-kcp.kcp-system.svc.cluster.local"
	frontService = "frontproxy-front-proxy.kcp-system.svc.cluster.local"

	rootAddr  = "127.0.0.2"
	alphaAddr = "127.0.0.3"
	frontAddr = "127.0.0.4"
	edgeAddr  = "127.0.0.5"

	// The shards answer on 443, the port of the owned Services and of the public URLs
	// (the operator's pods listen on 6443 behind them; a process has one port). The
	// front proxy answers on 6443, as its Service does.
	shardPort = 443
	frontPort = 6443
)

var (
	rootBaseURL  = fmt.Sprintf("https://%s:%d", rootService, shardPort)
	alphaBaseURL = fmt.Sprintf("https://%s:%d", alphaService, shardPort)
	frontURL     = fmt.Sprintf("https://%s:%d", frontService, frontPort)
)

// hostsFile is the namespace's /etc/hosts: every name on its component's address.
func hostsFile() string {
	return strings.Join([]string{
		"127.0.0.1 localhost",
		rootAddr + " " + rootPublic + " " + rootService,
		alphaAddr + " " + alphaPublic + " " + alphaService,
		frontAddr + " " + frontService,
	}, "\n") + "\n"
}

// kcpFiles are the files of the test's kcp certificates in the operator's shape, from
// the tests' PKI: root-server-ca signs every serving certificate, root-client-ca every
// client certificate kcp authenticates (the hub's, the shards', the front proxy's), the
// request-header CA the front proxy's identity when it forwards a user to a shard.
type kcpFiles struct {
	dir                                       string
	serverCA, clientCA, requestHeaderCA       *pki.CA
	serverCAFile, clientCAFile, requestHdrCAF string
}

func newKcpFiles(t *testing.T, dir string) *kcpFiles {
	t.Helper()
	p := &kcpFiles{dir: dir}
	for _, c := range []struct {
		ca   **pki.CA
		file *string
		name string
	}{
		{&p.serverCA, &p.serverCAFile, "root-server-ca"},
		{&p.clientCA, &p.clientCAFile, "root-client-ca"},
		{&p.requestHeaderCA, &p.requestHdrCAF, "root-requestheader-client-ca"},
	} {
		*c.ca = pki.MustCA(t, c.name)
		*c.file = p.write(t, c.name+".crt", (*c.ca).PEM)
	}
	return p
}

func (p *kcpFiles) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := pki.WriteFile(path, data); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeCert writes c and its key as name.crt and name.key.
func (p *kcpFiles) writeCert(t *testing.T, name string, c *pki.Cert) (certFile, keyFile string) {
	t.Helper()
	return p.write(t, name+".crt", c.CertPEM), p.write(t, name+".key", c.KeyPEM)
}

// issue writes a certificate signed by ca from tmpl, and its key, as name.crt and
// name.key.
func (p *kcpFiles) issue(t *testing.T, ca *pki.CA, name string, tmpl *x509.Certificate) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return p.writeCert(t, name, &pki.Cert{CertPEM: certPEM, KeyPEM: keyPEM})
}

// serving writes a serving certificate of root-server-ca named name for hosts.
func (p *kcpFiles) serving(t *testing.T, name string, hosts ...string) (string, string) {
	t.Helper()
	return p.writeCert(t, name, p.serverCA.MustServerCert(t, hosts, pki.CommonName(name)))
}

// client writes a client certificate of ca for user in groups as name.
func (p *kcpFiles) client(t *testing.T, ca *pki.CA, name, user string, groups ...string) (string, string) {
	t.Helper()
	return p.writeCert(t, name, ca.MustClientCert(t, user, groups))
}

// kubeconfig writes a kubeconfig for server with a client certificate; the context is
// named as kcp expects for the root shard's kubeconfig ("shard-base").
func (p *kcpFiles) kubeconfig(t *testing.T, name, server, certFile, keyFile string, inline bool) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	cluster := &clientcmdapi.Cluster{Server: server, CertificateAuthority: p.serverCAFile}
	user := &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}
	if inline {
		cluster = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.serverCA.PEM}
		user = &clientcmdapi.AuthInfo{ClientCertificateData: readFile(t, certFile), ClientKeyData: readFile(t, keyFile)}
	}
	kc.Clusters["kcp"] = cluster
	kc.AuthInfos["user"] = user
	kc.Contexts["shard-base"] = &clientcmdapi.Context{Cluster: "kcp", AuthInfo: "user"}
	kc.CurrentContext = "shard-base"
	path := filepath.Join(p.dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// shardArgs are a shard's arguments as the kcp-operator writes them
// (internal/resources/compiledrootshard and compiledshard, getArgs), with the design's
// extra arguments (CacheAPIs, the virtual-workspace URL on the public name), embedded
// etcd instead of the operator's external one, and this namespace's addresses.
func shardArgs(t *testing.T, p *kcpFiles, name, addr, public, service, baseURL string, etcdPort int) []string {
	t.Helper()
	serverCert, serverKey := p.serving(t, name+"-server", public, service)
	saCert, saKey := p.issue(t, p.serverCA, name+"-service-account", &x509.Certificate{Subject: pkix.Name{CommonName: name + "-service-account"}})
	user, groups := "shard-"+name, []string{"system:masters"}
	if name == "root" {
		user = "root"
	}
	shardCert, shardKey := p.client(t, p.clientCA, name+"-client", user, groups...)
	lcaCert, lcaKey := p.client(t, p.clientCA, name+"-logical-cluster-admin", "logical-cluster-admin-"+name, "system:kcp:logical-cluster-admin")
	elcaCert, elcaKey := p.client(t, p.clientCA, name+"-external-logical-cluster-admin", "external-logical-cluster-admin-"+name, "system:kcp:external-logical-cluster-admin")
	args := []string{
		"start",
		"--root-ca-file=" + p.serverCAFile,
		"--client-ca-file=" + p.clientCAFile,
		"--requestheader-client-ca-file=" + p.requestHdrCAF,
		"--requestheader-allowed-names=kcp-front-proxy,kcp-root-shard-proxy",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--tls-private-key-file=" + serverKey,
		"--tls-cert-file=" + serverCert,
		"--service-account-key-file=" + saCert,
		"--service-account-private-key-file=" + saKey,
		"--service-account-lookup=false",
		"--shard-client-key-file=" + shardKey,
		"--shard-client-cert-file=" + shardCert,
		"--shard-base-url=" + baseURL,
		"--shard-external-url=" + frontURL,
		"--logical-cluster-admin-kubeconfig=" + p.kubeconfig(t, name+"-logical-cluster-admin", baseURL, lcaCert, lcaKey, false),
		"--external-logical-cluster-admin-kubeconfig=" + p.kubeconfig(t, name+"-external-logical-cluster-admin", frontURL, elcaCert, elcaKey, false),
		"--batteries-included=workspace-types",
		"--enable-leader-election=true",
		"--logging-format=json",
		// The design's extra arguments (components: shardExtraArgs).
		"--feature-gates=CacheAPIs=true",
		"--shard-virtual-workspace-url=https://" + public,
		// This namespace's address and port, and embedded etcd in the root directory.
		"--bind-address=" + addr,
		fmt.Sprintf("--secure-port=%d", shardPort),
		"--root-directory=" + filepath.Join(p.dir, name),
		fmt.Sprintf("--embedded-etcd-client-port=%d", etcdPort),
		fmt.Sprintf("--embedded-etcd-peer-port=%d", etcdPort+1),
	}
	if name != "root" {
		rootClient := p.kubeconfig(t, name+"-root-shard-client", rootBaseURL, shardCert, shardKey, false)
		mountCert, mountKey := p.client(t, p.requestHeaderCA, name+"-mounts-proxy", "kcp-mounts-proxy")
		args = append(args,
			"--shard-name="+name,
			"--external-hostname="+frontService,
			"--cache-kubeconfig="+rootClient,
			"--root-shard-kubeconfig-file="+rootClient,
			"--mount-proxy-client-cert-file="+mountCert,
			"--mount-proxy-client-key-file="+mountKey,
		)
	}
	return args
}

// pathMapping is one entry of the front proxy's mapping file (kcp's
// pkg/server/proxy/types.PathMapping).
type pathMapping struct {
	Path            string `json:"path"`
	Backend         string `json:"backend"`
	BackendServerCA string `json:"backend_server_ca"`
	ProxyClientCert string `json:"proxy_client_cert"`
	ProxyClientKey  string `json:"proxy_client_key"`
}

// frontProxyArgs are the front proxy's arguments as the operator writes them
// (compiledfrontproxy/deployment.go): /clusters/ and /services/ to the root shard's base
// URL, from where the proxy follows each workspace to its shard.
func frontProxyArgs(t *testing.T, p *kcpFiles) []string {
	t.Helper()
	serverCert, serverKey := p.serving(t, "frontproxy-server", frontService)
	clientCert, clientKey := p.client(t, p.clientCA, "frontproxy-client", "kcp-front-proxy", "system:masters")
	rhCert, rhKey := p.client(t, p.requestHeaderCA, "frontproxy-requestheader", "kcp-front-proxy")
	var mappings []pathMapping
	for _, path := range []string{"/clusters/", "/services/"} {
		mappings = append(mappings, pathMapping{Path: path, Backend: rootBaseURL, BackendServerCA: p.serverCAFile, ProxyClientCert: rhCert, ProxyClientKey: rhKey})
	}
	data, err := yaml.Marshal(mappings)
	if err != nil {
		t.Fatal(err)
	}
	shards := p.kubeconfig(t, "frontproxy-shards", rootBaseURL, clientCert, clientKey, false)
	return []string{
		fmt.Sprintf("--secure-port=%d", frontPort),
		"--root-kubeconfig=" + shards,
		"--shards-kubeconfig=" + shards,
		"--tls-private-key-file=" + serverKey,
		"--tls-cert-file=" + serverCert,
		"--mapping-file=" + p.write(t, "path-mapping.yaml", data),
		"--client-ca-file=" + p.clientCAFile,
		"--requestheader-client-ca-file=" + p.requestHdrCAF,
		"--requestheader-allowed-names=kcp-front-proxy,kcp-mounts-proxy",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--bind-address=" + frontAddr,
		"--root-directory=" + filepath.Join(p.dir, "frontproxy"),
	}
}

// hubKubeconfig is the hub's kubeconfig as the operator's Kubeconfig object writes it:
// the front proxy's in-cluster name with the root workspace's path, root-server-ca
// inline, a kcp-admin certificate in system:kcp:admin of clientCA inline.
func hubKubeconfig(t *testing.T, p *kcpFiles, name string, clientCA *pki.CA) string {
	t.Helper()
	cert, key := p.client(t, clientCA, name, "kcp-admin", "system:kcp:admin")
	return p.kubeconfig(t, name, frontURL+"/clusters/root", cert, key, true)
}

// pemFile writes a CA bundle.
func (p *kcpFiles) pemFile(t *testing.T, name string, cas ...*pki.CA) string {
	t.Helper()
	return p.write(t, name, pki.Bundle(cas...))
}
