// Package verifytest builds the fakes the verify tests run against: a healthy cluster
// (client-go fake clientset and fake dynamic client), a scripted DNS probe, a test PKI,
// hub kubeconfigs, a TLS edge that answers like kcp, and a fake kcp behind the owned
// Services (kcp.go). Nothing here needs a cluster or a network beyond the loopback
// listeners of httptest.
package verifytest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// StackYAML is a kind stack with a root shard and one shard "alpha", two replicas each
// and one etcd member per shard.
const StackYAML = `config:
  railgrid-kcp:platform: kind
  railgrid-kcp:kcp:
    frontProxy:
      hostname: kcp.example.com
      clusterIP: 10.96.0.100
    rootShard:
      hostname: kcp-root.example.com
      clusterIP: 10.96.0.101
    shards:
      - name: alpha
        hostname: kcp-alpha.example.com
        clusterIP: 10.96.0.102
  railgrid-kcp:oidc:
    issuerURL: https://auth.example.com
    clientID: railgrid
  railgrid-kcp:etcd:
    members: 1
    volumeSize: 2Gi
`

// EdgeIP is the address a public name resolves to outside the cluster.
const EdgeIP = "203.0.113.10"

// WriteStack writes StackYAML into dir and returns its path.
func WriteStack(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "Pulumi.kind.yaml")
	if err := os.WriteFile(path, []byte(StackYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Config is StackYAML, parsed and validated.
func Config(t testing.TB) *config.Config {
	t.Helper()
	cfg, err := config.ParseStackFile(WriteStack(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Now is the fixed clock of the tests.
var Now = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)

// Cluster is a fake cluster with everything the stack deploys, healthy.
type Cluster struct {
	Kube    *kubefake.Clientset
	Dynamic *dynamicfake.FakeDynamicClient
	PKI     *PKI
}

// NewHealthyCluster returns a cluster where every check passes: workloads rolled out,
// kcp objects Available, owned Services on their ClusterIPs, and a hub Secret whose
// client certificate is valid for another 365 days from Now.
func NewHealthyCluster(t testing.TB, cfg *config.Config) *Cluster {
	t.Helper()
	pki := NewPKI(t)
	var objs []runtime.Object
	addDeployment := func(ns, name string, replicas int32) {
		objs = append(objs, Deployment(ns, name, replicas))
	}
	addDeployment(naming.NamespaceOperator, naming.OperatorDeployment, 1)
	for _, s := range cfg.Kcp.AllShards() {
		objs = append(objs, StatefulSet(naming.NamespaceEtcd, naming.EtcdName(s.Name), int32(cfg.Etcd.Members)))
		objs = append(objs, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: naming.NamespaceKcp, Name: naming.OwnedServiceName(s.Name)},
			Spec:       corev1.ServiceSpec{ClusterIP: s.ClusterIP},
		})
	}
	addDeployment(naming.NamespaceKcp, naming.RootShardDeployment(naming.RootShardName), int32(cfg.Kcp.RootShard.Replicas))
	addDeployment(naming.NamespaceKcp, naming.RootShardProxyDeployment(naming.RootShardName), int32(cfg.Kcp.RootShard.Replicas))
	for _, s := range cfg.Kcp.Shards {
		addDeployment(naming.NamespaceKcp, naming.ShardDeployment(s.Name), int32(s.Replicas))
	}
	addDeployment(naming.NamespaceKcp, naming.FrontProxyDeployment(naming.FrontProxyName), int32(cfg.Kcp.FrontProxy.Replicas))

	cert, key := pki.ClientCert(t, naming.KubeconfigUsername, Now.Add(-time.Hour), Now.Add(365*24*time.Hour))
	objs = append(objs, HubSecret(cfg, Kubeconfig(t, "https://"+verify.HubServerHost()+verify.RootWorkspacePath, pki.CAPEM, cert, key)))
	objs = append(objs, ServingCertificateSecrets(cfg, pki.CAPEM)...)

	crs := []runtime.Object{KcpObject("RootShard", naming.RootShardName, "True", "ReplicasUp", "")}
	for _, s := range cfg.Kcp.Shards {
		crs = append(crs, KcpObject("Shard", s.Name, "True", "ReplicasUp", ""))
	}
	crs = append(crs,
		KcpObject("FrontProxy", naming.FrontProxyName, "True", "ReplicasUp", ""),
		KcpObject("Kubeconfig", naming.KubeconfigName, "True", "SecretsReady", ""),
	)
	return &Cluster{
		Kube: kubefake.NewClientset(objs...),
		Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
			verify.GVRRootShard: "RootShardList", verify.GVRShard: "ShardList",
			verify.GVRFrontProxy: "FrontProxyList", verify.GVRKubeconfig: "KubeconfigList",
		}, crs...),
		PKI: pki,
	}
}

// ServingCertificateSecrets are the operator's serving certificate Secrets of the front
// proxy and every shard, with caPEM under ca.crt as cert-manager writes it.
func ServingCertificateSecrets(cfg *config.Config, caPEM []byte) []runtime.Object {
	names := []string{naming.FrontProxyServerCertificate(naming.RootShardName, naming.FrontProxyName)}
	for _, s := range cfg.Kcp.AllShards() {
		names = append(names, naming.ShardServerCertificate(s.Name))
	}
	var out []runtime.Object
	for _, name := range names {
		out = append(out, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: naming.NamespaceKcp, Name: name},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{"ca.crt": caPEM, "tls.crt": []byte("not read"), "tls.key": []byte("not read")},
		})
	}
	return out
}

// Deployment is a fully rolled-out Deployment.
func Deployment(ns, name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 3},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 3, Replicas: replicas, UpdatedReplicas: replicas,
			ReadyReplicas: replicas, AvailableReplicas: replicas,
		},
	}
}

// StatefulSet is a fully rolled-out StatefulSet.
func StatefulSet(ns, name string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 2},
		Spec:       appsv1.StatefulSetSpec{Replicas: &replicas},
		Status: appsv1.StatefulSetStatus{
			ObservedGeneration: 2, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas,
			CurrentRevision: name + "-abc", UpdateRevision: name + "-abc",
		},
	}
}

// KcpObject is an operator.kcp.io/v1alpha1 object in kcp-system with an Available
// condition (none when status is "").
func KcpObject(kind, name, status, reason, message string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.kcp.io/v1alpha1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": naming.NamespaceKcp, "generation": int64(1)},
		"status":     map[string]any{"phase": "Running"},
	}}
	if status != "" {
		_ = unstructured.SetNestedSlice(obj.Object, []any{
			map[string]any{"type": "Available", "status": status, "reason": reason, "message": message},
		}, "status", "conditions")
	}
	return obj
}

// HubSecret is the hub's Secret holding kubeconfig under the configured key.
func HubSecret(cfg *config.Config, kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Hub.Namespace, Name: cfg.Hub.SecretName},
		Data:       map[string][]byte{cfg.Hub.SecretKey: kubeconfig},
	}
}

// Kubeconfig is a kubeconfig as the operator writes it: one cluster, one user with an
// inline client certificate and key.
func Kubeconfig(t testing.TB, server string, caPEM, certPEM, keyPEM []byte) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kcp"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	kc.AuthInfos["kcp-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "kcp", AuthInfo: "kcp-admin"}
	kc.CurrentContext = "default"
	out, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// PKI is a test CA (testpki), valid around both the fixed clock (Now) and the real one
// (TLS handshakes).
type PKI struct {
	CA    *x509.Certificate
	CAPEM []byte
	ca    *pki.CA
}

// NewPKI creates a self-signed CA.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	ca, err := pki.NewCA("verify-test-ca", pki.Valid(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	return &PKI{CA: ca.Cert, CAPEM: ca.PEM, ca: ca}
}

// ClientCert issues a client certificate in the hub's group; it returns the certificate
// and key as PEM.
func (p *PKI) ClientCert(t testing.TB, cn string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	return p.ClientCertInGroups(t, cn, []string{naming.KubeconfigAdminGroup}, notBefore, notAfter)
}

// ClientCertInGroups issues a client certificate for user cn in groups (its O).
func (p *PKI) ClientCertInGroups(t testing.TB, cn string, groups []string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	c, err := p.ca.ClientCert(cn, groups, pki.Valid(notBefore, notAfter))
	if err != nil {
		t.Fatal(err)
	}
	return c.CertPEM, c.KeyPEM
}

// ServerCert issues a server certificate for hosts, valid around the real clock (the
// TLS stack checks it against time.Now).
func (p *PKI) ServerCert(t testing.TB, hosts ...string) tls.Certificate {
	t.Helper()
	c, err := p.ca.ServerCert(hosts, pki.Valid(time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := c.TLS()
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// WriteCA writes the CA certificate to a file in dir and returns its path.
func (p *PKI) WriteCA(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ca.pem")
	if err := p.ca.WriteCA(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// DNSRunner is a scripted PodRunner: it answers nslookup for each host the probe asks
// for, in busybox's format.
type DNSRunner struct {
	mu sync.Mutex
	// Answers maps a hostname to its A records; a missing or empty entry is NXDOMAIN.
	Answers map[string][]string
	// Err, when set, is returned after the output (as a failed or timed-out pod would).
	Err error
	// Output, when set, replaces the generated output.
	Output *string
	// Unanswered is how many probes, the first ones, find no name at all (the answers
	// not in CoreDNS yet).
	Unanswered int
	// Specs records every probe run.
	Specs []verify.PodSpec
}

// HealthyDNS answers every shard hostname with its configured ClusterIP.
func HealthyDNS(cfg *config.Config) *DNSRunner {
	answers := map[string][]string{}
	for _, s := range cfg.Kcp.AllShards() {
		answers[s.Hostname] = []string{s.ClusterIP}
	}
	return &DNSRunner{Answers: answers}
}

// Run implements verify.PodRunner.
func (r *DNSRunner) Run(_ context.Context, spec verify.PodSpec) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Specs = append(r.Specs, spec)
	if r.Output != nil {
		return *r.Output, r.Err
	}
	// The hosts are the arguments after the script and $0.
	var b strings.Builder
	for _, host := range spec.Command[4:] {
		fmt.Fprintf(&b, "@@@ begin %s\nServer:\t\t10.96.0.10\nAddress:\t10.96.0.10:53\n\n", host)
		ips := r.Answers[host]
		if len(r.Specs) <= r.Unanswered {
			ips = nil
		}
		if len(ips) == 0 {
			fmt.Fprintf(&b, "** server can't find %s: NXDOMAIN\n\n@@@ end %s rc=1\n", host, host)
			continue
		}
		for _, ip := range ips {
			fmt.Fprintf(&b, "Name:\t%s\nAddress: %s\n\n", host, ip)
		}
		fmt.Fprintf(&b, "@@@ end %s rc=0\n", host)
	}
	return b.String(), r.Err
}

// EdgeBehaviour is how the fake edge answers anonymous requests.
type EdgeBehaviour struct {
	ReadyzStatus   int
	FrontAPIStatus int
	ShardAPIStatus int
	ShardAPIBody   string
}

// HealthyEdge answers like kcp behind a working ingress.
func HealthyEdge() EdgeBehaviour {
	return EdgeBehaviour{
		ReadyzStatus:   http.StatusOK,
		FrontAPIStatus: http.StatusUnauthorized,
		ShardAPIStatus: http.StatusForbidden,
		ShardAPIBody: `{"kind":"Status","apiVersion":"v1","status":"Failure",` +
			`"message":"forbidden: User \"system:anonymous\" cannot get path \"/api\"","reason":"Forbidden","code":403}`,
	}
}

// NewEdge starts a TLS server on the loopback interface that serves every kcp hostname
// of cfg with a certificate from pki, routing by Host like the ingress does.
func NewEdge(t testing.TB, cfg *config.Config, pki *PKI, b EdgeBehaviour) *httptest.Server {
	t.Helper()
	front := cfg.Kcp.FrontProxy.Hostname
	hosts := []string{front}
	shards := map[string]bool{}
	for _, s := range cfg.Kcp.AllShards() {
		hosts = append(hosts, s.Hostname)
		shards[s.Hostname] = true
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		switch {
		case host == front && r.URL.Path == "/readyz":
			w.WriteHeader(b.ReadyzStatus)
			_, _ = w.Write([]byte("ok"))
		case host == front && r.URL.Path == "/api":
			w.WriteHeader(b.FrontAPIStatus)
			_, _ = w.Write([]byte(`{"kind":"Status","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
		case shards[host] && r.URL.Path == "/api":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(b.ShardAPIStatus)
			_, _ = w.Write([]byte(b.ShardAPIBody))
		default:
			http.NotFound(w, r)
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pki.ServerCert(t, hosts...)}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}
