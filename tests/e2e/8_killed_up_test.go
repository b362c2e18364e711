//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/railgrid/railgrid-kcp/naming"
)

// Stage 8, killed-up, the second machine's first stage, on a cluster whose cert-manager is
// the test's (envOptions.externalApprover). An up killed with SIGKILL at four
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
func beginKilledUp(t *testing.T, l *lifecycle) {
	l.killed = newKilledUpRun(t, l)
	// Whichever step the stage ends at, the next stage's up must not wait on a held claim
	// or certificate.
	t.Cleanup(func() {
		l.volumes.paused.Store(false)
		l.approver.release()
	})
}

// killedUpSteps are a step per kill point, in order, each required (the next kill is
// armed by what the resumed up of this one does), then the last up.
func killedUpSteps(l *lifecycle) []step {
	var steps []step
	for i, kp := range l.killed.killPoints() {
		steps = append(steps, step{kp.name, func(t *testing.T, l *lifecycle) { l.killed.killAndRepair(t, i, kp) }, true})
	}
	return append(steps, step{"4-up-after-the-kills-converges", func(t *testing.T, l *lifecycle) { l.killed.upAfterTheKillsConverges(t) }, false})
}

// killedUpRun is what killed-up's kills share, on a cluster whose env has the test's
// request approver.
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

func newKilledUpRun(t *testing.T, l *lifecycle) *killedUpRun {
	e := l.env
	if e.approver == nil {
		t.Fatal("killed-up needs the test's request approver (envOptions.externalApprover)")
	}
	if missing, err := missingProjectConfig(filepath.Join(l.src.root, "Pulumi.yaml"), e.stack.cfgFile); err != nil || len(missing) > 0 {
		if err := e.stack.dropProjectConfig(missing); err != nil {
			t.Fatal(err)
		}
	}
	p := e.plan
	k := &killedUpRun{env: e, ctx: l.ctx,
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
