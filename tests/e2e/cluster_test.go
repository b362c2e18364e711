package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/components"
)

// kubeContext is the kubeconfig context the stack's kind.context points at.
const kubeContext = "railgrid-e2e"

// cluster is a Kubernetes control plane without containers: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok (which plays the kubelet of three fake
// nodes), all on loopback and stopped when the (sub)test ends.
type cluster struct {
	dir        string
	host       string
	token      string
	caPEM      []byte
	kubeconfig string // admin kubeconfig with context kubeContext
	rest       *rest.Config
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	apiserver  *process
	procs      []*process
}

// startCluster starts the control plane in dir with the given Service range and waits
// until the API server is ready and kwok runs pods on the fake nodes.
func startCluster(t *testing.T, ctx context.Context, bins binaries, dir, serviceCIDR string) *cluster {
	t.Helper()
	start := time.Now()
	ports := freePorts(t, 3)
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	c := &cluster{dir: dir, host: "https://" + net.JoinHostPort(loopback, strconv.Itoa(apiPort))}

	pki, err := writePKI(dir)
	if err != nil {
		t.Fatalf("generating certificates: %v", err)
	}
	c.caPEM = pki.caPEM
	c.token = randomHex(t, 32)
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(c.token+`,e2e-admin,e2e-admin,"system:masters"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	clientURL := "http://" + net.JoinHostPort(loopback, strconv.Itoa(etcdClient))
	peerURL := "http://" + net.JoinHostPort(loopback, strconv.Itoa(etcdPeer))
	etcdArgs := []string{
		"--name=e2e",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=e2e=" + peerURL,
		"--initial-cluster-state=new",
		"--logger=zap",
		"--log-level=warn",
	}
	if etcdSupports(bins.etcd, "--unsafe-no-fsync") {
		etcdArgs = append(etcdArgs, "--unsafe-no-fsync") // thrown away with the test
	}
	etcd := startProcess(t, "etcd", bins.etcd, filepath.Join(dir, "etcd.log"), etcdArgs...)
	c.procs = append(c.procs, etcd)
	if err := waitFor(ctx, 60*time.Second, etcd, func() (bool, error) {
		resp, err := http.Get(clientURL + "/health")
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("etcd did not become healthy: %v\n%s", err, etcd.tail(40))
	}

	c.apiserver = startProcess(t, "kube-apiserver", bins.kubeAPIServer, filepath.Join(dir, "kube-apiserver.log"),
		"--etcd-servers="+clientURL,
		"--bind-address="+loopback,
		"--advertise-address="+loopback,
		"--secure-port="+strconv.Itoa(apiPort),
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--tls-cert-file="+pki.servingCert,
		"--tls-private-key-file="+pki.servingKey,
		"--client-ca-file="+pki.caFile,
		"--token-auth-file="+tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pki.saPublic,
		"--service-account-signing-key-file="+pki.saPrivate,
		"--service-cluster-ip-range="+serviceCIDR,
		"--allow-privileged=true",
		// No kubelet or network: the kubernetes Endpoints would name a loopback address.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		// kwok's client-go (v0.36) asks for streamed lists over watches, which the API
		// server can serve only from an etcd that answers progress requests (Debian's
		// 3.4.23 does not): every such watch fails and kwok would see new pods only at
		// its backed-off relists, tens of seconds late. Without the feature the server
		// refuses the streamed list up front and clients list and watch as before.
		"--feature-gates=WatchList=false",
	)
	c.procs = append(c.procs, c.apiserver)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-apiserver log (last lines):\n%s", c.apiserver.tail(20))
		}
	})
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pki.caPool, MinVersion: tls.VersionTLS12},
	}}
	var last string
	if err := waitFor(ctx, 3*time.Minute, c.apiserver, func() (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
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
		t.Fatalf("kube-apiserver did not become ready: %v (last /readyz: %s)\n%s", err, last, c.apiserver.tail(40))
	}
	client.CloseIdleConnections()

	c.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(c.kubeconfig, c.host, c.caPEM, c.token); err != nil {
		t.Fatal(err)
	}
	c.rest = &rest.Config{
		Host:            c.host,
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.caPEM},
		QPS:             100,
		Burst:           200,
		Timeout:         2 * time.Minute,
		UserAgent:       "railgrid-kcp-e2e",
	}
	if c.kube, err = kubernetes.NewForConfig(c.rest); err != nil {
		t.Fatal(err)
	}
	if c.dyn, err = dynamic.NewForConfig(c.rest); err != nil {
		t.Fatal(err)
	}

	// Controllers: everything a cluster needs for Deployments, StatefulSets, volumes,
	// namespaces and garbage collection; nothing that needs a cloud, a pod network or
	// certificate signing. The fake nodes heartbeat rarely (kwok renews their leases),
	// so the node lifecycle controller gets a long grace period.
	kcm := startProcess(t, "kube-controller-manager", bins.kubeControllerManager, filepath.Join(dir, "kube-controller-manager.log"),
		"--kubeconfig="+c.kubeconfig,
		"--bind-address="+loopback,
		"--secure-port=0",
		"--leader-elect=false",
		"--controllers=*,-node-ipam-controller,-node-route-controller,-cloud-node-lifecycle-controller,-service-lb-controller,"+
			"-certificatesigningrequest-signing-controller,-certificatesigningrequest-approving-controller,-persistentvolume-attach-detach-controller",
		"--service-account-private-key-file="+pki.saPrivate,
		"--root-ca-file="+pki.caFile,
		"--use-service-account-credentials=false",
		"--node-monitor-grace-period=1h",
		"--concurrent-statefulset-syncs=5",
		"--v=1",
	)
	scheduler := startProcess(t, "kube-scheduler", bins.kubeScheduler, filepath.Join(dir, "kube-scheduler.log"),
		"--kubeconfig="+c.kubeconfig,
		"--bind-address="+loopback,
		"--secure-port=0",
		"--leader-elect=false",
		"--v=1",
	)
	stages, err := kwokStages(ctx)
	if err != nil {
		t.Fatalf("kwok stages: %v", err)
	}
	stagesFile := filepath.Join(dir, "kwok-stages.yaml")
	if err := os.WriteFile(stagesFile, stages, 0o600); err != nil {
		t.Fatal(err)
	}
	kwok := startProcess(t, "kwok", bins.kwok, filepath.Join(dir, "kwok.log"),
		"--kubeconfig="+c.kubeconfig,
		"--config="+stagesFile,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-lease-duration-seconds=40",
		"--node-ip="+loopback,
		"--cidr=10.244.0.0/16",
	)
	c.procs = append(c.procs, kcm, scheduler, kwok)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv(envVerbose) == "1" {
			for _, p := range []*process{kcm, scheduler, kwok} {
				t.Logf("%s log (last lines):\n%s", p.name, p.tail(15))
			}
		}
	})
	t.Logf("control plane up in %s (API server %s)", time.Since(start).Round(time.Millisecond), c.host)
	return c
}

// running reports an error if a control-plane process has exited.
func (c *cluster) running() error {
	for _, p := range c.procs {
		if p.exited() {
			return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.tail(30))
		}
	}
	return nil
}

// writeKubeconfig writes an admin kubeconfig whose only context is kubeContext.
func writeKubeconfig(path, host string, caPEM []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["e2e-admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[kubeContext] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e-admin", Namespace: "default"}
	cfg.CurrentContext = kubeContext
	return clientcmd.WriteToFile(*cfg, path)
}

// kwokStages returns kwok's stock stages for fast nodes with leases and fast pods, read
// from the sigs.k8s.io/kwok module in the module cache (downloaded first if needed).
func kwokStages(ctx context.Context) ([]byte, error) {
	const module = "sigs.k8s.io/kwok@v0.8.0"
	dl := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	dl.Env = append(os.Environ(), "GOFLAGS=")
	dl.Dir = os.TempDir() // outside any module: nothing is written to a go.mod or go.sum
	out, err := dl.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download %s: %v\n%s", module, err, out)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return nil, fmt.Errorf("go mod download %s: no module directory (%v %s):\n%s", module, err, info.Error, out)
	}
	dir := info.Dir
	var stages bytes.Buffer
	for _, set := range []string{"node/fast", "node/heartbeat-with-lease", "pod/fast"} {
		files, err := filepath.Glob(filepath.Join(dir, "kustomize", "stage", set, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			if set == "pod/fast" && filepath.Base(f) == "pod-ready.yaml" {
				if data, err = delayedPodReady(data); err != nil {
					return nil, fmt.Errorf("%s: %w", f, err)
				}
			}
			stages.WriteString("---\n")
			stages.Write(data)
			stages.WriteString("\n")
		}
	}
	if stages.Len() == 0 {
		return nil, fmt.Errorf("no kwok stages under %s", dir)
	}
	return stages.Bytes(), nil
}

// kcpPodReadyDelay is how long kwok takes to make a pod in kcp-system Ready: a real kcp
// server takes seconds to start, and the upgrade order (root shard before shards and
// front proxy) and the interrupted up are only tested if that window exists.
const kcpPodReadyDelay = 3 * time.Second

// delayedPodReady splits kwok's pod-ready stage in two: pods in kcp-system become Ready
// after kcpPodReadyDelay, every other pod at once, as before.
func delayedPodReady(stage []byte) ([]byte, error) {
	const anchor = "    matchExpressions:\n"
	text := string(stage)
	if !strings.Contains(text, anchor) || !strings.Contains(text, "name: pod-ready\n") || !strings.Contains(text, "spec:\n") {
		return nil, fmt.Errorf("kwok's pod-ready stage no longer has the shape this test edits")
	}
	ns := func(op string) string {
		return anchor + "    - key: '.metadata.namespace'\n      operator: '" + op + "'\n      values:\n      - '" + components.NamespaceKcp + "'\n"
	}
	others := strings.Replace(text, anchor, ns("NotIn"), 1)
	kcp := strings.Replace(text, anchor, ns("In"), 1)
	kcp = strings.Replace(kcp, "name: pod-ready\n", "name: pod-ready-kcp\n", 1)
	kcp = strings.Replace(kcp, "spec:\n", fmt.Sprintf("spec:\n  delay:\n    durationMilliseconds: %d\n", kcpPodReadyDelay.Milliseconds()), 1)
	return []byte(others + "\n---\n" + kcp), nil
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
		l, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
		if err != nil {
			t.Fatalf("finding a free port: %v", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// etcdSupports reports whether etcd --help lists a flag.
func etcdSupports(etcd, flag string) bool {
	out, _ := exec.Command(etcd, "--help").CombinedOutput()
	return bytes.Contains(out, []byte(flag))
}

// pki holds the files the control plane is started with.
type pki struct {
	caPEM                   []byte
	caFile                  string
	caPool                  *x509.CertPool
	servingCert, servingKey string
	saPublic, saPrivate     string
}

// writePKI creates a CA, a serving certificate for 127.0.0.1 signed by it and a
// service-account signing key pair, in dir.
func writePKI(dir string) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "railgrid-kcp-e2e-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	servingKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	servingTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP(loopback)},
		DNSNames:     []string{"localhost"},
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, servingTemplate, caCert, &servingKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	p := &pki{
		caPEM:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		caFile:      filepath.Join(dir, "ca.crt"),
		caPool:      x509.NewCertPool(),
		servingCert: filepath.Join(dir, "serving.crt"),
		servingKey:  filepath.Join(dir, "serving.key"),
		saPublic:    filepath.Join(dir, "sa.pub"),
		saPrivate:   filepath.Join(dir, "sa.key"),
	}
	p.caPool.AddCert(caCert)
	servingKeyDER, err := x509.MarshalPKCS8PrivateKey(servingKey)
	if err != nil {
		return nil, err
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
		p.caFile:      p.caPEM,
		p.servingCert: append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: servingDER}), p.caPEM...),
		p.servingKey:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: servingKeyDER}),
		p.saPrivate:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: saKeyDER}),
		p.saPublic:    pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}
