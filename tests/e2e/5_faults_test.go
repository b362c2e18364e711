package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/railgrid/railgrid-kcp/internal/testkit/planjobs"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Stage 5, faults: what goes wrong on a running stack (faultSteps, in the lifecycle),
// then killed-up, on a cluster of its own.
var faultSteps = []step{
	{"two-ups-at-once", twoUpsAtOnce, false},
	{"killed-pods-lose-nothing", killedPodsLoseNothing, false},
	{"kubelet-and-containerd-restart", kubeletAndContainerdRestart, false},
	{"a-snapshot-brings-kcp-back", aSnapshotBringsKcpBack, false},
}

// durableWorkspace holds the object the faults must not lose, on alpha.
const durableWorkspace = "e2e-durable"

// durableObject makes (once) a workspace on alpha with a ConfigMap in it, written
// through the front proxy with the hub's credential.
func (l *lifecycle) durableObject(t *testing.T) kcpObject {
	t.Helper()
	if l.durable != nil {
		return *l.durable
	}
	if _, err := makeWorkspaceOnShard(l.ctx, l.env, durableWorkspace, "alpha"); err != nil {
		t.Fatal(err)
	}
	obj, err := writeKcpObject(l.ctx, l.env, durableWorkspace, "written-before-the-faults", map[string]string{"written": time.Now().UTC().Format(time.RFC3339Nano)})
	if err != nil {
		t.Fatal(err)
	}
	l.durable = &obj
	t.Logf("%s written through the front proxy (uid %s)", obj, obj.uid)
	return obj
}

// killedPodsLoseNothing: with a workspace on alpha holding an object, the root shard's
// kcp, alpha's etcd member and the front proxy are each killed with SIGKILL, one at a
// time; after each, the pod is Ready again, the hub's credential works and the object
// reads back unchanged.
func killedPodsLoseNothing(t *testing.T, l *lifecycle) {
	obj := l.durableObject(t)
	for _, target := range killTargets() {
		t.Run(target.name, func(t *testing.T) {
			r := killAndRecover(t, l.ctx, l.env, obj, target)
			t.Logf("%s: recovery: %s", target.what, r)
		})
	}
}

// kubeletAndContainerdRestart: the node's kubelet and containerd stop and start again,
// as after an upgrade of the node's packages; with no up, every pod is Ready again, the
// containers went on running under their shims, the hub's credential works and the
// object reads back unchanged.
func kubeletAndContainerdRestart(t *testing.T, l *lifecycle) {
	obj := l.durableObject(t)
	namespaces := []string{naming.NamespaceEtcd, naming.NamespaceKcp, naming.NamespaceOperator, naming.NamespaceCertManager,
		naming.NamespaceEnvoyGateway, naming.NamespaceKubeSystem}
	before := restartCounts(l.ctx, l.c, namespaces...)
	start := time.Now()
	if err := l.c.node.RestartKubeletAndContainerd(l.ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	t.Logf("kubelet and containerd stopped and started again in %s", restarted.Sub(start).Round(100*time.Millisecond))
	// The restarted kubelet has reported the node, and the pods' statuses are its own:
	// it starts every readiness probe at "not ready" and probes once a period, so until
	// the longest period has passed a Ready condition may still be the old kubelet's.
	reprobed := restarted.Add(longestReadinessPeriod(l.ctx, l.c, namespaces...) + 2*time.Second)
	var left []string
	if err := testenv.WaitFor(l.ctx, 4*time.Minute, nil, func() (bool, error) {
		left = notReady(l.ctx, l.c, namespaces...)
		return time.Now().After(reprobed) && nodeHeartbeatAfter(l.ctx, l.c, restarted) && len(left) == 0 && kcpServes(l.ctx, l.env, obj) == nil, nil
	}); err != nil {
		var problems strings.Builder
		for _, ns := range namespaces {
			if slices.ContainsFunc(left, func(p string) bool { return strings.HasPrefix(p, ns+"/") }) {
				problems.WriteString(testenv.PodProblems(l.ctx, l.c.kube, ns))
				problems.WriteString(podLogTails(l.ctx, l.c, ns, 20))
			}
		}
		t.Fatalf("after the restart, not Ready: %v; kcp: %v\n%s", left, kcpServes(l.ctx, l.env, obj), problems.String())
	}
	t.Logf("every pod Ready (probed by the new kubelet) and kcp serving the object %s after the restart began", time.Since(start).Round(100*time.Millisecond))
	after := restartCounts(l.ctx, l.c, namespaces...)
	var restartedContainers []string
	for k, n := range after {
		if n != before[k] {
			restartedContainers = append(restartedContainers, fmt.Sprintf("%s (%d -> %d)", k, before[k], n))
		}
	}
	slices.Sort(restartedContainers)
	t.Logf("containers that restarted across the runtime's restart: %v", restartedContainers)
	// The restarted runtime runs new pods too.
	if err := runProbePod(l.ctx, l.c, "e2e-after-runtime-restart"); err != nil {
		t.Errorf("a new pod after the runtime's restart: %v", err)
	}
}

// twoUpsAtOnce: a second up started while one runs is refused by the backend's lock
// with a message that says so, the first completes, and nothing is left pending or
// locked. The first is an up --refresh, which reads every resource back first, so that
// it holds the lock long enough.
func twoUpsAtOnce(t *testing.T, l *lifecycle) {
	ctx, s := l.ctx, l.stack
	uctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	type result struct {
		log *eventLog
		err error
	}
	first := make(chan result, 1)
	go func() {
		_, log, err := s.up(uctx, nil, optup.Refresh())
		first <- result{log, err}
	}()
	if err := testenv.WaitFor(uctx, time.Minute, nil, func() (bool, error) { return len(s.locks()) > 0, nil }); err != nil {
		t.Fatalf("the first up never took the backend's lock: %v", err)
	}
	start := time.Now()
	_, log2, err := s.up(uctx, nil)
	switch {
	case err == nil:
		t.Errorf("the second up, started while the first held the lock, succeeded")
	case !auto.IsConcurrentUpdateError(err):
		t.Errorf("the second up failed, but not on the lock: %v\n%s", err, indent(log2.diagnostics()))
	default:
		t.Logf("the second up was refused in %s: %s", time.Since(start).Round(100*time.Millisecond), lockMessage(stderrOf(err)))
	}
	r := <-first
	if r.err != nil {
		t.Fatalf("the first up failed: %v\n%s", r.err, indent(r.log.diagnostics()))
	}
	if changed := changedURNs(r.log); len(changed) > 0 {
		t.Errorf("the first up (up --refresh, nothing changed) changed:%s", indent(describe(changed)))
	}
	if left := s.locks(); len(left) > 0 {
		t.Errorf("the backend is still locked after both ups: %v", left)
	}
	if pending := s.export(ctx).pending(); len(pending) > 0 {
		t.Errorf("pending operations after both ups:%s", indent(pending))
	}
}

// lockMessage is the line of the CLI's error that names the lock.
func lockMessage(stderr string) string {
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "locked") {
			return strings.TrimSpace(line)
		}
	}
	return firstLine(stderr)
}

// Killed-up, on a cluster of its own. An up killed with SIGKILL at four
// points, in the order the program creates them, one after the other, each resumed by
// the next up, converges on the last up with nothing deleted by hand and no data holder
// replaced:
//  0. while Helm installs the kcp-operator's release (its record is pending-install);
//     the resumed up must log that the program's hook removed that record, and install
//     the release;
//  1. while the etcd StatefulSets are being created (the test's volume provisioner holds
//     their claims Pending until this kill has landed);
//  2. while the edge routes (TLSRoutes) are being created, after the resumed up has
//     finished the StatefulSets of kill 1;
//  3. while the engine awaits the Kubeconfig; the resumed up (or the last one) re-creates
//     the route of kill 2, and a field conflict would fail it.
//
// After each kill the test records the backend's lock and the pending operations, runs
// `pulumi cancel` if a lock was left (the file backend needs it), `pulumi refresh
// --clear-pending-creates` if creates were left pending, and starts the next up: the
// three commands of docs/operations.md, and nothing else.
func killedUp(t *testing.T, ctx context.Context, bins binaries, src sources) {
	k := newKilledUpRun(t, ctx, bins, src)
	for i, kp := range k.killPoints() {
		if !t.Run(kp.name, func(t *testing.T) { k.killAndRepair(t, i, kp) }) {
			return
		}
	}
	t.Run("4-up-after-the-kills-converges", k.upAfterTheKillsConverges)
}

// killedUpRun is killed-up's cluster and what its kills share.
type killedUpRun struct {
	*env
	ctx context.Context
	// The URNs the kill points wait for.
	routes, etcds       []string
	kubeconfig, release string
	// kubeconfigCert is the operator's Certificate for the Kubeconfig (kcp-operator sdk/
	// apis/operator/v1alpha1 kubeconfig_types.go: "kubeconfig-cert-%s"), which the test's
	// approver holds back until kill 3 has landed.
	kubeconfigCert string
	// before is what the state held when the current up started.
	before map[string]bool
	// leftPending is the Helm records the previous kill left pending: the next up's hook
	// must remove them before Helm installs the release again.
	leftPending []string
}

func newKilledUpRun(t *testing.T, ctx context.Context, bins binaries, src sources) *killedUpRun {
	e := newEnv(t, ctx, bins, src, envOptions{externalApprover: true})
	if missing, err := missingProjectConfig(filepath.Join(src.root, "Pulumi.yaml"), e.stack.cfgFile); err != nil || len(missing) > 0 {
		if err := e.stack.dropProjectConfig(missing); err != nil {
			t.Fatal(err)
		}
	}
	p := e.plan
	k := &killedUpRun{env: e, ctx: ctx,
		routes:         []string{p.urnOf("TLSRoute", "kcp-root"), p.urnOf("TLSRoute", "kcp-alpha"), p.urnOf("TLSRoute", "kcp-frontproxy")},
		etcds:          []string{p.urnOf("StatefulSet", "etcd-root"), p.urnOf("StatefulSet", "etcd-alpha")},
		kubeconfig:     p.urnOf("Kubeconfig", naming.KubeconfigName),
		release:        p.releaseURN(),
		kubeconfigCert: "kubeconfig-cert-" + naming.KubeconfigName,
	}
	for _, u := range append(append(slices.Clone(k.routes), k.etcds...), k.kubeconfig, k.release) {
		if u == "" {
			t.Fatalf("the plan lacks an object of a kill point (routes %v, etcd %v, kubeconfig %q)", k.routes, k.etcds, k.kubeconfig)
		}
	}
	e.volumes.paused.Store(true) // etcd claims stay Pending until kill 1 has landed
	return k
}

func started(st map[string]*engineStep, urn string) bool {
	return st[urn] != nil && st[urn].pre > 0 && st[urn].op == "create"
}

func finished(st map[string]*engineStep, urn string) bool { return st[urn] != nil && st[urn].out > 0 }

// exists reports whether every named object of the resource is in the cluster.
func (k *killedUpRun) exists(gvr schema.GroupVersionResource, ns string, names ...string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		for _, n := range names {
			if _, err := k.c.dyn.Resource(gvr).Namespace(ns).Get(ctx, n, metav1.GetOptions{}); err != nil {
				return false
			}
		}
		return true
	}
}

// killPoints are the four kills, in the order the program creates their objects.
func (k *killedUpRun) killPoints() []killPoint {
	return []killPoint{{
		name: "0-while-helm-installs-the-operator",
		arm:  func(st map[string]*engineStep) bool { return started(st, k.release) },
		inCluster: func(ctx context.Context) bool {
			records, err := pendingHelmRecords(ctx, k.env)
			return err == nil && len(records) > 0
		},
		settle: time.Second,
		landed: func(t *testing.T, st map[string]*engineStep) {
			if finished(st, k.release) {
				t.Errorf("kill 0: the Helm release's create had finished")
			}
		},
		leavesHelmPending: true,
	}, {
		name: "1-while-the-etcd-statefulsets-are-created",
		// Not while the Helm release is being installed: that is kill 0's point.
		arm: func(st map[string]*engineStep) bool {
			return (finished(st, k.release) || k.before[k.release]) && started(st, k.etcds[0]) && started(st, k.etcds[1])
		},
		inCluster: k.exists(statefulSetGVR, naming.NamespaceEtcd, "etcd-root", "etcd-alpha"),
		// The provider then awaits the rollout, which the held claims keep from ending.
		settle: 5 * time.Second,
		landed: func(t *testing.T, st map[string]*engineStep) {
			for _, u := range k.etcds {
				if finished(st, u) {
					t.Errorf("kill 1: the create of %s had finished", shortURN(u))
				}
			}
		},
	}, {
		// The routes wait for the Gateway, which waits for every kcp server to be
		// Available; the Kubeconfig waits only for the front proxy. Which finishes first
		// is a race, so the test holds the Kubeconfig's certificate (requestApprover)
		// from this up until kill 3 has landed: its create cannot finish before either
		// kill.
		name: "2-while-the-edge-routes-are-created",
		before: func() {
			k.volumes.paused.Store(false) // kill 1 has landed: etcd may finish now
			k.approver.hold(k.kubeconfigCert)
		},
		arm:       func(st map[string]*engineStep) bool { return started(st, k.routes[0]) },
		inCluster: k.exists(tlsRouteGVR, naming.NamespaceKcp, "kcp-root"),
		landed: func(t *testing.T, st map[string]*engineStep) {
			for _, u := range k.etcds {
				if !finished(st, u) && !k.before[u] {
					t.Errorf("kill 2: the resumed up did not finish %s of kill 1", shortURN(u))
				}
			}
			if finished(st, k.kubeconfig) {
				t.Errorf("kill 2: the Kubeconfig's create had finished, so kill 3 cannot land")
			}
			for _, u := range k.routes {
				t.Logf("kill 2 landed: %s create started %v, finished %v", shortURN(u), started(st, u), finished(st, u))
			}
		},
	}, {
		name:      "3-while-the-kubeconfig-is-awaited",
		arm:       func(st map[string]*engineStep) bool { return started(st, k.kubeconfig) },
		inCluster: k.exists(kubeconfigGVR, naming.NamespaceKcp, naming.KubeconfigName),
		afterKill: func() { k.approver.release() }, // kill 3 has landed: the Kubeconfig may finish now
		landed: func(t *testing.T, st map[string]*engineStep) {
			if finished(st, k.kubeconfig) {
				t.Errorf("kill 3: the Kubeconfig's create had finished")
			}
			// The route of kill 2 and the Kubeconfig start together in this up; whichever
			// up re-creates the route (this one or the last), a field conflict fails it.
			t.Logf("kill 3 landed: %s re-created by this up: %v", shortURN(k.routes[0]), finished(st, k.routes[0]))
		},
	}}
}

// killAndRepair starts an up, kills it at the kill point, checks where the kill landed,
// and repairs what the kill left with the commands of docs/operations.md.
func (k *killedUpRun) killAndRepair(t *testing.T, i int, kp killPoint) {
	if kp.before != nil {
		kp.before()
	}
	k.before = k.stateURNs()
	start := time.Now()
	what, upLog := k.upKilledAt(t, kp)
	t.Logf("killed with SIGKILL after %s: %s", time.Since(start).Round(time.Second), strings.Join(what, ", "))
	checkHelmRecordsRepaired(t, upLog, k.leftPending)
	if !kp.inCluster(k.ctx) {
		t.Errorf("the object of the kill point is not in the cluster")
	}
	repairStart := time.Now()
	k.repairAfterTheKill(t)
	t.Logf("cancel, refresh and repair after the kill took %s", time.Since(repairStart).Round(100*time.Millisecond))
	// A Helm release killed while Helm installs it stays pending-install; the next up's
	// hook removes that record (components/helmrelease_records.go).
	k.leftPending = helmReleasePending(t, k.ctx, k.env)
	if kp.leavesHelmPending && len(k.leftPending) == 0 {
		t.Fatalf("the kill during the Helm install left no pending Helm record: the kill point was missed")
	}
	if len(k.leftPending) > 0 {
		t.Logf("the kill left Helm release records pending: %v", k.leftPending)
	}
}

// stateURNs is what the state holds now.
func (k *killedUpRun) stateURNs() map[string]bool {
	out := map[string]bool{}
	for _, r := range k.stack.export(k.ctx).Resources {
		out[r.URN] = true
	}
	return out
}

// upKilledAt runs an up and kills it with SIGKILL once the engine's events arm the kill
// point and its object has reached the cluster; it returns what it killed and the up's
// events.
func (k *killedUpRun) upKilledAt(t *testing.T, kp killPoint) ([]string, *eventLog) {
	uctx, cancel := context.WithTimeout(k.ctx, upTimeout)
	defer cancel()
	var (
		mu     sync.Mutex
		once   sync.Once
		log    = &eventLog{}
		killed = make(chan []string, 1)
	)
	_, upLog, err := k.stack.up(uctx, func(ev apitype.EngineEvent) {
		mu.Lock()
		log.events = append(log.events, ev)
		steps := log.steps()
		mu.Unlock()
		if !kp.arm(steps) {
			return
		}
		once.Do(func() {
			go func() {
				time.Sleep(kp.settle)
				for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && !kp.inCluster(uctx); time.Sleep(50 * time.Millisecond) {
				}
				mu.Lock()
				at := log.steps()
				mu.Unlock()
				what := k.stack.cli.killUp()
				if kp.afterKill != nil {
					kp.afterKill()
				}
				kp.landed(t, at)
				killed <- what
			}()
		})
	})
	select {
	case what := <-killed:
		return what, upLog
	case <-time.After(5 * time.Second):
		t.Fatalf("the up ended (err %v) without reaching the kill point\n%s", err, indent(upLog.diagnostics()))
		return nil, nil
	}
}

// repairAfterTheKill: `pulumi cancel` if the kill left the backend's lock, `pulumi
// refresh --clear-pending-creates` if it left pending creates, and nothing else.
func (k *killedUpRun) repairAfterTheKill(t *testing.T) {
	s := k.stack
	// A kill while the file backend writes the state's attribute sidecar (gocloud
	// fileblob setAttrs: create, then write) leaves it empty, and every command then
	// fails with "failed to load checkpoint: EOF". The test applies the repair
	// docs/operations.md gives, and reports it.
	_ = filepath.WalkDir(filepath.Join(s.stateDir, ".pulumi", "stacks"), func(path string, de os.DirEntry, err error) error {
		if info, ierr := os.Stat(path); err == nil && ierr == nil && !de.IsDir() && strings.HasSuffix(path, ".attrs") && info.Size() == 0 {
			t.Logf("MANUAL STEP (file backend): the kill left the empty attribute file %s; removing it", filepath.Base(path))
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	d := s.export(k.ctx)
	locks := s.locks()
	t.Logf("after the kill: %d resources in the state, pending operations:%s\nlock files: %v", len(d.Resources), indent(d.pending()), locks)
	if len(locks) > 0 {
		if err := s.stack.Cancel(k.ctx); err != nil {
			t.Fatalf("pulumi cancel: %v", err)
		}
		if left := s.locks(); len(left) > 0 {
			t.Fatalf("pulumi cancel left the lock: %v", left)
		}
		t.Logf("pulumi cancel removed the lock")
	}
	// The engine keeps pending creates across ups until they are resolved by hand
	// (pulumi/pkg backend/journal.go); the objects they may have created stay in the
	// cluster and the next up applies them again, under the program's field manager.
	if pending := d.pending(); len(pending) > 0 {
		if _, rlog, err := s.refresh(k.ctx, optrefresh.ClearPendingCreates()); err != nil {
			t.Fatalf("pulumi refresh --clear-pending-creates: %v\n%s", err, indent(rlog.diagnostics()))
		}
		if left := s.export(k.ctx).pending(); len(left) > 0 {
			t.Fatalf("pending operations left after pulumi refresh --clear-pending-creates:%s", indent(left))
		}
		t.Logf("pulumi refresh --clear-pending-creates cleared %d pending creates", len(pending))
	}
}

// upAfterTheKillsConverges: the up after the last kill converges with no replace or
// delete, no pending operation, no pending Helm record, every object once in the state
// and in the cluster, the hub Secret right, and a following up changes nothing.
func (k *killedUpRun) upAfterTheKillsConverges(t *testing.T) {
	ctx, s := k.ctx, k.stack
	uctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	start := time.Now()
	res, log, err := s.up(uctx, nil)
	if err != nil {
		t.Fatalf("the up after the kills failed: %v\n%s", err, indent(log.diagnostics()))
	}
	t.Logf("recovery: the up after the last kill converged in %s: %s", time.Since(start).Round(time.Second), changeCounts(summaryOf(res.Summary)))
	checkHelmRecordsRepaired(t, log, k.leftPending)
	if left := helmReleasePending(t, ctx, k.env); len(left) > 0 {
		t.Errorf("Helm release records still pending after the kills: %v", left)
	}
	for urn, ops := range log.opsByURN() {
		for _, op := range ops {
			if strings.Contains(op, "replace") || strings.Contains(op, "delete") {
				t.Errorf("%s: %s after the kills", shortURN(urn), op)
			}
		}
	}
	d := s.export(ctx)
	if pending := d.pending(); len(pending) > 0 {
		t.Errorf("pending operations left in the state:%s", indent(pending))
	}
	checkExactlyOnce(t, ctx, k.env, d)
	cred, err := readCredential(ctx, k.c, naming.KubeconfigName)
	if err != nil {
		t.Fatalf("the operator's kubeconfig Secret: %v", err)
	}
	checkHubSecret(t, ctx, k.env, k.plan, cred)
	// cert-manager ran without its own approver: the hub credential was issued on the
	// test's approval, given once kill 3 had landed.
	approved := k.approver.approvedRequests()
	if !slices.ContainsFunc(approved, func(r string) bool { return strings.HasPrefix(r, naming.NamespaceKcp+"/"+k.kubeconfigCert+"-") }) {
		t.Errorf("no request of %s was approved by the test's approver; it approved %v", k.kubeconfigCert, approved)
	}
	t.Logf("the test's approver approved %d certificate requests", len(approved))
	checkNoChanges(t, ctx, s, "post-kill")
}

// aSnapshotBringsKcpBack: disaster recovery, as docs/operations.md's runbook does it. The
// gke stack's snapshot job (its script and image) saves the kind stack's root-shard etcd
// to the bucket (fake-gcs-server); a second object is written after the snapshot; the
// writers stop, the etcd member and its volume are lost, the StatefulSet makes a fresh,
// empty one; cmd/etcdrestore's Job restores the snapshot into it; etcd and the operator
// start again. kcp then serves the first object in its Ready workspace, and the second
// is gone, as a restore to an earlier time must make it.
func aSnapshotBringsKcpBack(t *testing.T, l *lifecycle) {
	ctx, c, k := l.ctx, l.c, l.bins.kubectl
	run := func(args ...string) {
		t.Helper()
		if _, err := kubectl(ctx, k, c.kubeconfig, args...); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := planjobs.LoadGKE(filepath.Join(l.src.root, "Pulumi.gke.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := makeWorkspaceOnShard(ctx, l.env, restoreWorkspace, naming.RootShardName); err != nil {
		t.Fatal(err)
	}
	kept, err := writeKcpObject(ctx, l.env, restoreWorkspace, "written-before-the-snapshot", map[string]string{"when": "before"})
	if err != nil {
		t.Fatal(err)
	}

	fake, err := fakeGCS(ctx, l.src.root)
	if err != nil {
		t.Fatal(err)
	}
	gcs := gcsEmulator(t, c, fake)
	manifest, bucket, err := snapshotJobManifest(plan, gcs.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := gcs.CreateBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := runJob(ctx, c, k, manifest); err != nil {
		t.Fatal(err)
	}
	if err := waitJobs(ctx, l.env, k, "railgrid.io/e2e=snapshot", 5*time.Minute); err != nil {
		t.Fatalf("the gke stack's snapshot job against the kind stack's root etcd: %v", err)
	}
	objects, err := gcs.Objects(ctx, bucket, naming.RootShardName+"/")
	if err != nil || len(objects) != 1 {
		t.Fatalf("the bucket holds %v (%v), want one snapshot of the root shard", objects, err)
	}
	t.Logf("the gke stack's snapshot job saved gs://%s/%s in %s", bucket, objects[0], time.Since(start).Round(100*time.Millisecond))
	lost, err := writeKcpObject(ctx, l.env, restoreWorkspace, "written-after-the-snapshot", map[string]string{"when": "after"})
	if err != nil {
		t.Fatal(err)
	}

	// Runbook 2: stop the writers, the operator first.
	shard, kcpDeploy := naming.RootShardName, naming.RootShardDeployment(naming.RootShardName)
	sts, claim := naming.EtcdName(shard), naming.EtcdClaimName(shard, 0)
	run("-n", naming.NamespaceOperator, "scale", "deploy/"+naming.OperatorDeployment, "--replicas=0")
	run("-n", naming.NamespaceKcp, "scale", "deploy/"+kcpDeploy, "--replicas=0")
	run("-n", naming.NamespaceEtcd, "scale", "sts/"+sts, "--replicas=0")
	run("-n", naming.NamespaceOperator, "wait", "--for=delete", "pod", "-l", "app.kubernetes.io/name=kcp-operator", "--timeout=5m")
	run("-n", naming.NamespaceKcp, "wait", "--for=delete", "pod", "-l", naming.LabelComponent+"=rootshard,"+naming.LabelInstance+"="+shard, "--timeout=5m")
	run("-n", naming.NamespaceEtcd, "wait", "--for=delete", "pod", "-l", "app="+sts, "--timeout=5m")
	// The member's volume is lost.
	before := claimUID(ctx, c, claim)
	run("-n", naming.NamespaceEtcd, "delete", "pvc", claim, "--wait=true")
	// Runbook 3: the StatefulSet makes the claim again, on a new, empty volume.
	run("-n", naming.NamespaceEtcd, "scale", "sts/"+sts, "--replicas=1")
	run("-n", naming.NamespaceEtcd, "rollout", "status", "sts/"+sts, "--timeout=5m")
	run("-n", naming.NamespaceEtcd, "scale", "sts/"+sts, "--replicas=0")
	run("-n", naming.NamespaceEtcd, "wait", "--for=delete", "pod", "-l", "app="+sts, "--timeout=5m")
	if after := claimUID(ctx, c, claim); after == "" || after == before {
		t.Fatalf("claim %s was not made again (uid %q, was %q)", claim, after, before)
	}

	// Runbook 5: cmd/etcdrestore's Jobs, with gcloud pointed at the emulator.
	bin, err := l.etcdrestoreBin()
	if err != nil {
		t.Fatal(err)
	}
	restoreStart := time.Now()
	id := "e2e"
	args := []string{"-config", l.stack.cfgFile, "-shard", shard, "-bucket", bucket, "-id", id}
	for _, kv := range testenv.GCSEmulatorEnv(gcs.URL) {
		args = append(args, "-env", kv[0]+"="+kv[1])
	}
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		t.Fatalf("cmd/etcdrestore: %v", err)
	}
	if err := runJob(ctx, c, k, string(out)); err != nil {
		t.Fatal(err)
	}
	if err := waitJobs(ctx, l.env, k, "railgrid.io/etcd-restore="+id, 5*time.Minute); err != nil {
		t.Fatalf("the restore: %v", err)
	}
	t.Logf("cmd/etcdrestore's Job restored %s into the new claim in %s", objects[0], time.Since(restoreStart).Round(100*time.Millisecond))

	// Runbook 6 and 7: etcd, then the operator, which scales kcp back.
	run("-n", naming.NamespaceEtcd, "scale", "sts/"+sts, "--replicas=1")
	run("-n", naming.NamespaceEtcd, "rollout", "status", "sts/"+sts, "--timeout=5m")
	etcdReady := time.Now()
	members, err := kubectl(ctx, k, c.kubeconfig, "-n", naming.NamespaceEtcd, "exec", sts+"-0", "--", "/usr/local/bin/etcdctl", "member", "list", "-w", "table")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd after the restore:\n%s", members)
	run("-n", naming.NamespaceOperator, "scale", "deploy/"+naming.OperatorDeployment, "--replicas=1")
	var last string
	if err := testenv.WaitFor(ctx, 5*time.Minute, nil, func() (bool, error) {
		err := kept.readBack(ctx, l.env)
		if err == nil {
			var phase string
			if phase, err = workspacePhase(ctx, l.env, restoreWorkspace); err == nil && phase != "Ready" {
				err = fmt.Errorf("workspace root:%s is %s", restoreWorkspace, phase)
			}
		}
		if err != nil {
			last = err.Error()
		}
		return err == nil, nil
	}); err != nil {
		t.Fatalf("kcp does not serve %s after the restore: %v (last: %s)", kept, err, last)
	}
	t.Logf("kcp serves %s again in its Ready workspace, %s after etcd was Ready on the restored data (%s after the restore Job began, %s after the step began)",
		kept, time.Since(etcdReady).Round(time.Second), time.Since(restoreStart).Round(time.Second), time.Since(start).Round(time.Second))
	if err := goneFromKcp(ctx, l.env, lost); err != nil {
		t.Errorf("written after the snapshot, %v: the restore did not go back to the snapshot's time", err)
	} else {
		t.Logf("%s, written after the snapshot, is gone, as a restore to the snapshot's time must leave it", lost)
	}
	if l.durable != nil {
		if err := l.durable.readBack(ctx, l.env); err != nil {
			t.Errorf("the object on alpha (not restored): %v", err)
		}
	}
}
