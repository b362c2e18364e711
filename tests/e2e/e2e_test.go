package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/components"
	"github.com/railgrid/railgrid-kcp/config"
)

// bumpedKcpVersion is what the version-bump step moves versions.kcp to.
const bumpedKcpVersion = "v0.33.1"

// Step budgets: generous for a loaded 2-core machine, far below the program's own
// 30-minute waits, so a hang fails with the logs instead of the test binary's timeout.
const (
	upTimeout      = 8 * time.Minute
	previewTimeout = 4 * time.Minute
)

// kcpKinds are the kinds the stand-in plays the operator for.
var kcpKinds = []string{"RootShard", "Shard", "FrontProxy", "Kubeconfig"}

// TestKindStackEndToEnd runs the kind stack under the real Pulumi engine and Kubernetes
// provider against a container-less cluster: first its whole lifecycle on one cluster
// (preview, up, the cluster against the offline plan, the hub Secret and the state, no
// changes on a second run, a kcp version bump, a re-mint, destroy), then, on a fresh
// cluster, an `up` interrupted after the root shard is created and run again.
func TestKindStackEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("the e2e test starts a control plane and the Pulumi CLI; skipped with -short")
	}
	if os.Getenv(envSkip) == "1" {
		t.Skipf("%s=1", envSkip)
	}
	bins := findBinaries(t)
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	crds := crdsDir(root)
	if _, err := os.Stat(filepath.Join(crds, "kcp-operator")); err != nil {
		t.Fatalf("the upstream CRDs are not in %s (set %s): %v", crds, envCRDsDir, err)
	}
	// Stop (and let every cleanup run) before the test binary's own -timeout kills all.
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(45 * time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(-30*time.Second))
	t.Cleanup(cancel)
	started := time.Now()
	t.Logf("binaries: %s, %s, %s, %s, %s, %s, %s", bins.kubeAPIServer, bins.kubeControllerManager, bins.kubeScheduler,
		bins.etcd, bins.kwok, bins.pulumi, bins.provider)

	t.Run("lifecycle", func(t *testing.T) { lifecycle(t, ctx, bins, root, crds) })
	t.Run("interrupted-up", func(t *testing.T) { interruptedUp(t, ctx, bins, root, crds) })
	t.Logf("e2e finished in %s", time.Since(started).Round(time.Second))
}

// env is one cluster with the stack, the stand-in operator and the volume binder.
type env struct {
	c        *cluster
	stack    *e2eStack
	plan     rendered
	operator *standIn
	volumes  *volumeBinder
}

func newEnv(t *testing.T, ctx context.Context, bins binaries, root, crds string, rootShardHold time.Duration) *env {
	t.Helper()
	base := t.TempDir()
	if os.Getenv(envKeep) == "1" {
		var err error
		if base, err = os.MkdirTemp("", "railgrid-e2e-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s=1: keeping the cluster, its logs, the workspace and the state in %s", envKeep, base)
	}
	chartDir, err := writeOperatorChart(filepath.Join(base, "chart"), crds)
	if err != nil {
		t.Fatalf("generating the kcp-operator chart: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(base, "cluster"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The stack file first: the cluster's Service range comes from its config.
	pre := &e2eStack{t: t, cfgFile: filepath.Join(base, "probe.yaml")}
	if err := writeStackConfig(filepath.Join(root, "Pulumi.kind.yaml"), pre.cfgFile, chartDir); err != nil {
		t.Fatal(err)
	}
	p := pre.render()
	c := startCluster(t, ctx, bins, filepath.Join(base, "cluster"), p.cfg.Network.ServiceCIDR)
	prepareCluster(t, ctx, c, crds, p.kinds())
	e := &env{c: c, plan: p}
	e.volumes = startVolumeBinder(t, ctx, c)
	e.operator = startStandIn(t, ctx, c, rootShardHold)
	e.stack = newStack(t, ctx, root, base, c, bins, chartDir)
	return e
}

func lifecycle(t *testing.T, ctx context.Context, bins binaries, root, crds string) {
	e := newEnv(t, ctx, bins, root, crds, 0)
	s, p := e.stack, e.plan

	// 0. The CLI accepts the repository's Pulumi.yaml with the kind stack's config.
	var first *previewRun
	t.Run("0-cli-accepts-project-config", func(t *testing.T) {
		pctx, cancel := context.WithTimeout(ctx, previewTimeout)
		defer cancel()
		res, log, err := s.preview(pctx)
		if err == nil || !strings.Contains(err.Error(), "validating stack config") {
			// The CLI accepted the config; whether the preview itself succeeded is step 1's.
			first = &previewRun{res: res, log: log, err: err}
			return
		}
		if !strings.Contains(err.Error(), "is missing configuration value") {
			t.Fatalf("the Pulumi CLI refuses the stack's config: %v", firstLine(stderrOf(err)))
		}
		missing, merr := missingProjectConfig(filepath.Join(root, "Pulumi.yaml"), s.cfgFile)
		if merr != nil {
			t.Fatalf("preview failed: %v; reading the config declarations: %v", err, merr)
		}
		t.Errorf("PROGRAM BUG: the Pulumi CLI refuses the kind stack: %s.\n"+
			"Pulumi.yaml declares %v without a default, so every stack must set them, but config.Validate refuses "+
			"the other platform's key on a stack. The rest of this test runs with those declarations removed "+
			"from the workspace's copy of Pulumi.yaml.", firstLine(stderrOf(err)), missing)
		if err := s.dropProjectConfig(missing); err != nil {
			t.Fatal(err)
		}
	})

	// 1. A preview of the fresh stack succeeds and creates everything the plan declares.
	t.Run("1-preview-fresh-stack", func(t *testing.T) {
		run := first
		if run == nil {
			pctx, cancel := context.WithTimeout(ctx, previewTimeout)
			defer cancel()
			res, log, err := s.preview(pctx)
			run = &previewRun{res: res, log: log, err: err}
		}
		if run.err != nil {
			hint := ""
			if strings.Contains(run.err.Error(), "invalid dependency URN") {
				hint = "\n(a resource depends on a read whose ID is unknown in this preview: the Go SDK resolves a skipped read " +
					"with an empty URN, which the engine refuses as a dependency; here the hub Secret depends on the read of " +
					"the operator's Kubeconfig Secret)"
			}
			t.Fatalf("preview of the fresh stack failed: %v%s\n%s", run.err, hint, indent(run.log.diagnostics()))
		}
		res, log := run.res, run.log
		creates := map[string]bool{}
		var others []string
		for urn, ops := range log.opsByURN() {
			for _, op := range ops {
				switch op {
				case "create":
					creates[urn] = true
				case "same", "read":
				default:
					others = append(others, op+" "+shortURN(urn))
				}
			}
		}
		var missing []string
		declared := 0
		for _, r := range p.rec.Resources {
			if r.Read {
				continue
			}
			declared++
			if !creates[r.URN] {
				missing = append(missing, shortURN(r.URN))
			}
		}
		if len(missing) > 0 {
			t.Errorf("the preview does not create %d of the %d resources the offline plan declares:%s", len(missing), declared, indent(missing))
		}
		if len(others) > 0 {
			t.Errorf("a fresh stack's preview should only create, but it also plans:%s", indent(others))
		}
		t.Logf("preview: %s; %d creates cover the %d declared resources", changeCounts(res.ChangeSummary), len(creates), declared)
	})

	// 2. up converges, and nothing kcp is created before what it needs is ready.
	upOK := false
	t.Run("2-up-converges-in-order", func(t *testing.T) {
		uctx, cancel := context.WithTimeout(ctx, upTimeout)
		defer cancel()
		start := time.Now()
		res, log, err := s.up(uctx, nil)
		if err != nil {
			t.Fatalf("up failed after %s: %v\n%s", time.Since(start).Round(time.Second), err, indent(log.diagnostics()))
		}
		upOK = true
		t.Logf("up: %s in %s", changeCounts(summaryOf(res.Summary)), time.Since(start).Round(time.Second))
		checkOrder(t, p, log)
		if v := e.operator.Violations(); len(v) > 0 {
			t.Errorf("the cluster saw kcp objects before what they need was ready:%s", indent(v))
		}
		t.Logf("stand-in marked Available:%s", indent(e.operator.availableOrder()))
	})
	if !upOK {
		return // nothing else can be checked without a converged stack
	}

	// 3. The cluster holds what the offline plan shows.
	t.Run("3-cluster-matches-offline-plan", func(t *testing.T) {
		problems, checked, err := comparePlan(ctx, e.c, p.objects)
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) > 0 {
			t.Errorf("%d differences between the cluster and the offline plan:%s", len(problems), indent(problems))
		}
		t.Logf("%d objects of the offline plan checked against the cluster", checked)
	})

	// 4. The hub Secret holds the minted kubeconfig; the state holds no plaintext of it.
	t.Run("4-hub-secret-and-no-plaintext-in-state", func(t *testing.T) {
		mints := e.operator.Mints()
		if len(mints) != 1 {
			t.Fatalf("the stand-in minted %d credentials, want 1", len(mints))
		}
		checkHubSecret(t, ctx, e, p, mints[0])
		checkNoPlaintext(t, ctx, e, mints)
	})

	// 5. A second preview and up change nothing.
	t.Run("5-second-run-changes-nothing", func(t *testing.T) {
		pctx, cancel := context.WithTimeout(ctx, previewTimeout)
		defer cancel()
		res, log, err := s.preview(pctx, optpreview.ExpectNoChanges(), optpreview.Diff())
		if changed := changedURNs(log); err != nil || len(changed) > 0 {
			drift.add(changed)
			t.Errorf("the second preview, with nothing changed, is not empty (%v):%s%s\n%s", firstLine(fmt.Sprint(err)),
				indent(describe(changed)), indent(log.diagnostics()), changedLines(res.StdOut+stdoutOf(err)))
		} else {
			t.Logf("second preview: %s", changeCounts(res.ChangeSummary))
		}
		uctx, cancel := context.WithTimeout(ctx, upTimeout)
		defer cancel()
		ures, ulog, err := s.up(uctx, nil)
		if err != nil {
			t.Fatalf("the second up failed: %v\n%s", err, indent(ulog.diagnostics()))
		}
		if changed := changedURNs(ulog); len(changed) > 0 {
			drift.add(changed)
			t.Errorf("the second up, with nothing changed, changed:%s", indent(describe(changed)))
		}
		if n := len(e.operator.Mints()); n != 1 {
			t.Errorf("the second up made the operator mint again (%d credentials)", n)
		}
		t.Logf("second up: %s", changeCounts(summaryOf(ures.Summary)))
	})

	// 6. Changing only versions.kcp updates every kcp object in one up and replaces
	// nothing that holds data.
	t.Run("6-kcp-version-bump", func(t *testing.T) {
		before := dataHolders(t, ctx, e.c)
		mintsBefore := len(e.operator.Mints())
		s.setConfigPath(ctx, "versions.kcp", bumpedKcpVersion)
		uctx, cancel := context.WithTimeout(ctx, upTimeout)
		defer cancel()
		res, log, err := s.up(uctx, nil)
		if err != nil {
			t.Fatalf("up after the version bump failed: %v\n%s", err, indent(log.diagnostics()))
		}
		t.Logf("version bump: %s", changeCounts(summaryOf(res.Summary)))
		wantUpdated := map[string]bool{
			p.urnOf("RootShard", config.RootShardName):       true,
			p.urnOf("Shard", "alpha"):                        true,
			p.urnOf("FrontProxy", components.FrontProxyName): true,
		}
		for urn, ops := range log.opsByURN() {
			for _, op := range ops {
				switch {
				case op == "same" || op == "read":
				case op == "update" && wantUpdated[urn]:
					delete(wantUpdated, urn)
				case drift.has(urn):
					t.Logf("%s %s: the perpetual diff reported by step 5", op, shortURN(urn))
				default:
					t.Errorf("the version bump made %s %s; only the kcp objects may change, by update", op, shortURN(urn))
				}
			}
		}
		for urn := range wantUpdated {
			t.Errorf("the version bump did not update %s", shortURN(urn))
		}
		checkImages(t, ctx, e.c, bumpedKcpVersion)
		after := dataHolders(t, ctx, e.c)
		checkSameObjects(t, before, after)
		if n := len(e.operator.Mints()); n != mintsBefore {
			t.Errorf("the version bump minted a new hub credential (%d, was %d)", n, mintsBefore)
		}
		checkNoChanges(t, ctx, s, "post-bump")
	})

	// 7. Raising hub.remintGeneration mints a new credential and the hub Secret follows.
	t.Run("7-remint", func(t *testing.T) {
		before := e.operator.Mints()
		holders := dataHolders(t, ctx, e.c)
		s.setConfigPath(ctx, "hub.remintGeneration", "1")
		uctx, cancel := context.WithTimeout(ctx, upTimeout)
		defer cancel()
		res, log, err := s.up(uctx, nil)
		if err != nil {
			t.Fatalf("up after raising hub.remintGeneration failed: %v\n%s", err, indent(log.diagnostics()))
		}
		t.Logf("re-mint: %s", changeCounts(summaryOf(res.Summary)))
		for urn, ops := range changedURNs(log) {
			if !drift.has(urn) {
				t.Logf("re-mint: %s %s", strings.Join(ops, ","), shortURN(urn))
			}
		}
		after := e.operator.Mints()
		if len(after) != len(before)+1 {
			t.Fatalf("the re-mint made the operator mint %d credentials, want 1", len(after)-len(before))
		}
		latest := after[len(after)-1]
		if !slices.Contains(latest.Subject.OrganizationalUnit, "railgrid-kcp-mint-1") {
			t.Errorf("the new credential's subject has OU %v, want railgrid-kcp-mint-1", latest.Subject.OrganizationalUnit)
		}
		p2 := s.render()
		checkHubSecret(t, ctx, e, p2, latest)
		secret, err := e.c.kube.CoreV1().Secrets(p2.cfg.Hub.Namespace).Get(ctx, p2.cfg.Hub.SecretName, metav1.GetOptions{})
		if err == nil && bytes.Equal(secret.Data[p2.cfg.Hub.SecretKey], before[len(before)-1].Kubeconfig) {
			t.Errorf("the hub Secret still holds the old credential")
		}
		checkSameObjects(t, holders, dataHolders(t, ctx, e.c))
		checkNoPlaintext(t, ctx, e, after)
		checkNoChanges(t, ctx, s, "post-remint")
	})

	// 8. destroy keeps the etcd volumes and the operator's CRDs, removes the rest.
	t.Run("8-destroy-keeps-data", func(t *testing.T) {
		pvcsBefore, err := countObjects(ctx, e.c, pvcGVR, components.NamespaceEtcd)
		if err != nil || len(pvcsBefore) == 0 {
			t.Fatalf("no etcd volume claims before destroy (%v)", err)
		}
		dctx, cancel := context.WithTimeout(ctx, upTimeout)
		defer cancel()
		res, log, err := s.destroy(dctx)
		if err != nil {
			t.Fatalf("destroy failed: %v\n%s", err, indent(log.diagnostics()))
		}
		t.Logf("destroy: %s", changeCounts(summaryOf(res.Summary)))
		checkAfterDestroy(t, ctx, e, p, pvcsBefore)
		if d := s.export(ctx); len(d.Resources) > 0 {
			var left []string
			for _, r := range d.Resources {
				left = append(left, shortURN(r.URN))
			}
			t.Errorf("the state still holds %d resources after destroy:%s", len(left), indent(left))
		}
	})

	// 8b. What destroy kept is what a later up takes over: the same stack, on the same
	// cluster, comes back on the retained volumes.
	t.Run("8b-up-after-destroy-reuses-kept-data", func(t *testing.T) {
		before := map[string]string{}
		for k, uid := range dataHolders(t, ctx, e.c) {
			if strings.HasPrefix(k, "persistentvolumeclaims ") {
				before[k] = uid
			}
		}
		uctx, cancel := context.WithTimeout(ctx, upTimeout)
		defer cancel()
		res, log, err := s.up(uctx, nil)
		if err != nil {
			t.Fatalf("up after destroy, on the cluster destroy left behind, failed: %v\n%s", err, indent(log.diagnostics()))
		}
		t.Logf("up after destroy: %s", changeCounts(summaryOf(res.Summary)))
		checkSameObjects(t, before, dataHolders(t, ctx, e.c))
	})
}

type previewRun struct {
	res auto.PreviewResult
	log *eventLog
	err error
}

// stdoutOf returns the CLI's stdout from an Automation API error.
func stdoutOf(err error) string {
	msg := err.Error()
	i := strings.Index(msg, "stdout: ")
	if i < 0 {
		return ""
	}
	msg = msg[i+len("stdout: "):]
	if j := strings.Index(msg, "stderr: "); j >= 0 {
		msg = msg[:j]
	}
	return msg
}

// changedLines keeps the lines of a --diff preview that describe changes.
func changedLines(out string) string {
	var keep []string
	inChange := false
	for _, line := range strings.Split(out, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "~ ") || strings.HasPrefix(trimmed, "+- ") || strings.HasPrefix(trimmed, "- ") ||
			strings.HasPrefix(trimmed, "+ ") || strings.HasPrefix(trimmed, "-+ ") || strings.HasPrefix(trimmed, "~") && strings.Contains(trimmed, ":"):
			inChange = true
			keep = append(keep, line)
		case trimmed == "":
			inChange = false
		case inChange:
			keep = append(keep, line)
		}
		if len(keep) > 80 {
			break
		}
	}
	return strings.Join(keep, "\n")
}

// stderrOf returns the CLI's stderr from an Automation API error, or the error.
func stderrOf(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "stderr: "); i >= 0 {
		return strings.TrimSpace(msg[i+len("stderr: "):])
	}
	return msg
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "\n"); i >= 0 {
		return s[:i]
	}
	return s
}

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
			return "", fmt.Errorf("no go.mod of module github.com/railgrid/railgrid-kcp above the working directory")
		}
		dir = parent
	}
}

// crdsDir is $RAILGRID_CRDS_DIR, or ../shared/reference/crds next to the repository.
func crdsDir(root string) string {
	if d := os.Getenv(envCRDsDir); d != "" {
		return d
	}
	return filepath.Join(filepath.Dir(root), "shared", "reference", "crds")
}
