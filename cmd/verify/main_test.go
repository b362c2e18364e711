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

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/internal/verify/verifytest"
)

// harness runs the command against a fake cluster, a scripted DNS probe and a TLS edge.
type harness struct {
	t          *testing.T
	dir        string
	stackFile  string
	caFile     string
	edgeAddr   string
	cluster    *verifytest.Cluster
	dns        *verifytest.DNSRunner
	gotContext string
	clientsErr error
}

func newHarness(t *testing.T, edge verifytest.EdgeBehaviour) *harness {
	t.Helper()
	dir := t.TempDir()
	cfg := verifytest.Config(t)
	h := &harness{t: t, dir: dir, stackFile: verifytest.WriteStack(t, dir)}
	h.cluster = verifytest.NewHealthyCluster(t, cfg)
	h.dns = verifytest.HealthyDNS(cfg)
	h.caFile = h.cluster.PKI.WriteCA(t, dir)
	h.edgeAddr = verifytest.NewEdge(t, cfg, h.cluster.PKI, edge).Listener.Addr().String()
	t.Chdir(dir)
	return h
}

func (h *harness) deps() deps {
	return deps{
		clients: func(_, kubeContext string) (kubernetes.Interface, dynamic.Interface, string, error) {
			h.gotContext = kubeContext
			if h.clientsErr != nil {
				return nil, nil, "", h.clientsErr
			}
			return h.cluster.Kube, h.cluster.Dynamic, kubeContext, nil
		},
		pods:        func(kubernetes.Interface, string) verify.PodRunner { return h.dns },
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

func (h *harness) fullArgs(extra ...string) []string {
	return append([]string{
		"-stack", "kind", "-timeout", "1s", "-interval", "20ms",
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
	// A header, 18 results and a summary.
	if len(lines) != 20 || lines[len(lines)-1] != "PASSED: 18 passed, 0 warning(s), 0 failed" {
		t.Fatalf("output:\n%s", stdout)
	}
	for _, l := range lines[1 : len(lines)-1] {
		if !strings.HasPrefix(l, "✓ ") {
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
	if !report.Passed || report.Stack != "kind" || report.Context != "other" || report.Summary.Pass != 18 {
		t.Errorf("report %+v", report)
	}
}

func TestVerifyExitsOneWhenACheckFails(t *testing.T) {
	edge := verifytest.HealthyEdge()
	edge.ShardAPIStatus = http.StatusUnauthorized
	h := newHarness(t, edge)
	code, stdout, _ := h.run(h.fullArgs()...)
	t.Log("\n" + stdout)
	if code != exitFailed {
		t.Fatalf("exit %d, want 1\n%s", code, stdout)
	}
	if !strings.Contains(stdout, "✗ ingress        GET https://kcp-root.example.com/api: answered 401, want 403") ||
		!strings.Contains(stdout, "FAILED: 16 passed, 0 warning(s), 2 failed") {
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
		"-insecure-skip-tls-verify", "-ca-file", "-min-validity-days", "-strict", "Exit status"} {
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
	code := run(context.Background(), []string{"-stack", "kind", "-timeout", "1s", "-interval", "20ms", "-checks", "ingress,hub-kubeconfig"}, &out, &errOut, d)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if got.Address != KindIngressAddress || got.CAFile != "" || !bytes.Equal(got.ExtraRootsPEM, h.cluster.PKI.CAPEM) {
		t.Errorf("HTTP options %+v", got)
	}

	// Explicit flags win.
	code = run(context.Background(), []string{"-stack", "kind", "-checks", "ingress", "-timeout", "1s", "-ingress-address", h.edgeAddr, "-ca-file", h.caFile}, &out, &errOut, d)
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
	if report.Summary.Skip != 2 || report.Summary.Fail != 0 || report.Summary.Pass == 0 {
		t.Errorf("summary %+v", report.Summary)
	}

	code, stdout, _ = h.run(h.fullArgs("-skip", "ingress")...)
	if code != exitOK || !strings.Contains(stdout, "- ingress        check ingress: skipped: skipped on request (-skip)") ||
		!strings.Contains(stdout, ", 1 skipped (not verified)") {
		t.Errorf("exit %d, text output:\n%s", code, stdout)
	}
	if code, _, stderr := h.run(h.fullArgs("-skip", "nope")...); code != exitUsage || !strings.Contains(stderr, `unknown check "nope"`) {
		t.Errorf("-skip nope: exit %d, %s", code, stderr)
	}
}
