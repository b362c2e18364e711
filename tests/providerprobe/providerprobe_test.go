package providerprobe

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/railgrid/railgrid-kcp/internal/providerprobe"
	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

const (
	envRun    = "RAILGRID_PROVIDERPROBE_REALKCP"
	envHelper = "RAILGRID_PROVIDERPROBE_HELPER"
)

var keepLogs = flag.String("providerprobe.keep-logs", "", "copy the servers' logs and the probe's reports into this directory")

// TestMain doubles as the helper the test runs inside its network namespace: with
// envHelper set, the test binary waits for kcp's servers there and exits.
func TestMain(m *testing.M) {
	switch os.Getenv(envHelper) {
	case "readyz":
		os.Exit(helperMain(os.Args[1:]))
	case "edge":
		os.Exit(edgeMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// edgeMain is an edge that terminates TLS, as an ingress in front of kcp does for OIDC
// users: it serves the public names with a certificate of its own CA and forwards each
// request to the same name, resolved as kcp's own pods resolve it (to the shard),
// verifying the shard with kcp's CA and sending no client certificate, because it has
// none of the client's: edge <cert> <key> <listen address> <kcp CA>.
func edgeMain(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "edge: <cert> <key> <listen address> <kcp CA>")
		return 2
	}
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(args[3])
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		fmt.Fprintln(os.Stderr, "edge: CA:", err)
		return 2
	}
	backend := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Proxy: nil}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "https", r.In.Host
		},
		Transport: backend,
	}
	srv := &http.Server{Addr: args[2], Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServeTLS(args[0], args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "edge:", err)
		return 1
	}
	return 0
}

// helperMain waits until every URL's /readyz answers 200 to the client certificate,
// verifying the server with the CA: helper <ca> <cert> <key> <timeout> <url>...
func helperMain(args []string) int {
	if len(args) < 5 {
		fmt.Fprintln(os.Stderr, "helper: <ca> <cert> <key> <timeout> <url>...")
		return 2
	}
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(args[0])
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		fmt.Fprintln(os.Stderr, "helper: CA:", err)
		return 2
	}
	pair, err := tls.LoadX509KeyPair(args[1], args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	timeout, err := time.ParseDuration(args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}, Proxy: nil,
	}}
	deadline := time.Now().Add(timeout)
	for _, u := range args[4:] {
		for {
			resp, err := client.Get(u + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				err = fmt.Errorf("%s", resp.Status)
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "helper: %s/readyz: %v\n", u, err)
				return 1
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return 0
}

// advertiseAddr is the address kcp advertises (TEST-NET-1, RFC 5737); nothing listens
// on it.
const advertiseAddr = "192.0.2.1"

// netns is the test's network namespace: loopback and a veth pair with both ends inside,
// with its own /etc/hosts.
type netns struct{ name string }

func newNetns(t *testing.T, hosts string) *netns {
	t.Helper()
	n := &netns{name: "rgprobe-" + testenv.RandomHex(t, 3)}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	etc := filepath.Join("/etc/netns", n.name)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(etc) })
	if err := os.WriteFile(filepath.Join(etc, "hosts"), []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	run("netns", "add", n.name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.name).Run() })
	run("-n", n.name, "link", "set", "lo", "up")
	// kcp derives the address it advertises from the default route and refuses a
	// loopback one. A veth pair whose two ends are both in the namespace gives it one:
	// what is sent out of one end arrives at the other, in the namespace, so the servers
	// still reach only each other.
	run("-n", n.name, "link", "add", "adv0", "type", "veth", "peer", "name", "adv1")
	run("-n", n.name, "addr", "add", advertiseAddr+"/32", "dev", "adv0")
	run("-n", n.name, "link", "set", "adv0", "up")
	run("-n", n.name, "link", "set", "adv1", "up")
	run("-n", n.name, "route", "add", "default", "dev", "adv0")
	out, err := exec.Command("ip", "-n", n.name, "-o", "link").CombinedOutput()
	if err != nil || strings.Count(strings.TrimSpace(string(out)), "\n") != 2 || !strings.Contains(string(out), "adv0@adv1") || !strings.Contains(string(out), "adv1@adv0") {
		t.Fatalf("the namespace must have loopback and the veth pair only: %s %v", out, err)
	}
	return n
}

// command runs bin inside the namespace.
func (n *netns) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.name, bin}, args...)...)
}

// start starts a server inside the namespace, its output in dir/name.log.
func (n *netns) start(t *testing.T, dir, name, bin string, args ...string) *testenv.Process {
	t.Helper()
	return testenv.StartProcess(t, name, "ip", filepath.Join(dir, name+".log"), append([]string{"netns", "exec", n.name, bin}, args...)...)
}

// waitReady runs the helper in the namespace until every URL is ready; a server that
// exits meanwhile fails the test with its log.
func (n *netns) waitReady(t *testing.T, p *kcpFiles, timeout time.Duration, procs []*testenv.Process, urls ...string) {
	t.Helper()
	cert, key := p.client(t, p.clientCA, "ready-admin", "kcp-admin", "system:kcp:admin")
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := n.command(ctx, self, append([]string{p.serverCAFile, cert, key, timeout.String()}, urls...)...)
	cmd.Env = append(os.Environ(), envHelper+"=readyz")
	done := make(chan error, 1)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%v not ready: %v\n%s%s", urls, err, out.String(), logTails(procs))
			}
			return
		case <-time.After(200 * time.Millisecond):
			for _, p := range procs {
				if p.Exited() {
					t.Fatalf("%s exited: %v\n%s", p.Name, p.Err(), p.Tail(40))
				}
			}
		}
	}
}

func logTails(procs []*testenv.Process) string {
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "--- %s:\n%s\n", p.Name, p.Tail(20))
	}
	return b.String()
}

// probeRun is one run of the provider probe in the namespace.
type probeRun struct {
	lines   []providerprobe.Line
	exit    int
	stderr  string
	elapsed time.Duration
}

func (n *netns) probe(t *testing.T, bin string, args ...string) probeRun {
	t.Helper()
	return n.probeResolving(t, "", bin, args...)
}

// probeResolving runs the probe with hosts as its /etc/hosts instead of the namespace's
// ("" keeps the namespace's), in a mount namespace of its own, as a pod with hostAliases
// of its own resolves differently from its neighbours.
func (n *netns) probeResolving(t *testing.T, hosts, bin string, args ...string) probeRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := n.command(ctx, bin, args...)
	if hosts != "" {
		cmd = n.command(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
			`mount --bind "$0" /etc/hosts && exec "$@"`, hosts, bin}, args...)...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := probeRun{lines: providerprobe.ParseReport(stdout.String()), stderr: stderr.String(), elapsed: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.exit = exit.ExitCode()
	case err != nil:
		t.Fatalf("provider-probe: %v\n%s", err, stderr.String())
	}
	for _, l := range r.lines {
		t.Logf("%-8s %-13s %-21s %5.2fs %s %s%s%s", l.Result, l.Step, l.Check, l.Seconds, l.URL, l.Message, ifNot(l.Identity, " identity: "), ifNot(l.Error, " error: "))
	}
	return r
}

func ifNot(s, label string) string {
	if s == "" {
		return ""
	}
	return label + s
}

func (r probeRun) line(t *testing.T, step, check string) providerprobe.Line {
	t.Helper()
	for _, l := range r.lines {
		if l.Step == step && l.Check == check {
			return l
		}
	}
	t.Fatalf("no %s %s line (stderr: %s)", step, check, r.stderr)
	return providerprobe.Line{}
}

// The provider probe against real kcp: root and alpha shards and a front proxy started
// as the operator starts them, reached by their names in a namespace of the test's own.
func TestProviderProbeAgainstRealKcp(t *testing.T) {
	testenv.SkipIfShortOrDisabled(t, "RAILGRID_SKIP_PROVIDERPROBE", "runs real kcp shards and a front proxy in a network namespace")
	if os.Getenv(envRun) != "1" {
		t.Skipf("slow (real kcp); set %s=1 to run it", envRun)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for ip netns")
	}
	var exe testenv.Executables
	kcp, frontProxy := exe.Find("kcp", ""), exe.Find("kcp-front-proxy", "")
	exe.Require(t, "TestProviderProbeAgainstRealKcp", `eval "$(hack/build-tools.sh env kcp)"`, "RAILGRID_SKIP_PROVIDERPROBE")

	dir := t.TempDir()
	if *keepLogs != "" {
		t.Cleanup(func() { copyLogs(t, dir, *keepLogs) })
	}
	probe := testenv.BuildProviderProbe(t, dir)
	p := newKcpFiles(t, dir)
	ns := newNetns(t, hostsFile())

	start := time.Now()
	root := ns.start(t, dir, "kcp-root", kcp, shardArgs(t, p, "root", rootAddr, rootPublic, rootService, rootBaseURL, 2379)...)
	ns.waitReady(t, p, 3*time.Minute, []*testenv.Process{root}, rootBaseURL)
	rootReady := time.Since(start)
	alpha := ns.start(t, dir, "kcp-alpha", kcp, shardArgs(t, p, "alpha", alphaAddr, alphaPublic, alphaService, alphaBaseURL, 2381)...)
	front := ns.start(t, dir, "kcp-front-proxy", frontProxy, frontProxyArgs(t, p)...)
	procs := []*testenv.Process{root, alpha, front}
	ns.waitReady(t, p, 3*time.Minute, procs, alphaBaseURL, frontURL)
	t.Logf("root shard ready after %s, alpha and the front proxy %s later", rootReady.Round(time.Second), (time.Since(start) - rootReady).Round(time.Second))

	hub := hubKubeconfig(t, p, "hub", p.clientCA)
	caFile := p.pemFile(t, "root-server-ca.pem", p.serverCA)
	shardURLs := []string{"-shard-url", "root=https://" + rootPublic, "-shard-url", "alpha=https://" + alphaPublic}

	run := ns.probe(t, probe, append([]string{"-kubeconfig", hub, "-ca-file", caFile, "-shard", "alpha", "-wait", "90s"}, shardURLs...)...)
	t.Logf("provider probe: exit %d after %s", run.exit, run.elapsed.Round(100*time.Millisecond))
	for _, l := range run.lines {
		if l.Result != providerprobe.Pass {
			t.Errorf("%s %s: %s %s %s", l.Step, l.Check, l.Result, l.Message, l.Error)
		}
	}
	if run.exit != 0 || len(run.lines) != len(providerprobe.ProviderPathChecks)+3 {
		t.Fatalf("exit %d with %d lines, want 0 with every check of both steps\n%s%s", run.exit, len(run.lines), run.stderr, logTails(procs))
	}
	slice := run.line(t, providerprobe.StepProviderPath, providerprobe.CheckEndpointSlice)
	if !strings.HasPrefix(slice.URL, "https://"+alphaPublic+"/services/apiexport/") {
		t.Errorf("slice URL %s, want alpha's public name", slice.URL)
	}
	for _, check := range []string{providerprobe.CheckFrontProxy, providerprobe.ShardCheck("root"), providerprobe.ShardCheck("alpha")} {
		if l := run.line(t, providerprobe.StepHubIdentity, check); !strings.HasPrefix(l.Identity, `user "kcp-admin" in groups [`) || !strings.Contains(l.Identity, "system:kcp:admin") {
			t.Errorf("%s: identity %q", check, l.Identity)
		}
	}

	// Negatives, each from the same place: the system's roots do not know kcp's CA, and
	// kcp refuses a client certificate of another CA.
	system := ns.probe(t, probe, append([]string{"-kubeconfig", hub, "-trust", "system", "-ca-file", "", "-steps", "hub-identity"}, shardURLs...)...)
	other := pki.MustCA(t, "another-client-ca")
	stranger := ns.probe(t, probe, append([]string{"-kubeconfig", hubKubeconfig(t, p, "stranger", other), "-ca-file", caFile, "-steps", "hub-identity"}, shardURLs...)...)
	for name, r := range map[string]struct {
		run  probeRun
		want string
	}{
		"system roots":                 {system, "x509: certificate signed by unknown authority"},
		"client certificate elsewhere": {stranger, "Unauthorized"},
	} {
		if r.run.exit != 1 || len(r.run.lines) != 3 {
			t.Errorf("%s: exit %d with %d lines, want 1 with 3", name, r.run.exit, len(r.run.lines))
		}
		for _, l := range r.run.lines {
			if l.Result != providerprobe.Fail || !strings.Contains(l.Error, r.want) {
				t.Errorf("%s: %s %s %s, want a failure with %q", name, l.Check, l.Result, l.Error, r.want)
			}
		}
	}

	// A pod whose names resolve to an edge that terminates TLS: the edge's certificate
	// is not kcp's, and a client that trusted it anyway would reach the shards without
	// its certificate, as nobody.
	edgeCA := pki.MustCA(t, "edge-ca")
	edgeCert, edgeKey := p.writeCert(t, "edge-server", edgeCA.MustServerCert(t, []string{rootPublic, alphaPublic}, pki.CommonName("edge")))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	edgeLog := filepath.Join(dir, "edge.log")
	edge, err := testenv.LaunchProcess("edge", "ip", edgeLog, []string{envHelper + "=edge"},
		"netns", "exec", ns.name, self, edgeCert, edgeKey, edgeAddr+":443", p.serverCAFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(edge.Stop)
	edgeHosts := p.write(t, "edge-hosts", []byte(strings.Join([]string{
		"127.0.0.1 localhost", edgeAddr + " " + rootPublic + " " + alphaPublic, frontAddr + " " + frontService,
	}, "\n")+"\n"))
	time.Sleep(time.Second) // the edge listens at once; this only spares a retry loop
	atEdge := ns.probeResolving(t, edgeHosts, probe, append([]string{"-kubeconfig", hub, "-ca-file", caFile, "-steps", "hub-identity"}, shardURLs...)...)
	trustingEdge := ns.probeResolving(t, edgeHosts, probe, append([]string{"-kubeconfig", hub, "-ca-file", p.pemFile(t, "kcp-and-edge.pem", p.serverCA, edgeCA), "-steps", "hub-identity"}, shardURLs...)...)
	for name, r := range map[string]struct {
		run  probeRun
		want string
	}{
		"names at the edge":                 {atEdge, "x509: certificate signed by unknown authority"},
		"names at the edge, its CA trusted": {trustingEdge, "system:anonymous"},
	} {
		if front := r.run.line(t, providerprobe.StepHubIdentity, providerprobe.CheckFrontProxy); front.Result != providerprobe.Pass {
			t.Errorf("%s: the front proxy, still resolved to its Service, failed: %s", name, front.Error)
		}
		for _, shard := range []string{"root", "alpha"} {
			if l := r.run.line(t, providerprobe.StepHubIdentity, providerprobe.ShardCheck(shard)); l.Result != providerprobe.Fail || !strings.Contains(l.Error, r.want) {
				t.Errorf("%s: shard %s: %s %s, want a failure with %q", name, shard, l.Result, l.Error, r.want)
			}
		}
	}

	// kcp's own side: the shards follow their own public URLs (a cached resource read
	// by a consumer), and no dial of those URLs or handshake with them failed.
	for _, proc := range procs {
		for _, l := range strings.Split(string(readFile(t, proc.LogPath)), "\n") {
			if (strings.Contains(l, alphaPublic) || strings.Contains(l, rootPublic)) &&
				(strings.Contains(l, "x509:") || strings.Contains(l, "dial tcp") || strings.Contains(l, "tls:") || strings.Contains(l, "no such host")) {
				t.Errorf("%s logs a failed call of a public URL: %s", proc.Name, l)
			}
		}
	}
}

func copyLogs(t *testing.T, from, to string) {
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Log(err)
		return
	}
	matches, _ := filepath.Glob(filepath.Join(from, "*.log"))
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err == nil {
			err = os.WriteFile(filepath.Join(to, filepath.Base(m)), data, 0o644)
		}
		if err != nil {
			t.Log(err)
		}
	}
}
