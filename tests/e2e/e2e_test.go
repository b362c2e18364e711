//go:build linux

package e2e

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/railgrid/railgrid-kcp/config"
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
//	5_faults_test.go     two ups at once, killed pods, the kubelet and containerd restarted
//	6_restore_test.go    a snapshot of the root shard's etcd restored by the runbook
//	7_destroy_test.go    destroy keeps the data; an interrupted up after it takes it over
//	8_killed_up_test.go  ups killed with SIGKILL at four points
//
// Two machines run side by side, each with a cluster and a real node of its own (a
// machine has one node: its kube-proxy owns the machine's KUBE-* chains): the lifecycle
// on this one (first up, verify, faults, restore, destroy), and on a second one, this
// binary run again in a network namespace of its own (testenv.RunOnOwnMachine),
// killed-up and then day two on the stack the last up after the kills converged. Most
// of either is waiting on servers, so the two share the cores well.
//
// Each stage runs alone: `go test -run 'TestKindStackEndToEnd/lifecycle/verify'` makes
// the cluster, converges the stack with an up of its own, and runs verify (and
// `TestKindStackEndToEnd/second-machine/day-two` day two); a stage reads what it needs
// from the stack and the cluster (the hub Secret, the stack's config), never from an
// earlier stage. A machine runs its stages on one cluster, in order, and converges the
// stack again after a stage that failed, so the next stages get theirs. The other files
// hold what the steps share.
func TestKindStackEndToEnd(t *testing.T) {
	testenv.SkipIfShortOrDisabled(t, envSkip, "the e2e test starts a control plane and the Pulumi CLI")
	if os.Geteuid() != 0 {
		t.Fatalf("the e2e test needs root (its real node sets up a bridge, iptables rules and mounts); set %s=1 to skip it", envSkip)
	}
	if testenv.Machine() == "" {
		// Started before this machine takes its node lock, which it may wait for (another
		// test's node): the second machine need not wait with it.
		t.Run("second-machine", func(t *testing.T) { t.Parallel(); runSecondMachine(t) })
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
	stages, opts := lifecycleStages, envOptions{signIn: true}
	name := "lifecycle"
	if testenv.Machine() != "" {
		stages, opts, name = secondMachineStages, envOptions{externalApprover: true}, "second-machine"
	}
	// Ends before the binary's -timeout, and at SIGINT or SIGTERM, so that every
	// clean-up runs.
	ctx := testenv.RunContext(t, cleanupMargin)
	requireAddOnsBuiltAtPinnedVersions(t, ctx, root, bins)
	started := time.Now()
	t.Cleanup(func() { t.Logf("e2e finished in %s", time.Since(started).Round(time.Second)) })
	t.Logf("binaries: %s, %s, %s, %s, %s, %s, %s, %s, %s", bins.kubeAPIServer, bins.kubeControllerManager, bins.kubeScheduler,
		bins.etcd, bins.kwok, bins.pulumi, bins.provider, bins.kcpOperator, bins.certManager)
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		// One lock for the machine's run: another test with a node (tests/node) would
		// otherwise take the machine between its stages.
		testenv.LockTheNode(t)
		newLifecycle(t, ctx, bins, src, opts).runStages(t, stages)
	})
}

// lifecycleStages run on this machine's cluster, in order.
var lifecycleStages = []stage{
	{name: "first-up", needs: stackEmpty, steps: firstUpSteps},
	{name: "verify", needs: stackConverged, begin: beginVerify, lanes: verifyLanes, afterLanes: afterVerifyLanes},
	{name: "faults", needs: stackConverged, steps: faultSteps},
	{name: "restore", needs: stackConverged, steps: restoreSteps},
	{name: "destroy", needs: stackConverged, steps: destroySteps},
}

// secondMachineStages run on the second machine's cluster, in order: killed-up needs the
// empty stack a fresh cluster has, and leaves it converged for day two.
var secondMachineStages = []stage{
	{name: "killed-up", needs: stackEmpty, begin: beginKilledUp, stepsOf: killedUpSteps},
	{name: "day-two", needs: stackConverged, begin: beginDayTwo, steps: dayTwoSteps},
}

// runSecondMachine runs this test binary again as machine e2e-b, with the part of -run
// below second-machine, so that `-run TestKindStackEndToEnd/second-machine/day-two` runs
// day two alone there. It ends before this binary's timeout, so that both clean up.
func runSecondMachine(t *testing.T) {
	pattern := "^TestKindStackEndToEnd$/^second-machine$"
	if f := flag.Lookup("test.run"); f != nil {
		if parts := strings.Split(f.Value.String(), "/"); len(parts) > 2 {
			pattern += "/" + strings.Join(parts[2:], "/")
		}
	}
	var timeout time.Duration
	if deadline, ok := t.Deadline(); ok {
		timeout = time.Until(deadline) - time.Minute
	}
	ctx := testenv.RunContext(t, cleanupMargin)
	// The second machine reaches no module proxy: what it reads from the module cache is
	// downloaded here first (on a fresh machine the cache is empty).
	if err := downloadModulesOfTheSecondMachine(ctx, testenv.RepoRoot(t)); err != nil {
		t.Fatal(err)
	}
	run, err := testenv.RunOnOwnMachine(ctx, "e2e-b", pattern, timeout, cleanupMargin-time.Minute, os.Stdout)
	switch {
	case err != nil:
		t.Fatal(err)
	case !run.Passed && len(run.Failed) == 0:
		t.Errorf("the second machine failed before any test did (its output, [e2e-b], says why)")
	case !run.Passed:
		t.Errorf("on the second machine (its output, [e2e-b]): %s failed", strings.Join(run.Failed, ", "))
	}
}

// downloadModulesOfTheSecondMachine fills the module cache with the modules a cluster
// reads from it: the add-ons' charts at the shipped stack's versions, kwok's stages.
func downloadModulesOfTheSecondMachine(ctx context.Context, root string) error {
	shipped, err := config.ParseStackFile(filepath.Join(root, "Pulumi.kind.yaml"))
	if err != nil {
		return err
	}
	for _, m := range [][2]string{
		{testenv.CertManagerModule, shipped.Versions.CertManager},
		{testenv.EnvoyGatewayModule, shipped.Versions.EnvoyGateway},
		{kwokModule, kwokVersion},
	} {
		if _, err := testenv.ModuleDir(ctx, m[0], m[1]); err != nil {
			return err
		}
	}
	return nil
}

// lifecycle is what the lifecycle's steps share: one cluster with the stack, and what
// earlier steps found.
type lifecycle struct {
	*env
	ctx  context.Context
	bins binaries
	src  sources
	// state is what the lifecycle knows of the stack between its stages.
	state stackState
	// first is the first preview, which the config step ran.
	first *previewRun
	// creds are the hub credentials the current stage has seen, oldest first: the first
	// up's, or the one the hub held when day two began, and each re-mint's.
	creds []credential
	// verifyBin waits for cmd/verify's build, which runs beside the cluster's start.
	verifyBin   func() (string, error)
	kcpadminBin func() (string, error)
	// etcdrestoreBin is cmd/etcdrestore, which the restore step runs as the runbook does.
	etcdrestoreBin func() (string, error)
	held           bool
	// dexVersion is the hub's Dex's (its image's tag).
	dexVersion string
	// verify is what the verify stage's lanes found, for their later steps.
	verify *verifyFindings
	// durable is the object on alpha that the faults and the restore must not lose
	// (durableObject).
	durable *kcpObject
	// killed is what killed-up's kills share (beginKilledUp).
	killed *killedUpRun
	// hubWatch watches the hub Secret through day two's first re-mint
	// (hubcopyupgrade_test.go).
	hubWatch *hubDataWatch
}

func newLifecycle(t *testing.T, ctx context.Context, bins binaries, src sources, opts envOptions) *lifecycle {
	l := &lifecycle{ctx: ctx, bins: bins, src: src, state: stackEmpty}
	l.verifyBin = goBuild(ctx, src.root, "./cmd/verify", filepath.Join(t.TempDir(), "verify"))
	l.kcpadminBin = goBuild(ctx, src.root, "./cmd/kcpadmin", filepath.Join(t.TempDir(), "kcpadmin"))
	l.etcdrestoreBin = goBuild(ctx, src.root, "./cmd/etcdrestore", filepath.Join(t.TempDir(), "etcdrestore"))
	l.env = newEnv(t, ctx, bins, src, opts)
	var err error
	if l.dexVersion, err = testenv.DexVersion(bins.dex); err != nil {
		t.Fatal(err)
	}
	return l
}

// step is one named check of a stage.
type step struct {
	name string
	run  func(t *testing.T, l *lifecycle)
	// required: nothing after it in its stage (or lane) can run when it fails.
	required bool
}

// stackState is what a stage needs of the stack when it begins, and what the lifecycle
// knows of it between stages.
type stackState int

const (
	// stackUnknown: a stage failed, so the stack may be anywhere between its states.
	stackUnknown stackState = iota
	// stackEmpty: the state holds nothing (a fresh cluster, or after destroy).
	stackEmpty
	// stackConverged: an up converged and every step since passed.
	stackConverged
)

func (s stackState) String() string {
	return [...]string{"unknown", "empty", "converged"}[s]
}

// stage is a group of steps, one file's worth. Its steps run in order, or its lanes side
// by side (the steps of one lane in order): lanes are for steps that only read the
// stack, so that none changes what another checks.
type stage struct {
	name  string
	needs stackState
	// begin, if set, runs before the first step: what the stage reads from the stack and
	// the cluster, or starts for its later steps.
	begin func(t *testing.T, l *lifecycle)
	steps []step
	lanes [][]step
	// afterLanes run one after another once every lane is done: steps that change
	// what the lanes read.
	afterLanes []step
	// stepsOf, if set, gives the steps from what begin made (killed-up's kill points).
	stepsOf func(l *lifecycle) []step
}

// runStages runs the stages in order, each as a subtest with a subtest per step (a stage
// that -run filters out does not run). Before a stage it brings the stack to what the
// stage needs: an up when the stage needs a converged stack and the last stage did not
// leave one (it failed, or did not run), a destroy when it needs an empty one. Every
// stage leaves the stack converged when it passes. With RAILGRID_E2E_HOLD=1 it holds the
// cluster after the first stage that fails, or after verify if everything passed (hold).
func (l *lifecycle) runStages(t *testing.T, stages []stage) {
	for _, st := range stages {
		if l.ctx.Err() != nil {
			t.Logf("the lifecycle stops before %s: %v", st.name, context.Cause(l.ctx))
			return
		}
		ran, prepared := false, true
		passed := t.Run(st.name, func(t *testing.T) {
			ran = true
			if prepared = l.prepare(t, st.name, st.needs); !prepared {
				return
			}
			if st.begin != nil {
				st.begin(t, l)
			}
			if st.stepsOf != nil {
				l.runSteps(t, st.stepsOf(l))
				return
			}
			if len(st.lanes) == 0 {
				l.runSteps(t, st.steps)
				return
			}
			var wg sync.WaitGroup
			for _, lane := range st.lanes {
				wg.Add(1)
				go func() { defer wg.Done(); l.runSteps(t, lane) }()
			}
			wg.Wait()
			l.runSteps(t, st.afterLanes)
		})
		if !ran {
			continue
		}
		if !prepared {
			t.Logf("the lifecycle stops at %s: the stack could not be brought to %s", st.name, st.needs)
			l.hold(t, "the lifecycle stopped at "+st.name)
			return
		}
		if !passed {
			l.state = stackUnknown
			t.Logf("stage %s failed: the next stage converges the stack again before it begins", st.name)
			l.hold(t, "stage "+st.name+" failed")
			continue
		}
		l.state = stackConverged
		if st.name == "verify" {
			l.hold(t, "the first up and verify passed")
		}
	}
}

// runSteps runs steps in order, each as a subtest of t, until one that is required fails.
func (l *lifecycle) runSteps(t *testing.T, steps []step) {
	for _, s := range steps {
		if l.ctx.Err() != nil {
			t.Errorf("%s not run: %v", s.name, context.Cause(l.ctx))
			return
		}
		if !t.Run(s.name, func(t *testing.T) { s.run(t, l) }) && s.required {
			t.Errorf("%s failed: the steps after it in %s cannot run", s.name, t.Name())
			return
		}
	}
}

// prepare brings the stack to what stage needs and says what it did; false if it could
// not (the stage then fails, naming why).
func (l *lifecycle) prepare(t *testing.T, stage string, needs stackState) bool {
	t.Helper()
	if l.state == needs {
		return true
	}
	ctx, cancel := context.WithTimeout(l.ctx, upTimeout)
	defer cancel()
	start := time.Now()
	switch needs {
	case stackConverged:
		res, log, err := l.stack.up(ctx, nil)
		if err != nil {
			t.Errorf("%s needs a converged stack (it was %s), and the up to converge it failed: %v\n%s", stage, l.state, err, indent(log.diagnostics()))
			return false
		}
		t.Logf("%s needs a converged stack (it was %s): up converged it in %s: %s", stage, l.state,
			time.Since(start).Round(time.Second), changeCounts(summaryOf(res.Summary)))
	case stackEmpty:
		if _, log, err := l.stack.destroy(ctx); err != nil {
			t.Errorf("%s needs an empty stack (it was %s), and the destroy failed: %v\n%s", stage, l.state, err, indent(log.diagnostics()))
			return false
		}
		t.Logf("%s needs an empty stack (it was %s): destroyed in %s", stage, l.state, time.Since(start).Round(time.Second))
	}
	l.state = needs
	return true
}
