package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
	"github.com/railgrid/railgrid-kcp/tests/internal/testenv"
)

// bumpedKcpVersion is what the version-bump step moves versions.kcp to.
const bumpedKcpVersion = "v0.33.1"

// Step budgets: generous for a loaded 2-core machine, far below the program's own
// 30-minute waits, so a hang fails with the logs instead of the test binary's timeout.
const (
	upTimeout      = 8 * time.Minute
	previewTimeout = 4 * time.Minute
)

// kcpKinds are the operator's kinds the stack declares.
var kcpKinds = []string{"RootShard", "Shard", "FrontProxy", "Kubeconfig"}

// TestKindStackEndToEnd runs the kind stack under the real Pulumi engine and Kubernetes
// provider on clusters with a real node: its whole lifecycle on one cluster (preview, up,
// the cluster against the offline plan, the hub Secret and the state, no changes on a
// second run, a kcp version bump, a re-mint, day two, destroy, and an up after destroy
// interrupted with Ctrl-C and run again), then, on a fresh cluster of its own, a chain of
// killed ups, each run again.
func TestKindStackEndToEnd(t *testing.T) {
	testenv.SkipIfShortOrDisabled(t, envSkip, "the e2e test starts a control plane and the Pulumi CLI")
	if os.Geteuid() != 0 {
		t.Fatalf("the e2e test needs root (its real node sets up a bridge, iptables rules and mounts); set %s=1 to skip it", envSkip)
	}
	bins := findBinaries(t)
	root := testenv.RepoRoot(t)
	crds := testenv.CRDsDir(root)
	if _, err := os.Stat(filepath.Join(crds, "kcp-operator")); err != nil {
		t.Fatalf("the upstream CRDs are not in %s (set %s): %v", crds, testenv.EnvCRDsDir, err)
	}
	thirdparty := testenv.ThirdpartyDir(root)
	if _, err := os.Stat(filepath.Join(thirdparty, "kcp-operator-chart", "Chart.yaml")); err != nil {
		t.Fatalf("the kcp-operator chart is not in %s (set %s): %v", thirdparty, testenv.EnvThirdpartyDir, err)
	}
	src := sources{root: root, crds: crds, thirdparty: thirdparty, images: &nodeImageSet{dir: t.TempDir()}}
	// Stop (and let every cleanup run) before the test binary's own -timeout kills all.
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(45 * time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(-30*time.Second))
	t.Cleanup(cancel)
	requireAddOnsBuiltAtPinnedVersions(t, ctx, root, bins)
	started := time.Now()
	t.Logf("binaries: %s, %s, %s, %s, %s, %s, %s, %s, %s", bins.kubeAPIServer, bins.kubeControllerManager, bins.kubeScheduler,
		bins.etcd, bins.kwok, bins.pulumi, bins.provider, bins.kcpOperator, bins.certManager)

	// One after the other: a machine has one real node.
	t.Run("lifecycle", func(t *testing.T) { lifecycle(t, ctx, bins, src) })
	t.Run("killed-up", func(t *testing.T) { killedUp(t, ctx, bins, src) })
	t.Logf("e2e finished in %s", time.Since(started).Round(time.Second))
}

// sources are what every cluster of the test reads: the repository, the upstream CRDs,
// the upstream sources (the operator's chart and RBAC) and the real node's images.
type sources struct {
	root, crds, thirdparty string
	images                 *nodeImageSet
}

// nodeImageSet writes the real node's images once, for the first cluster that needs them.
type nodeImageSet struct {
	once     sync.Once
	dir      string
	tarballs []string
}

func (s *nodeImageSet) get(t *testing.T, bins binaries, p rendered) []string {
	s.once.Do(func() { s.tarballs = buildNodeImages(t, bins, s.dir, p) })
	if len(s.tarballs) == 0 {
		t.Fatal("the real node's images could not be written (see the first cluster's log)")
	}
	return s.tarballs
}

// env is one cluster with the stack, the volume binder and, in killed-up, cert-manager's
// controller and the test's request approver.
type env struct {
	c        *cluster
	stack    *e2eStack
	plan     rendered
	ctl      *controllers // nil unless envOptions.externalApprover
	volumes  *volumeBinder
	approver *requestApprover // nil unless envOptions.externalApprover
}

// envOptions are what a run changes in its cluster.
type envOptions struct {
	// externalApprover declares cert-manager present (kind.certManagerPresent): the test
	// runs cert-manager's controller as a process without its own approver, and the test's
	// requestApprover in its place, so the run can hold one Certificate's issuance. The
	// stack then installs only the kcp-operator and Envoy Gateway from their charts.
	externalApprover bool
}

func newEnv(t *testing.T, ctx context.Context, bins binaries, src sources, opts envOptions) *env {
	t.Helper()
	base := t.TempDir()
	if os.Getenv(envKeep) == "1" {
		var err error
		if base, err = os.MkdirTemp("", "railgrid-e2e-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s=1: keeping the cluster, its logs, the workspace and the state in %s", envKeep, base)
	}
	root, crds := src.root, src.crds
	overlay := stackOverlay{
		mirrors:            serveCharts(t, ctx, bins, src, filepath.Join(base, "charts")),
		certManagerPresent: opts.externalApprover,
	}
	if err := os.MkdirAll(filepath.Join(base, "cluster"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The stack file first: the cluster's Service range comes from its config.
	pre := &e2eStack{t: t, cfgFile: filepath.Join(base, "probe.yaml")}
	if err := writeStackConfig(filepath.Join(root, "Pulumi.kind.yaml"), pre.cfgFile, overlay); err != nil {
		t.Fatal(err)
	}
	p := pre.render()
	c := startCluster(t, ctx, bins, filepath.Join(base, "cluster"), p.cfg, src.images.get(t, bins, p))
	prepareCluster(t, ctx, c, crds, opts.externalApprover)
	e := &env{c: c, plan: p}
	e.volumes = startVolumeBinder(t, ctx, c)
	if opts.externalApprover {
		e.approver = startRequestApprover(t, ctx, c)
		e.ctl = startControllers(t, ctx, c, bins, filepath.Join(base, "cluster"), true)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv(envVerbose) == "1" {
			logAddOnPods(t, c)
		}
	})
	e.stack = newStack(t, ctx, root, base, c, bins, overlay)
	return e
}

// serveCharts serves the three charts the kind stack installs, at the versions the
// shipped stack file pins, on loopback as an offline machine's mirrors
// (testenv.ServeKindCharts; tests/charts checks these mirrors with the Helm CLI). They
// stop when the run ends.
func serveCharts(t *testing.T, ctx context.Context, bins binaries, src sources, dir string) testenv.KindChartMirrors {
	t.Helper()
	start := time.Now()
	shipped, err := config.ParseStackFile(filepath.Join(src.root, "Pulumi.kind.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	v := shipped.Versions
	publisher := testenv.Helm{Bin: bins.helm, Home: filepath.Join(dir, "helm")}
	m := testenv.ServeKindCharts(t, ctx, publisher, dir, src.crds, src.thirdparty, v.CertManager, v.EnvoyGateway)
	t.Logf("chart mirrors on loopback in %s: cert-manager %s and the kcp-operator at %s, Envoy Gateway %s at %s",
		time.Since(start).Round(time.Millisecond), v.CertManager, m.Repository.URL, v.EnvoyGateway, m.Registry.Repository)
	return m
}

func lifecycle(t *testing.T, ctx context.Context, bins binaries, src sources) {
	e := newEnv(t, ctx, bins, src, envOptions{})
	s, p, root := e.stack, e.plan, src.root

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

	// 1a. up itself refuses a misspelled key, naming the key, the value and the rule, with
	// nothing declared: main.go gets the whole stack config from the language host.
	t.Run("1a-up-refuses-a-misspelled-key", func(t *testing.T) { checkUpRefusesMisspelledKey(t, ctx, e) })

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
		// The up ends with the hub Secret: this is the wall time from an empty stack
		// to the hub's credential.
		t.Logf("first up (empty stack to hub Secret): %s in %s", changeCounts(summaryOf(res.Summary)), time.Since(start).Round(time.Second))
		checkOrder(t, p, log)
		// docs/gke.md, "State backend and secrets provider": the provider leaves copies of its
		// kubeconfig in $TMPDIR. This finds them in the TMPDIR the test gave the CLI (so
		// they go with the test's cleanup), and fails if the provider stops writing them.
		copies, _ := filepath.Glob(filepath.Join(s.tmpDir, "kubeconfig*"))
		if len(copies) == 0 {
			t.Errorf("no kubeconfig copy of the provider in the CLI's TMPDIR %s: the note on them in docs/gke.md is out of date", s.tmpDir)
		}
	})
	if !upOK {
		return // nothing else can be checked without a converged stack
	}

	// The gke plan's kcp objects go beside the kind stack's now, so the operator writes
	// their Deployments while the next steps run; step 5b checks them.
	removeGKEPlan := applyGKEPlanKcpObjects(t, ctx, e.c, root)

	// 2a. The stack's releases installed cert-manager, Envoy Gateway and the kcp-operator
	// (addons_test.go). Every pod of etcd, kcp-system, the operator, cert-manager and Envoy
	// Gateway, and CoreDNS, runs on the real node, Ready through its real probe (a Job's
	// pod: succeeded), with no flag error in kcp's logs and no restart but the one the
	// operator's probes can cause a front proxy; only Envoy's proxy pods run on the kwok
	// nodes (node_test.go).
	t.Run("2a-pods-run-on-the-real-node", func(t *testing.T) {
		checkAddOnsInstalled(t, ctx, e.c, "the first up")
		checkWebhookCalledThroughItsService(t, ctx, e.c)
		checkPodsRanForReal(t, ctx, e.c)
	})

	// 2b. Envoy Gateway accepted and programmed the kind edge.
	t.Run("2b-envoy-gateway-programs-the-edge", func(t *testing.T) { checkEdgeProgrammed(t, ctx, e) })

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
		extra, seen, err := unplannedObjects(ctx, e.c, p.objects)
		if err != nil {
			t.Fatal(err)
		}
		if len(extra) > 0 {
			t.Errorf("%d objects in the cluster that the offline plan does not have:%s", len(extra), indent(extra))
		}
		if seen < checked/2 {
			t.Errorf("only %d objects in the cluster were written by %s*: the search for unplanned objects proves little", seen, pulumiManager)
		}
		t.Logf("%d objects written by the Kubernetes provider in the cluster, all in the offline plan", seen)
		// The search can fail: a stray object of a planned kind, written by a
		// pulumi-kubernetes field manager, shows up.
		// (With data: the API server keeps no managedFields entry for an empty field set.)
		stray := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "railgrid-e2e-stray", Namespace: naming.NamespaceKcp},
			Data: map[string]string{"stray": "true"}}
		if _, err := e.c.kube.CoreV1().ConfigMaps(naming.NamespaceKcp).Create(ctx, stray, metav1.CreateOptions{FieldManager: pulumiManager + "-e2e-stray"}); err != nil {
			t.Fatal(err)
		}
		extra, _, err = unplannedObjects(ctx, e.c, p.objects)
		if err != nil || len(extra) != 1 || !strings.Contains(extra[0], "railgrid-e2e-stray") {
			t.Errorf("a stray ConfigMap written by %s* was not reported as unplanned: %v %v", pulumiManager, extra, err)
		}
		if err := e.c.kube.CoreV1().ConfigMaps(naming.NamespaceKcp).Delete(ctx, stray.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	// 3b. cmd/verify passes its rollout and hub-kubeconfig checks, and reports the DNS and
	// ingress checks as skipped.
	t.Run("3b-cmd-verify", func(t *testing.T) { runVerify(t, ctx, e, root) })
	t.Run("3c-coredns-reads-our-corefile", func(t *testing.T) { checkCoreDNSReadsOurCorefile(t, ctx, e, p, true) })

	// 4. The hub Secret holds the kubeconfig the operator wrote from cert-manager's
	// certificate; the state holds no plaintext of it.
	var creds []credential
	t.Run("4-hub-secret-and-no-plaintext-in-state", func(t *testing.T) {
		cred, err := readCredential(ctx, e.c, naming.KubeconfigName)
		if err != nil {
			t.Fatalf("the operator's kubeconfig Secret: %v", err)
		}
		creds = append(creds, cred)
		checkHubSecret(t, ctx, e, p, cred)
		checkNoPlaintext(t, ctx, e, creds)
		// The credential works, as the hub uses it: through the front proxy, as kcp-admin.
		checkHubCredentialWorks(t, ctx, e, "first up")
	})
	if len(creds) == 0 {
		return
	}
	// sameCredential fails when the operator's Secret no longer holds the credential
	// the hub has (a routine up must not re-issue it).
	sameCredential := func(t *testing.T, label string) {
		t.Helper()
		last := creds[len(creds)-1]
		cred, err := readCredential(ctx, e.c, strings.TrimPrefix(last.Secret, naming.NamespaceKcp+"/"))
		if err != nil {
			t.Errorf("%s: the operator's kubeconfig Secret: %v", label, err)
		} else if cred.Cert.SerialNumber.Cmp(last.Cert.SerialNumber) != 0 {
			t.Errorf("%s re-issued the hub credential (serial %x, was %x)", label, cred.Cert.SerialNumber, last.Cert.SerialNumber)
		}
	}

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
		start := time.Now()
		ures, ulog, err := s.up(uctx, nil)
		if err != nil {
			t.Fatalf("the second up failed: %v\n%s", err, indent(ulog.diagnostics()))
		}
		if changed := changedURNs(ulog); len(changed) > 0 {
			drift.add(changed)
			t.Errorf("the second up, with nothing changed, changed:%s", indent(describe(changed)))
		}
		sameCredential(t, "the second up")
		t.Logf("second (no-op) up: %s in %s", changeCounts(summaryOf(ures.Summary)), time.Since(start).Round(time.Second))
	})

	// 5b. The gke plan's kcp objects, applied beside the kind stack's after the first up,
	// give command lines that the real kcp binaries accept too.
	t.Run("5b-kcp-accepts-the-gke-plans-command-lines", func(t *testing.T) { checkGKEPlanKcpArgs(t, ctx, e.c, bins, removeGKEPlan) })

	// 6. Changing only versions.kcp updates every kcp object in one up, the root shard
	// rolled out before the shard and the front proxy are updated, every kcp Deployment
	// rolled out when the up returns, and nothing that holds data replaced.
	t.Run("6-kcp-version-bump", func(t *testing.T) {
		before := dataHolders(t, ctx, e.c)
		s.setConfigPath(ctx, "versions.kcp", bumpedKcpVersion)
		uctx, cancel := context.WithTimeout(ctx, upTimeout)
		defer cancel()
		order, stopWatch := watchUpgradeOrder(uctx, e.c, bumpedKcpVersion)
		res, log, err := s.up(uctx, order.onEngineEvent(uctx, e.c, p, bumpedKcpVersion))
		stopWatch()
		if err != nil {
			t.Fatalf("up after the version bump failed: %v\n%s", err, indent(log.diagnostics()))
		}
		t.Logf("version bump: %s", changeCounts(summaryOf(res.Summary)))
		wantUpdated := map[string]bool{
			p.urnOf("RootShard", naming.RootShardName):   true,
			p.urnOf("Shard", "alpha"):                    true,
			p.urnOf("FrontProxy", naming.FrontProxyName): true,
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
		order.check(t)
		// The bumped pods run on the real node with no flag error and no restart.
		checkPodsRanForReal(t, ctx, e.c)
		after := dataHolders(t, ctx, e.c)
		checkSameObjects(t, before, after)
		sameCredential(t, "the version bump")
		checkNoChanges(t, ctx, s, "post-bump")
	})

	// 7. Raising hub.remintGeneration hands the hub a credential issued by that re-mint,
	// twice in a row.
	for _, gen := range []int{1, 2} {
		t.Run(fmt.Sprintf("7-remint-%d", gen), func(t *testing.T) { remint(t, ctx, e, gen, &creds) })
	}

	// 7b. Day two: add the shard beta, retire it, bring it back on its kept volumes,
	// retire it again (daytwo_test.go).
	t.Run("7b-day-two-add-and-retire-a-shard", func(t *testing.T) { dayTwo(t, ctx, e) })

	// 8. destroy keeps the etcd volumes and the operator's CRDs, removes the rest.
	t.Run("8-destroy-keeps-data", func(t *testing.T) {
		pvcsBefore, err := countObjects(ctx, e.c, pvcGVR, naming.NamespaceEtcd)
		if err != nil || len(pvcsBefore) == 0 {
			t.Fatalf("no etcd volume claims before destroy (%v)", err)
		}
		addOnCRDsBefore, err := addOnCRDs(ctx, e.c)
		if err != nil || len(addOnCRDsBefore) == 0 {
			t.Fatalf("no CRDs of the add-ons before destroy (%v)", err)
		}
		dctx, cancel := context.WithTimeout(ctx, upTimeout)
		defer cancel()
		// Nothing is lifted: the operator removes each Shard from the running root shard
		// before its finalizer lets the Shard go.
		res, log, err := s.destroy(dctx)
		if err != nil {
			t.Fatalf("destroy failed: %v\n%s", err, indent(log.diagnostics()))
		}
		t.Logf("destroy: %s", changeCounts(summaryOf(res.Summary)))
		checkAfterDestroy(t, ctx, e, p, pvcsBefore, addOnCRDsBefore)
		checkEnvoyProxyRemoved(t, ctx, e)
		if d := s.export(ctx); len(d.Resources) > 0 {
			var left []string
			for _, r := range d.Resources {
				left = append(left, shortURN(r.URN))
			}
			t.Errorf("the state still holds %d resources after destroy:%s", len(left), indent(left))
		}
	})

	// 8b. What destroy kept is what a later up takes over: the same stack, on the same
	// cluster, comes back on the retained volumes, also when that up is interrupted with
	// Ctrl-C and run again.
	t.Run("8b-interrupted-up-after-destroy-reuses-kept-data", func(t *testing.T) {
		// The namespace destroy deleted must be gone before it can be created again.
		if err := testenv.WaitFor(ctx, 3*time.Minute, nil, func() (bool, error) {
			_, err := e.c.kube.CoreV1().Namespaces().Get(ctx, naming.NamespaceKcp, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			ns, _ := e.c.kube.CoreV1().Namespaces().Get(ctx, naming.NamespaceKcp, metav1.GetOptions{})
			t.Fatalf("namespace %s is still there after destroy (%v): %s", naming.NamespaceKcp, err, compact(ns.Status))
		}
		before := map[string]string{}
		for k, uid := range dataHolders(t, ctx, e.c) {
			if strings.HasPrefix(k, "persistentvolumeclaims ") {
				before[k] = uid
			}
		}
		// The up is interrupted with Ctrl-C while it waits for the root shard, and run
		// again (interrupt_test.go).
		interruptedUp(t, ctx, e)
		checkSameObjects(t, before, dataHolders(t, ctx, e.c))
		// The releases destroy uninstalled are installed again, over what they left.
		checkAddOnsInstalled(t, ctx, e.c, "the up after destroy")
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

// requireAddOnsBuiltAtPinnedVersions fails unless cert-manager's binaries and Envoy
// Gateway's control plane, which the add-ons' images hold, were built from the module
// versions the kind stack installs (versions.certManager, versions.envoyGateway), as
// their build information records them, so the test proves the program against the
// add-ons a kind cluster gets.
func requireAddOnsBuiltAtPinnedVersions(t *testing.T, ctx context.Context, root string, bins binaries) {
	t.Helper()
	cfg, err := config.ParseStackFile(filepath.Join(root, "Pulumi.kind.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	check := func(bin, module, pinned, key string) {
		built, err := builtModuleVersion(ctx, bin, module)
		if err != nil {
			t.Fatal(err)
		}
		if built != pinned {
			t.Fatalf("the kind stack installs %s %s (%s) but the test runs %s, built from %s", module, pinned, key, bin, built)
		}
	}
	for _, c := range testenv.CertManagerComponents {
		check(bins.certManagerImages[c], testenv.CertManagerModule, cfg.Versions.CertManager, "versions.certManager")
	}
	check(bins.envoyGateway, testenv.EnvoyGatewayModule, cfg.Versions.EnvoyGateway, "versions.envoyGateway")
}
