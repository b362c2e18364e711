package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

// Step budgets: generous for a loaded 2-core machine, far below the program's own
// 30-minute waits, so a hang fails with the logs instead of the test binary's timeout.
// The program's compile has a budget of its own (compileTimeout), spent before the first
// preview, so that these measure what they name.
const (
	upTimeout      = 8 * time.Minute
	previewTimeout = 4 * time.Minute
)

// cleanupMargin is how long before the test binary's -timeout the test stops, so that
// every clean-up runs: the binary's own timeout kills it with none.
const cleanupMargin = 3 * time.Minute

// kcpKinds are the operator's kinds the stack declares.
var kcpKinds = []string{"RootShard", "Shard", "FrontProxy", "Kubeconfig"}

// TestKindStackEndToEnd runs the kind stack under the real Pulumi engine and Kubernetes
// provider on clusters with a real node. The story, stage by stage, one file each:
//
//	1_cluster_test.go    a control plane, a real node, the chart mirrors, the stack
//	2_first_up_test.go   preview, a refused config, the first up, what it made
//	3_verify_test.go     cmd/verify and the clients against running kcp; RAILGRID_E2E_HOLD
//	4_day_two_test.go    a no-op up, a version bump, re-mints, shards added and retired
//	5_faults_test.go     two ups at once; ups killed with SIGKILL (killed-up, its own cluster)
//	6_destroy_test.go    destroy keeps the data; an interrupted up after it takes it over
//
// The lifecycle runs every stage on one cluster, killed-up aside: it runs on a second
// cluster afterwards (a machine has one real node, so one after the other). The other files hold
// what the steps share.
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
	// One lock for both clusters: another test with a node (tests/node) would otherwise
	// take the machine between them, and killed-up would wait for it.
	testenv.LockTheNode(t)
	// Ends before the binary's -timeout, and at SIGINT or SIGTERM, so that every
	// clean-up runs.
	ctx := testenv.RunContext(t, cleanupMargin)
	requireAddOnsBuiltAtPinnedVersions(t, ctx, root, bins)
	started := time.Now()
	t.Logf("binaries: %s, %s, %s, %s, %s, %s, %s, %s, %s", bins.kubeAPIServer, bins.kubeControllerManager, bins.kubeScheduler,
		bins.etcd, bins.kwok, bins.pulumi, bins.provider, bins.kcpOperator, bins.certManager)

	t.Run("lifecycle", func(t *testing.T) {
		l := newLifecycle(t, ctx, bins, src)
		l.runStages(t, []stage{
			{"first-up", firstUpSteps},
			{"verify", verifySteps},
			{"day-two", dayTwoSteps},
			{"faults", faultSteps},
			{"destroy", destroySteps},
		})
	})
	if ctx.Err() == nil {
		t.Run("killed-up", func(t *testing.T) { killedUp(t, ctx, bins, src) })
	}
	t.Logf("e2e finished in %s", time.Since(started).Round(time.Second))
}

// lifecycle is what the lifecycle's steps share: one cluster with the stack, and what
// earlier steps found.
type lifecycle struct {
	*env
	ctx  context.Context
	bins binaries
	src  sources
	// first is the first preview, which the config step ran.
	first *previewRun
	// creds are the hub credentials handed over so far, oldest first.
	creds []credential
	// removeGKEPlan removes the gke plan's kcp objects the first up's steps applied.
	removeGKEPlan func()
	// verifyBin waits for cmd/verify's build, which runs beside the cluster's start.
	verifyBin   func() (string, error)
	kcpadminBin func() (string, error)
	// etcdrestoreBin is cmd/etcdrestore, which the restore step runs as the runbook does.
	etcdrestoreBin func() (string, error)
	held           bool
	// verifyStarted is when the first cmd/verify run began; sliceURL is the endpoint-slice
	// URL on alpha its provider-path followed.
	verifyStarted time.Time
	sliceURL      string
	// dexVersion is the hub's Dex's (its image's tag); dexUp when it was Ready;
	// aliceToken an ID token of alice's from it, for cmd/verify's oidc-user.
	dexVersion string
	dexUp      time.Time
	aliceToken string
	// durable is the object on alpha that the faults must not lose (durableObject).
	durable *kcpObject
}

func newLifecycle(t *testing.T, ctx context.Context, bins binaries, src sources) *lifecycle {
	l := &lifecycle{ctx: ctx, bins: bins, src: src}
	l.verifyBin = goBuild(ctx, src.root, "./cmd/verify", filepath.Join(t.TempDir(), "verify"))
	l.kcpadminBin = goBuild(ctx, src.root, "./cmd/kcpadmin", filepath.Join(t.TempDir(), "kcpadmin"))
	l.etcdrestoreBin = goBuild(ctx, src.root, "./cmd/etcdrestore", filepath.Join(t.TempDir(), "etcdrestore"))
	l.env = newEnv(t, ctx, bins, src, envOptions{signIn: true})
	var err error
	if l.dexVersion, err = testenv.DexVersion(bins.dex); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l.removeGKEPlan != nil {
			l.removeGKEPlan()
		}
	})
	return l
}

// step is one named check of a stage.
type step struct {
	name string
	run  func(t *testing.T, l *lifecycle)
	// required: nothing after it can run when it fails, so the lifecycle stops there.
	required bool
}

// stage is a group of steps, one file's worth.
type stage struct {
	name  string
	steps []step
}

// runStages runs the stages in order, each as a subtest with a subtest per step. It
// stops at the first required step that fails; with RAILGRID_E2E_HOLD=1 it holds the
// cluster there, or after verify if everything passed (hold).
func (l *lifecycle) runStages(t *testing.T, stages []stage) {
	for _, st := range stages {
		stopped := ""
		t.Run(st.name, func(t *testing.T) {
			for _, s := range st.steps {
				if l.ctx.Err() != nil {
					stopped = s.name + ": " + context.Cause(l.ctx).Error()
					return
				}
				if !t.Run(s.name, func(t *testing.T) { s.run(t, l) }) && s.required {
					stopped = s.name + " failed"
					return
				}
			}
		})
		if stopped != "" {
			t.Logf("the lifecycle stops at %s/%s", st.name, stopped)
			l.hold(t, "the lifecycle stopped at "+st.name+"/"+stopped)
			return
		}
		if st.name == "verify" {
			l.hold(t, "the first up and verify passed")
		}
	}
}
