// Package verifytest builds the fakes the verify tests (internal/verify, cmd/verify) run
// against, which tests/kcpadmin and internal/providerprobe use too: a healthy cluster
// (client-go fake clientset and fake dynamic client), a scripted DNS probe, hub
// kubeconfigs, a TLS edge that answers like kcp, a fake kcp behind the owned Services
// (kcp.go), a fake kubelet's port-forward (kubelet.go) and a scripted provider probe
// (providerprobe.go). Their certificates come from a CA of the tests' PKI
// (internal/testkit/pki) that NewCA makes. Nothing here needs a cluster or a network
// beyond the loopback listeners of httptest.
package verifytest

import (
	"context"
	"crypto/tls"
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
	// CA issued the hub kubeconfig's client certificate and is the serving certificates'
	// CA in their Secrets.
	CA *pki.CA
}

// NewHealthyCluster returns a cluster where every check passes: workloads rolled out,
// kcp objects Available, owned Services on their ClusterIPs, and a hub Secret whose
// client certificate is valid for another 365 days from Now.
func NewHealthyCluster(t testing.TB, cfg *config.Config) *Cluster {
	t.Helper()
	ca := NewCA(t)
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

	cert := AdminCert(t, ca, naming.KubeconfigUsername, Now.Add(-time.Hour), Now.Add(365*24*time.Hour))
	hubKubeconfig := Kubeconfig(t, "https://"+verify.HubServerHost()+verify.RootWorkspacePath, ca.PEM, cert.CertPEM, cert.KeyPEM)
	objs = append(objs, HubSecret(cfg, hubKubeconfig), OperatorKubeconfigSecret(cfg, hubKubeconfig))
	objs = append(objs, ServingCertificateSecrets(t, cfg, ca)...)

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
		CA: ca,
	}
}

// OperatorKubeconfigSecret is the Secret the operator renders the hub's Kubeconfig object
// into, for the config's re-mint generation: the hub's copy holds the same kubeconfig.
func OperatorKubeconfigSecret(cfg *config.Config, kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: naming.NamespaceKcp, Name: naming.KubeconfigObjectName(cfg.Hub.RemintGeneration)},
		Data:       map[string][]byte{naming.KubeconfigSecretKey: kubeconfig},
	}
}

// ServingCertificateSecrets are the operator's serving certificate Secrets of the front
// proxy and every shard, issued by ca for a year from Now, with ca under ca.crt as
// cert-manager writes it.
func ServingCertificateSecrets(t testing.TB, cfg *config.Config, ca *pki.CA) []runtime.Object {
	t.Helper()
	names := []string{naming.FrontProxyServerCertificate(naming.RootShardName, naming.FrontProxyName)}
	for _, s := range cfg.Kcp.AllShards() {
		names = append(names, naming.ShardServerCertificate(s.Name))
	}
	var out []runtime.Object
	for _, name := range names {
		out = append(out, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: naming.NamespaceKcp, Name: name},
			Type:       corev1.SecretTypeTLS,
			Data: map[string][]byte{"ca.crt": ca.PEM, "tls.crt": ca.MustServerCert(t, []string{name}, pki.Valid(Now.Add(-time.Hour), Now.Add(365*24*time.Hour))).CertPEM,
				"tls.key": []byte("not read")},
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

// NewCA creates the tests' CA, valid around both the fixed clock (Now) and the real one
// (TLS handshakes): from 2000 to 2100.
func NewCA(t testing.TB) *pki.CA {
	t.Helper()
	return pki.MustCA(t, "verify-test-ca", pki.Valid(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)))
}

// AdminCert is a client certificate of ca for user cn in the hub's group, valid from
// notBefore until notAfter.
func AdminCert(t testing.TB, ca *pki.CA, cn string, notBefore, notAfter time.Time) *pki.Cert {
	t.Helper()
	return ca.MustClientCert(t, cn, []string{naming.KubeconfigAdminGroup}, pki.Valid(notBefore, notAfter))
}

// serverTLS is a server certificate of ca for hosts, valid around the real clock (the TLS
// stack checks it against time.Now, not Now).
func serverTLS(t testing.TB, ca *pki.CA, hosts ...string) tls.Certificate {
	t.Helper()
	return ca.MustServerCert(t, hosts, pki.Valid(time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))).MustTLS(t)
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
// of cfg with a certificate from ca, routing by Host like the ingress does.
func NewEdge(t testing.TB, cfg *config.Config, ca *pki.CA, b EdgeBehaviour) *httptest.Server {
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
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverTLS(t, ca, hosts...)}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}
