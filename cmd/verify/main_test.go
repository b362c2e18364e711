package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

// harness runs the command against a fake cluster, a scripted DNS probe, a TLS edge and
// a fake kcp behind the owned Services.
type harness struct {
	t          *testing.T
	dir        string
	stackFile  string
	caFile     string
	edgeAddr   string
	cluster    *verifytest.Cluster
	dns        *verifytest.DNSRunner
	kcp        *verifytest.Kcp
	gotContext string
	clientsErr error
	// gotServices is what the services dependency was built from.
	gotServices *clusterClients
}

func newHarness(t *testing.T, edge verifytest.EdgeBehaviour) *harness {
	t.Helper()
	dir := t.TempDir()
	cfg := verifytest.Config(t)
	h := &harness{t: t, dir: dir, stackFile: verifytest.WriteStack(t, dir)}
	h.cluster = verifytest.NewHealthyCluster(t, cfg)
	h.dns = verifytest.HealthyDNS(cfg)
	h.caFile = h.cluster.CA.CAFile(t, dir)
	h.edgeAddr = verifytest.NewEdge(t, cfg, h.cluster.CA, edge).Listener.Addr().String()
	h.kcp = verifytest.NewKcp(t, cfg, h.cluster.CA, verifytest.HealthyKcp(cfg))
	t.Chdir(dir)
	return h
}

func (h *harness) deps() deps {
	return deps{
		clients: func(_, kubeContext string) (clusterClients, error) {
			h.gotContext = kubeContext
			if h.clientsErr != nil {
				return clusterClients{}, h.clientsErr
			}
			return clusterClients{kube: h.cluster.Kube, dynamic: h.cluster.Dynamic, rest: &rest.Config{Host: "https://apiserver.invalid"}, context: kubeContext}, nil
		},
		pods: func(kubernetes.Interface, string) verify.PodRunner { return h.dns },
		services: func(c clusterClients) verify.ServiceDialer {
			h.gotServices = &c
			return h.kcp
		},
		httpOptions: func(o verify.HTTPOptions) verify.HTTPOptions { return o },
		now:         func() time.Time { return verifytest.Now },
	}
}

// run runs the command (in the harness directory, where -stack kind finds Pulumi.kind.yaml).
func (h *harness) run(args ...string) (code int, stdout, stderr string) {
	h.t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut, h.deps())
	return code, out.String(), errOut.String()
}

// Each check's time limit in the tests: a check that should pass gets long enough for a
// loaded machine (it returns as soon as it passes; 1 s failed a healthy check while a
// cold build ran beside it); a run in which checks should fail gets a shorter one, since
// a failing check retries until its limit.
const (
	passTimeout = "30s"
	failTimeout = "5s"
)

func (h *harness) fullArgs(extra ...string) []string {
	return append([]string{
		"-stack", "kind", "-timeout", passTimeout, "-interval", "20ms",
		"-ingress-address", h.edgeAddr, "-ca-file", h.caFile,
	}, extra...)
}

func TestVerifyPassesOnAHealthyStack(t *testing.T) {
	h := newHarness(t, verifytest.HealthyEdge())
	code, stdout, stderr := h.run(h.fullArgs()...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	// A header, 30 results (5 of them certificates'), the two that need the provider
	// probe's image and oidc-user, which needs a user's token (none is given here, so
	// they are skipped, never passed), and a summary.
	if len(lines) != 35 || lines[len(lines)-1] != "PASSED: 30 passed, 0 warning(s), 0 failed, 3 skipped (not verified)" {
		t.Fatalf("output:\n%s", stdout)
	}
	for _, l := range lines[1 : len(lines)-1] {
		if !strings.HasPrefix(l, "✓ ") && !(strings.HasPrefix(l, "- ") && (strings.Contains(l, "skipped: no provider-probe image given") || strings.Contains(l, "skipped: no user's ID token given"))) {
			t.Errorf("line %q", l)
		}
	}
	// The kind stack talks to its own context by default.
	if h.gotContext != "kind-railgrid-kcp" {
		t.Errorf("context %q, want the stack's kind.context", h.gotContext)
	}
}

func TestVerifyJSON(t *testing.T) {
	h := newHarness(t, verifytest.HealthyEdge())
	code, stdout, _ := h.run(h.fullArgs("-json", "-context", "other")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stdout)
	}
	var report verify.Report
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if !report.Passed || report.Stack != "kind" || report.Context != "other" || report.Summary.Pass != 30 {
		t.Errorf("report %+v", report)
	}
}

func TestVerifyExitsOneWhenACheckFails(t *testing.T) {
	edge := verifytest.HealthyEdge()
	edge.ShardAPIStatus = http.StatusUnauthorized
	h := newHarness(t, edge)
	code, stdout, _ := h.run(h.fullArgs("-timeout", failTimeout)...)
	t.Log("\n" + stdout)
	if code != exitFailed {
		t.Fatalf("exit %d, want 1\n%s", code, stdout)
	}
	if !strings.Contains(stdout, "✗ ingress        GET https://kcp-root.example.com/api: answered 401, want 403") ||
		!strings.Contains(stdout, "FAILED: 28 passed, 0 warning(s), 2 failed") {
		t.Errorf("output:\n%s", stdout)
	}
}

func TestVerifyWarningsFailOnlyWhenStrict(t *testing.T) {
	h := newHarness(t, verifytest.HealthyEdge())
	// The healthy certificate has 365 days left.
	code, stdout, _ := h.run(h.fullArgs("-checks", "hub-kubeconfig", "-min-validity-days", "400")...)
	if code != exitOK || !strings.Contains(stdout, "⚠ hub-kubeconfig") {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	code, stdout, _ = h.run(h.fullArgs("-checks", "hub-kubeconfig", "-min-validity-days", "400", "-strict")...)
	if code != exitFailed || !strings.Contains(stdout, "FAILED: 0 passed, 1 warning(s), 0 failed") {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
}

func TestVerifyIngressOnlyNeedsNoCluster(t *testing.T) {
	h := newHarness(t, verifytest.HealthyEdge())
	h.clientsErr = errors.New("no kubeconfig here")
	code, stdout, stderr := h.run(h.fullArgs("-checks", "ingress")...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
}

func TestVerifyUsageAndConfigErrors(t *testing.T) {
	h := newHarness(t, verifytest.HealthyEdge())
	bad := filepath.Join(h.dir, "Pulumi.bad.yaml")
	if err := os.WriteFile(bad, []byte("config:\n  railgrid-kcp:platform: kind\n  railgrid-kcp:etcd:\n    members: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args       []string
		clientsErr error
		stderr     string
	}{
		"no stack":          {args: nil, stderr: "-stack (or -config) is required"},
		"unknown flag":      {args: []string{"-stack", "kind", "-nope"}, stderr: "flag provided but not defined: -nope"},
		"missing stack":     {args: []string{"-stack", "prod"}, stderr: "Pulumi.prod.yaml: no such file"},
		"invalid config":    {args: []string{"-stack", "bad"}, stderr: `railgrid-kcp:etcd.members = "2": must be 1, 3 or 5`},
		"config flag":       {args: []string{"-config", bad}, stderr: "invalid stack configuration"},
		"unknown check":     {args: []string{"-stack", "kind", "-checks", "dns"}, stderr: `unknown check "dns"`},
		"both trust flags":  {args: []string{"-stack", "kind", "-ca-file", "x", "-insecure-skip-tls-verify"}, stderr: "exclude each other"},
		"bad timeout":       {args: []string{"-stack", "kind", "-timeout", "0s"}, stderr: "-timeout must be positive"},
		"bad cert validity": {args: []string{"-stack", "kind", "-cert-min-validity", "-1h"}, stderr: "-cert-min-validity must be positive"},
		"bad address":       {args: []string{"-stack", "kind", "-ingress-address", "localhost"}, stderr: "must be host:port"},
		"stray argument":    {args: []string{"-stack", "kind", "gke"}, stderr: "unexpected arguments: gke"},
		"kubeconfig broken": {args: []string{"-stack", "kind"}, clientsErr: errors.New(`context "kind-railgrid-kcp" does not exist`), stderr: `kubeconfig: context "kind-railgrid-kcp" does not exist`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h.clientsErr = tc.clientsErr
			code, stdout, stderr := h.run(tc.args...)
			if code != exitUsage {
				t.Fatalf("exit %d, want 2\n%s%s", code, stdout, stderr)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tc.stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q", stdout)
			}
		})
	}
}

func TestVerifyHelp(t *testing.T) {
	h := newHarness(t, verifytest.HealthyEdge())
	code, _, stderr := h.run("-h")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"-stack", "-config", "-kubeconfig", "-context", "-json", "-timeout", "-ingress-address",
		"-insecure-skip-tls-verify", "-ca-file", "-min-validity-days", "-strict", "Exit status",
		"anonymous", "hub-credential", "shards", "pods/portforward"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("help lacks %s", want)
		}
	}
}

// The repository's own stack files load (run from the repository root in practice).
func TestVerifyReadsTheRepositoryStackFiles(t *testing.T) {
	for _, stack := range []string{"kind", "gke"} {
		t.Run(stack, func(t *testing.T) {
			path, err := filepath.Abs(filepath.Join("..", "..", "Pulumi."+stack+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Skip("no stack file", path)
			}
			h := newHarness(t, verifytest.HealthyEdge())
			h.clientsErr = errors.New("stop before the cluster")
			code, _, stderr := h.run("-config", path)
			if code != exitUsage || !strings.Contains(stderr, "stop before the cluster") {
				t.Fatalf("exit %d: %s", code, stderr)
			}
		})
	}
}

// The kind stack needs no ingress flags: it dials the edge's host port and trusts kcp's
// CA from the hub kubeconfig (the kind edge passes TLS through to kcp).
func TestVerifyKindIngressDefaults(t *testing.T) {
	h := newHarness(t, verifytest.HealthyEdge())
	var got verify.HTTPOptions
	d := h.deps()
	d.httpOptions = func(o verify.HTTPOptions) verify.HTTPOptions {
		got = o
		o.Address = h.edgeAddr // the test edge listens on a random port
		return o
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"-stack", "kind", "-timeout", passTimeout, "-interval", "20ms", "-checks", "ingress,hub-kubeconfig"}, &out, &errOut, d)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if got.Address != KindIngressAddress || got.CAFile != "" || !bytes.Equal(got.ExtraRootsPEM, h.cluster.CA.PEM) {
		t.Errorf("HTTP options %+v", got)
	}

	// Explicit flags win.
	code = run(context.Background(), []string{"-stack", "kind", "-checks", "ingress", "-timeout", passTimeout, "-ingress-address", h.edgeAddr, "-ca-file", h.caFile}, &out, &errOut, d)
	if code != exitOK || got.Address != h.edgeAddr || got.CAFile != h.caFile || got.ExtraRootsPEM != nil {
		t.Errorf("exit %d, HTTP options %+v", code, got)
	}
}

// -skip reports the named checks as skipped with the reason, never as passed, and does
// not run them: a broken edge and a DNS probe that would fail change nothing.
func TestVerifySkipReportsSkippedChecksWithTheReason(t *testing.T) {
	edge := verifytest.HealthyEdge()
	edge.ShardAPIStatus = http.StatusUnauthorized // the ingress check would fail
	h := newHarness(t, edge)
	code, stdout, stderr := h.run(h.fullArgs("-skip", "split-horizon,ingress", "-skip-reason", "no pods run in the simulated cluster", "-json")...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	var report verify.Report
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	skipped := map[string]string{}
	for _, r := range report.Results {
		switch {
		case r.Status == verify.StatusSkip && (strings.Contains(r.Message, "no provider-probe image given") || strings.Contains(r.Message, "no user's ID token given")):
			// provider-path and hub-credential's pod mode, and oidc-user: no image and no
			// token are given here
		case r.Status == verify.StatusSkip:
			skipped[r.Check] = r.Message
		case r.Check == verify.CheckSplitHorizon || r.Check == verify.CheckIngress:
			t.Errorf("skipped check %s ran: %+v", r.Check, r)
		}
	}
	want := "skipped: no pods run in the simulated cluster"
	if len(skipped) != 2 || skipped[verify.CheckSplitHorizon] != want || skipped[verify.CheckIngress] != want {
		t.Errorf("skipped results %v, want split-horizon and ingress with %q", skipped, want)
	}
	if report.Summary.Skip != 2+3 || report.Summary.Fail != 0 || report.Summary.Pass == 0 {
		t.Errorf("summary %+v", report.Summary)
	}

	code, stdout, _ = h.run(h.fullArgs("-skip", "ingress")...)
	if code != exitOK || !strings.Contains(stdout, "- ingress        check ingress: skipped: skipped on request (-skip)") ||
		!strings.Contains(stdout, ", 4 skipped (not verified)") {
		t.Errorf("exit %d, text output:\n%s", code, stdout)
	}
	if code, _, stderr := h.run(h.fullArgs("-skip", "nope")...); code != exitUsage || !strings.Contains(stderr, `unknown check "nope"`) {
		t.Errorf("-skip nope: exit %d, %s", code, stderr)
	}
}

// The checks that ask kcp get the port-forward dialer built from the cluster's clients,
// and fail the run when kcp answers wrong.
func TestVerifyAsksKcpThroughTheServiceDialer(t *testing.T) {
	h := newHarness(t, verifytest.HealthyEdge())
	code, stdout, stderr := h.run("-stack", "kind", "-timeout", passTimeout, "-interval", "20ms", "-checks", "anonymous,hub-credential,shards")
	if code != exitOK || !strings.Contains(stdout, "PASSED: 7 passed, 0 warning(s), 0 failed") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if h.gotServices == nil || h.gotServices.kube != h.cluster.Kube || h.gotServices.rest == nil || h.gotServices.rest.Host != "https://apiserver.invalid" {
		t.Errorf("the dialer was built from %+v, want the cluster's clients and rest config", h.gotServices)
	}
	if got := strings.Join(h.kcp.Dials(), ","); got != "kcp-system/kcp-alpha:6443,kcp-system/kcp-frontproxy:6443,kcp-system/kcp-root:6443" {
		t.Errorf("dialled %s", got)
	}

	cfg := verifytest.Config(t)
	b := verifytest.HealthyKcp(cfg)
	b.FrontAPIStatus = http.StatusOK
	h.kcp = verifytest.NewKcp(t, cfg, h.cluster.CA, b)
	code, stdout, _ = h.run("-stack", "kind", "-timeout", failTimeout, "-interval", "20ms", "-checks", "anonymous")
	if code != exitFailed || !strings.Contains(stdout, "✗ anonymous      Service kcp-system/kcp-frontproxy GET /api: answered 200, want 401") {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
}

// -skip takes the new checks' names: they are reported as skipped and not run.
func TestVerifySkipsTheChecksThatAskKcp(t *testing.T) {
	h := newHarness(t, verifytest.HealthyEdge())
	code, stdout, stderr := h.run(h.fullArgs("-skip", "anonymous,hub-credential,shards", "-skip-reason", "kcp does not run here")...)
	if code != exitOK || !strings.Contains(stdout, "- anonymous      check anonymous: skipped: kcp does not run here") ||
		!strings.Contains(stdout, "- hub-credential check hub-credential: skipped") || !strings.Contains(stdout, "- shards         check shards: skipped") ||
		!strings.Contains(stdout, ", 5 skipped (not verified)") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if dials := h.kcp.Dials(); len(dials) != 0 {
		t.Errorf("skipped checks dialled %v", dials)
	}
}

// The real clients keep the API server's config, from which the port-forward dialer is
// built, and the context actually used.
func TestKubeClientsKeepTheRestConfigForThePortForward(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kubeconfig := `apiVersion: v1
kind: Config
clusters:
- name: kind
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: admin
  user: {token: not-used}
contexts:
- name: kind-railgrid-kcp
  context: {cluster: kind, user: admin}
current-context: kind-railgrid-kcp
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := kubeClients(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.context != "kind-railgrid-kcp" || c.rest == nil || c.rest.Host != "https://127.0.0.1:6443" || c.kube == nil || c.dynamic == nil {
		t.Fatalf("clients %+v", c)
	}
	d, ok := defaultDeps().services(c).(*verify.PortForwardDialer)
	if !ok || d.Config != c.rest || d.Kube != c.kube {
		t.Errorf("services dialer %#v, want a PortForwardDialer on the cluster's clients", d)
	}
}
