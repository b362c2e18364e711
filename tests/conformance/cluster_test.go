package conformance

import (
	"bufio"
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
	"errors"
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

	"k8s.io/client-go/rest"
)

// Environment variables the test reads.
const (
	envKubeAPIServer = "KUBE_APISERVER"
	envEtcd          = "ETCD"
	envSkip          = "RAILGRID_SKIP_CONFORMANCE"
	envCRDsDir       = "RAILGRID_CRDS_DIR"
)

// loopback is the only address any server of this test listens on.
const loopback = "127.0.0.1"

// binaries are the server executables the test runs.
type binaries struct {
	kubeAPIServer string
	etcd          string
}

// findBinaries returns kube-apiserver and etcd from $KUBE_APISERVER and $ETCD, or from
// PATH. A missing binary fails the test: a conformance run that silently does nothing
// would read as a pass.
func findBinaries(t *testing.T) binaries {
	t.Helper()
	var missing []string
	find := func(env, name string) string {
		if p := os.Getenv(env); p != "" {
			if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
				missing = append(missing, fmt.Sprintf("$%s=%s is not an executable file", env, p))
				return ""
			}
			return p
		}
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s is not on PATH and $%s is not set", name, env))
			return ""
		}
		return p
	}
	b := binaries{kubeAPIServer: find(envKubeAPIServer, "kube-apiserver"), etcd: find(envEtcd, "etcd")}
	if len(missing) > 0 {
		t.Fatalf("conformance needs kube-apiserver and etcd: %s.\nBuild them and run the test with hack/conformance.sh "+
			"(or: eval \"$(hack/build-tools.sh env kube etcd)\"); set %s=1 to skip this test",
			strings.Join(missing, "; "), envSkip)
	}
	return b
}

// cluster is an etcd and a kube-apiserver serving on loopback, stopped when the test ends.
type cluster struct {
	dir       string
	host      string
	token     string
	caPEM     []byte
	apiserver *process
	etcd      *process
}

// restConfig is the admin client configuration (token in group system:masters).
func (c *cluster) restConfig() *rest.Config {
	return &rest.Config{
		Host:            c.host,
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.caPEM},
		QPS:             200,
		Burst:           400,
		Timeout:         2 * time.Minute,
		UserAgent:       "railgrid-kcp-conformance",
	}
}

// startCluster starts etcd and kube-apiserver in a fresh temporary directory, with the
// given Service range, and waits until the API server is ready. Both processes (and
// their process groups) are killed when the test ends, whether it passes, fails or
// panics; if the test binary itself dies (a -timeout), the kernel kills them
// (parent-death signal, on Linux).
func startCluster(t *testing.T, ctx context.Context, bins binaries, serviceCIDR string) *cluster {
	t.Helper()
	dir := t.TempDir()
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
	if err := os.WriteFile(tokenFile, []byte(c.token+`,conformance-admin,conformance-admin,"system:masters"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	clientURL := "http://" + net.JoinHostPort(loopback, strconv.Itoa(etcdClient))
	peerURL := "http://" + net.JoinHostPort(loopback, strconv.Itoa(etcdPeer))
	etcdArgs := []string{
		"--name=conformance",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=conformance=" + peerURL,
		"--initial-cluster-state=new",
		"--logger=zap",
		"--log-level=warn",
	}
	if etcdSupports(bins.etcd, "--unsafe-no-fsync") {
		// The data is thrown away with the test.
		etcdArgs = append(etcdArgs, "--unsafe-no-fsync")
	}
	c.etcd = startProcess(t, "etcd", bins.etcd, filepath.Join(dir, "etcd.log"), etcdArgs...)
	if err := waitFor(ctx, 60*time.Second, c.etcd, func() (bool, error) {
		resp, err := http.Get(clientURL + "/health")
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("etcd did not become healthy: %v\n%s", err, c.etcd.tail(40))
	}

	c.apiserver = startProcess(t, "kube-apiserver", bins.kubeAPIServer, filepath.Join(dir, "kube-apiserver.log"),
		"--etcd-servers="+clientURL,
		"--bind-address="+loopback,
		"--advertise-address="+loopback,
		"--secure-port="+strconv.Itoa(apiPort),
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--tls-cert-file="+pki.servingCert,
		"--tls-private-key-file="+pki.servingKey,
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
	)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-apiserver log (last lines):\n%s", c.apiserver.tail(30))
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
		body, _ := readAll(resp)
		last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("kube-apiserver did not become ready: %v (last /readyz: %s)\n%s", err, last, c.apiserver.tail(40))
	}
	client.CloseIdleConnections()
	return c
}

// serverVersion returns the API server's /version gitVersion.
func (c *cluster) serverVersion(ctx context.Context) (string, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.caPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.host+"/version", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return "", err
	}
	return v.GitVersion, nil
}

func readAll(resp *http.Response) (string, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return strings.TrimSpace(string(body)), err
}

// waitFor polls check until it returns true, the timeout passes, ctx ends or proc exits.
func waitFor(ctx context.Context, timeout time.Duration, proc *process, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := check()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if proc != nil && proc.exited() {
			return fmt.Errorf("%s exited: %v", proc.name, proc.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
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

// process is a server started by the test.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startProcess(t *testing.T, name, bin, logPath string, args ...string) *process {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = filepath.Dir(logPath)
	cmd.Stdout, cmd.Stderr = f, f
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop terminates the process group, then kills it if it has not exited in 10 s.
func (p *process) stop() {
	if !p.exited() {
		terminateGroup(p.cmd)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			killGroup(p.cmd)
			<-p.done
		}
	}
	// Anything the server left in its group goes too.
	killGroup(p.cmd)
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string {
	f, err := os.Open(p.log)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// pki holds the files kube-apiserver is started with.
type pki struct {
	caPEM                   []byte
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
		Subject:               pkix.Name{CommonName: "railgrid-kcp-conformance-ca"},
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

// errNoRepoRoot is returned when no go.mod of this module is found above the test.
var errNoRepoRoot = errors.New("no go.mod of module github.com/railgrid/railgrid-kcp above the working directory")

// repoRoot walks up from the working directory (the package directory under go test)
// to the root module's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module github.com/railgrid/railgrid-kcp\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errNoRepoRoot
		}
		dir = parent
	}
}
