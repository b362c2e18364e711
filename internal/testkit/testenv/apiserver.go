package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Loopback is the only address any server of these tests listens on.
const Loopback = "127.0.0.1"

// APIServerOptions say how to start an etcd and a kube-apiserver.
type APIServerOptions struct {
	// KubeAPIServer and Etcd are the executables.
	KubeAPIServer, Etcd string
	// Dir receives the etcd data, the certificates, the token file and the logs.
	Dir string
	// ServiceCIDR is the API server's Service range (--service-cluster-ip-range).
	ServiceCIDR string
	// Name names the etcd member, the CA and the admin user ("<Name>-admin"), so that a
	// log or a certificate says which test it belongs to.
	Name string
	// BindAddress is the one address the API server listens on and advertises: Loopback
	// (the default), or for a cluster with a real node the node network's gateway, so
	// that pods reach it through the kubernetes Service and it reaches the kubelet.
	BindAddress string
	// DefaultNodeSelector, when set, is the node selector the PodNodeSelector admission
	// plugin gives every pod of a namespace without its own
	// (scheduler.alpha.kubernetes.io/node-selector): how a test places pods on a real or
	// a simulated node without changing what the program declares.
	DefaultNodeSelector string
	// MutatingAdmissionPolicies, when set, serves admissionregistration.k8s.io/v1beta1
	// and turns on the MutatingAdmissionPolicy feature (beta and off by default in
	// Kubernetes 1.34), whose admission plugin is one of the default ones: how a test
	// changes what pods ask for without changing the program (InstallEnvoyProxyPlacement).
	MutatingAdmissionPolicies bool
}

// APIServer is an etcd and a kube-apiserver serving on loopback, stopped when the test
// that started them ends.
type APIServer struct {
	// Host is the API server's https:// URL.
	Host string
	// Token is a bearer token of the admin user, in group system:masters.
	Token string
	// PKI holds the CA and keys the API server runs with; controllers that sign
	// service-account tokens or publish the root CA need them too.
	PKI *ControlPlaneFiles
	// Process and Etcd are the running servers.
	Process, Etcd *Process

	name string
}

// StartAPIServer starts etcd and kube-apiserver and waits until the API server is
// ready. Both processes (and their process groups) are killed when the test ends,
// whether it passes, fails or panics; if the test binary itself dies (a -timeout), the
// kernel kills them (parent-death signal, on Linux).
func StartAPIServer(t *testing.T, ctx context.Context, opts APIServerOptions) *APIServer {
	t.Helper()
	bind := opts.BindAddress
	if bind == "" {
		bind = Loopback
	}
	ports := freePorts(t, 2)
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], freePortsOn(t, bind, 1)[0]
	s := &APIServer{Host: "https://" + net.JoinHostPort(bind, strconv.Itoa(apiPort)), name: opts.Name}

	files, err := writeControlPlaneFiles(opts.Dir, opts.Name, servingIPs(t, bind, opts.ServiceCIDR)...)
	if err != nil {
		t.Fatalf("generating certificates: %v", err)
	}
	s.PKI = files
	s.Token = RandomHex(t, 32)
	tokenFile := writeTokenFile(t, opts.Dir, s.Token, s.adminUser())

	var etcdURL string
	s.Etcd, etcdURL = startEtcd(t, ctx, opts, etcdClient, etcdPeer)
	args := apiServerArgs(t, opts, bind, apiPort, etcdURL, files, tokenFile)
	s.Process = StartProcess(t, "kube-apiserver", opts.KubeAPIServer, filepath.Join(opts.Dir, "kube-apiserver.log"), args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-apiserver log (last lines):\n%s", s.Process.Tail(30))
		}
	})
	s.waitReady(t, ctx)
	return s
}

// servingIPs are the addresses the API server's certificate names besides Loopback: none
// on loopback; on bind, and on the kubernetes Service's ClusterIP (the first of
// serviceCIDR), where pods reach it, otherwise.
func servingIPs(t *testing.T, bind, serviceCIDR string) []net.IP {
	t.Helper()
	if bind == Loopback {
		return nil
	}
	svc, err := netip.ParsePrefix(serviceCIDR)
	if err != nil {
		t.Fatalf("service range %q: %v", serviceCIDR, err)
	}
	return []net.IP{net.ParseIP(bind), net.IP(svc.Masked().Addr().Next().AsSlice())}
}

// writeTokenFile writes the API server's static token file, which makes token the
// bearer token of user in group system:masters, into dir and returns its path.
func writeTokenFile(t *testing.T, dir, token, user string) string {
	t.Helper()
	path := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(path, []byte(token+","+user+","+user+`,"system:masters"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startEtcd starts a one-member etcd on loopback's clientPort and peerPort and waits
// until it is healthy; it returns the process and the client URL.
func startEtcd(t *testing.T, ctx context.Context, opts APIServerOptions, clientPort, peerPort int) (*Process, string) {
	t.Helper()
	clientURL := "http://" + net.JoinHostPort(Loopback, strconv.Itoa(clientPort))
	peerURL := "http://" + net.JoinHostPort(Loopback, strconv.Itoa(peerPort))
	args := []string{
		"--name=" + opts.Name,
		"--data-dir=" + filepath.Join(opts.Dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=" + opts.Name + "=" + peerURL,
		"--initial-cluster-state=new",
		"--logger=zap",
		"--log-level=warn",
	}
	if etcdSupports(opts.Etcd, "--unsafe-no-fsync") {
		// The data is thrown away with the test.
		args = append(args, "--unsafe-no-fsync")
	}
	etcd := StartProcess(t, "etcd", opts.Etcd, filepath.Join(opts.Dir, "etcd.log"), args...)
	if err := WaitFor(ctx, 60*time.Second, etcd, func() (bool, error) {
		resp, err := http.Get(clientURL + "/health")
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("etcd did not become healthy: %v\n%s", err, etcd.Tail(40))
	}
	return etcd, clientURL
}

// apiServerArgs are kube-apiserver's arguments: etcd at etcdURL, serving on bind:port
// with files' certificates, the admin's token in tokenFile, and what opts turn on.
func apiServerArgs(t *testing.T, opts APIServerOptions, bind string, port int, etcdURL string, files *ControlPlaneFiles, tokenFile string) []string {
	t.Helper()
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + bind,
		"--advertise-address=" + bind,
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(opts.Dir, "certs"),
		"--tls-cert-file=" + files.ServingCert,
		"--tls-private-key-file=" + files.ServingKey,
		"--client-ca-file=" + files.CAFile,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + files.SAPublic,
		"--service-account-signing-key-file=" + files.SAPrivate,
		"--service-cluster-ip-range=" + opts.ServiceCIDR,
		"--allow-privileged=true",
		"--profiling=false",
	}
	// client-go v0.36 (kwok's, for one) asks for streamed lists over watches, which the
	// API server can serve only from an etcd that answers progress requests (Debian's
	// 3.4.23 does not): every such watch fails and the client would see changes only at
	// its backed-off relists, tens of seconds late. Without the feature the server
	// refuses the streamed list up front and clients list and watch as before.
	features := "WatchList=false"
	if opts.MutatingAdmissionPolicies {
		features += ",MutatingAdmissionPolicy=true"
		args = append(args, "--runtime-config=admissionregistration.k8s.io/v1beta1=true")
	}
	args = append(args, "--feature-gates="+features)
	if bind == Loopback {
		// No kubelet or network: the kubernetes Endpoints would name a loopback address.
		args = append(args, "--endpoint-reconciler-type=none")
	} else {
		args = append(args,
			"--kubelet-client-certificate="+files.KubeletClientCert,
			"--kubelet-client-key="+files.KubeletClientKey,
			// The node's name does not resolve here; its InternalIP is the bridge's address.
			"--kubelet-preferred-address-types=InternalIP",
		)
	}
	if opts.DefaultNodeSelector != "" {
		admission := writePodNodeSelectorAdmission(t, opts.Dir, opts.DefaultNodeSelector)
		args = append(args, "--enable-admission-plugins=PodNodeSelector", "--admission-control-config-file="+admission)
	}
	return args
}

// writePodNodeSelectorAdmission writes an admission configuration whose PodNodeSelector
// plugin gives selector to every pod of a namespace without its own, into dir, and
// returns its path.
func writePodNodeSelectorAdmission(t *testing.T, dir, selector string) string {
	t.Helper()
	admission := filepath.Join(dir, "admission.yaml")
	selectorConfig := filepath.Join(dir, "podnodeselector.yaml")
	if err := os.WriteFile(selectorConfig, []byte("podNodeSelectorPluginConfig:\n  clusterDefaultNodeSelector: "+strconv.Quote(selector)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(admission, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodNodeSelector\n  path: "+selectorConfig+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return admission
}

// waitReady waits until the admin's GET /readyz answers 200, for up to three minutes or
// until the API server exits.
func (s *APIServer) waitReady(t *testing.T, ctx context.Context) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: s.PKI.ca.Pool(), MinVersion: tls.VersionTLS12},
	}}
	defer client.CloseIdleConnections()
	var last string
	if err := WaitFor(ctx, 3*time.Minute, s.Process, func() (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("kube-apiserver did not become ready: %v (last /readyz: %s)\n%s", err, last, s.Process.Tail(40))
	}
}

func (s *APIServer) adminUser() string { return s.name + "-admin" }

// RESTConfig is a client configuration of the admin user. Callers set QPS, Burst and
// UserAgent for what they do.
func (s *APIServer) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            s.Host,
		BearerToken:     s.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.PKI.CAPEM},
		Timeout:         2 * time.Minute,
	}
}

// WriteKubeconfig writes a kubeconfig of the admin user whose only (and current)
// context is contextName, for the tools and controllers that read one.
func (s *APIServer) WriteKubeconfig(path, contextName string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[s.name] = &clientcmdapi.Cluster{Server: s.Host, CertificateAuthorityData: s.PKI.CAPEM}
	cfg.AuthInfos[s.adminUser()] = &clientcmdapi.AuthInfo{Token: s.Token}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: s.name, AuthInfo: s.adminUser(), Namespace: "default"}
	cfg.CurrentContext = contextName
	return clientcmd.WriteToFile(*cfg, path)
}

// freePorts returns n distinct free TCP ports on loopback.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(Loopback, "0"))
		if err != nil {
			t.Fatalf("finding a free port: %v", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// RandomHex returns n random bytes, hex-encoded: tokens and passphrases no two runs share.
func RandomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// etcdSupports reports whether etcd --help lists a flag: the etcd on PATH is Debian's
// or one built from source (hack/build-tools.sh), and not every version has every flag.
func etcdSupports(etcd, flag string) bool {
	out, _ := exec.Command(etcd, "--help").CombinedOutput()
	return bytes.Contains(out, []byte(flag))
}

// Port is the API server's port.
func (s *APIServer) Port() int {
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.Host, "https://"))
	p, _ := strconv.Atoi(port)
	return p
}
