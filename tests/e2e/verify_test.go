package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/railgrid/railgrid-kcp/internal/verify"
)

// verifySkipReason is why the e2e skips cmd/verify's ingress check: it asks the edge's
// load balancer, and Envoy's proxy pods are simulated (no Envoy binary can be built here).
const verifySkipReason = "no Envoy proxy runs in the test cluster: its pods are simulated by kwok"

// runVerify builds cmd/verify and runs it against the cluster, as an operator would
// after `up`, with the ingress check skipped explicitly; every other check must pass
// against the running kcp (split-horizon asks the real CoreDNS from a probe pod on the
// real node; anonymous, hub-credential and shards reach kcp's owned Services through the
// API server's port-forward), and the skipped check must be reported as skipped.
func runVerify(t *testing.T, ctx context.Context, e *env, root string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "verify")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/verify")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/verify: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, bin, "-config", e.stack.cfgFile, "-kubeconfig", e.c.kubeconfig, "-json", "-timeout", "2m", "-interval", "1s",
		"-skip", verify.CheckIngress, "-skip-reason", verifySkipReason)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var report verify.Report
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("cmd/verify (%v) printed no JSON report: %v\n%s%s", runErr, err, stdout.String(), stderr.String())
	}
	counts := map[string]map[verify.Status]int{}
	for _, r := range report.Results {
		if counts[r.Check] == nil {
			counts[r.Check] = map[verify.Status]int{}
		}
		counts[r.Check][r.Status]++
		switch {
		case r.Check == verify.CheckIngress:
			if r.Status != verify.StatusSkip || r.Message != "skipped: "+verifySkipReason {
				t.Errorf("cmd/verify %s: %s %s, want skipped with the reason", r.Check, r.Status, r.Message)
			}
		case r.Status != verify.StatusPass:
			t.Errorf("cmd/verify %s %s: %s: %s", r.Check, r.Item, r.Status, r.Message)
		}
	}
	for _, check := range []string{verify.CheckRollout, verify.CheckSplitHorizon, verify.CheckHubKubeconfig,
		verify.CheckAnonymous, verify.CheckHubCredential, verify.CheckShards} {
		if counts[check][verify.StatusPass] == 0 {
			t.Errorf("cmd/verify reported no passing %s item", check)
		}
	}
	if runErr != nil || !report.Passed {
		t.Errorf("cmd/verify exited with %v (passed %v)\n%s", runErr, report.Passed, stderr.String())
	}
	t.Logf("cmd/verify: %+v; per check: %v", report.Summary, counts)
}
