package e2e

import (
	"context"
	"fmt"
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
	"github.com/railgrid/railgrid-kcp/tests/internal/testenv"
)

// killUp kills the running `pulumi up` as a CI runner or a closed laptop does: SIGKILL
// to the CLI, its process group and every process below it (the CLI starts its plugins
// in process groups of their own). It returns what it killed.
func (c *pulumiCLI) killUp() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var killed []string
	for cmd := range c.running {
		if cmd.Process == nil || !containsArg(cmd.Args, "up") {
			continue
		}
		for _, pid := range append([]int{cmd.Process.Pid}, testenv.Descendants(cmd.Process.Pid)...) {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			killed = append(killed, fmt.Sprintf("%d %s", pid, strings.TrimSpace(string(comm))))
		}
		testenv.KillTree(cmd)
	}
	return killed
}

// killPoint is where a killed up is killed: once arm has seen the events it waits for
// and inCluster reports the object it is about, the test kills the up.
type killPoint struct {
	name      string
	arm       func(steps map[string]*step) bool // the engine is where the kill should land
	inCluster func(ctx context.Context) bool    // the object being created has reached the API server
	// settle is how long to wait once armed: past the CLI's first state write, where a
	// kill can leave the file backend's state unreadable (docs/operations.md).
	settle time.Duration
	landed func(t *testing.T, steps map[string]*step)
	// leavesHelmPending: the kill lands while Helm installs, so it must leave Helm's
	// record pending.
	leavesHelmPending bool
}

// locks lists the file backend's lock files of the stack.
func (s *e2eStack) locks() []string {
	var out []string
	_ = filepath.WalkDir(filepath.Join(s.stateDir, ".pulumi", "locks"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, strings.TrimPrefix(path, s.stateDir+string(filepath.Separator)))
		}
		return nil
	})
	return out
}

// killedUp: an up killed with SIGKILL at four points, in the order the program creates
// them, one after the other on one cluster, each resumed by the next up, converges on the
// last up with nothing deleted by hand and no data holder replaced:
//  0. while Helm installs the kcp-operator's release (its record is pending-install: the
//     operator's simulated pod becomes Ready only after kcpPodReadyDelay); the resumed up
//     must log that the program's hook removed that record, and install the release;
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
	e := newEnv(t, ctx, bins, src, envOptions{externalApprover: true})
	s, p := e.stack, e.plan
	if missing, err := missingProjectConfig(filepath.Join(src.root, "Pulumi.yaml"), s.cfgFile); err != nil || len(missing) > 0 {
		if err := s.dropProjectConfig(missing); err != nil {
			t.Fatal(err)
		}
	}
	routes := []string{p.urnOf("TLSRoute", "kcp-root"), p.urnOf("TLSRoute", "kcp-alpha"), p.urnOf("TLSRoute", "kcp-frontproxy")}
	etcds := []string{p.urnOf("StatefulSet", "etcd-root"), p.urnOf("StatefulSet", "etcd-alpha")}
	kubeconfig := p.urnOf("Kubeconfig", naming.KubeconfigName)
	// The operator's Certificate for the Kubeconfig (kcp-operator sdk/apis/operator/
	// v1alpha1 kubeconfig_types.go: "kubeconfig-cert-%s").
	kubeconfigCert := "kubeconfig-cert-" + naming.KubeconfigName
	release := p.releaseURN()
	for _, u := range append(append(append([]string{}, routes...), etcds...), kubeconfig, release) {
		if u == "" {
			t.Fatalf("the plan lacks an object of a kill point (routes %v, etcd %v, kubeconfig %q)", routes, etcds, kubeconfig)
		}
	}
	started := func(st map[string]*step, urn string) bool {
		return st[urn] != nil && st[urn].pre > 0 && st[urn].op == "create"
	}
	finished := func(st map[string]*step, urn string) bool { return st[urn] != nil && st[urn].out > 0 }
	exists := func(gvr schema.GroupVersionResource, ns string, names ...string) func(context.Context) bool {
		return func(ctx context.Context) bool {
			for _, n := range names {
				if _, err := e.c.dyn.Resource(gvr).Namespace(ns).Get(ctx, n, metav1.GetOptions{}); err != nil {
					return false
				}
			}
			return true
		}
	}
	tlsRouteGVR := schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "tlsroutes"}
	// before is what the state held when the current up started.
	var before map[string]bool
	inState := func() map[string]bool {
		out := map[string]bool{}
		for _, r := range s.export(ctx).Resources {
			out[r.URN] = true
		}
		return out
	}

	e.volumes.paused.Store(true) // etcd claims stay Pending until kill 1 has landed
	points := []killPoint{{
		name: "0-while-helm-installs-the-operator",
		arm:  func(st map[string]*step) bool { return started(st, release) },
		inCluster: func(ctx context.Context) bool {
			records, err := pendingHelmRecords(ctx, e)
			return err == nil && len(records) > 0
		},
		settle: time.Second,
		landed: func(t *testing.T, st map[string]*step) {
			if finished(st, release) {
				t.Errorf("kill 0: the Helm release's create had finished")
			}
		},
		leavesHelmPending: true,
	}, {
		name: "1-while-the-etcd-statefulsets-are-created",
		// Not while the Helm release is being installed: that is kill 0's point.
		arm: func(st map[string]*step) bool {
			return (finished(st, release) || before[release]) && started(st, etcds[0]) && started(st, etcds[1])
		},
		inCluster: exists(statefulSetGVR, naming.NamespaceEtcd, "etcd-root", "etcd-alpha"),
		// The provider then awaits the rollout, which the held claims keep from ending.
		settle: 5 * time.Second,
		landed: func(t *testing.T, st map[string]*step) {
			for _, u := range etcds {
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
		name:      "2-while-the-edge-routes-are-created",
		arm:       func(st map[string]*step) bool { return started(st, routes[0]) },
		inCluster: exists(tlsRouteGVR, naming.NamespaceKcp, "kcp-root"),
		landed: func(t *testing.T, st map[string]*step) {
			for _, u := range etcds {
				if !finished(st, u) && !before[u] {
					t.Errorf("kill 2: the resumed up did not finish %s of kill 1", shortURN(u))
				}
			}
			if finished(st, kubeconfig) {
				t.Errorf("kill 2: the Kubeconfig's create had finished, so kill 3 cannot land")
			}
			for _, u := range routes {
				t.Logf("kill 2 landed: %s create started %v, finished %v", shortURN(u), started(st, u), finished(st, u))
			}
		},
	}, {
		name:      "3-while-the-kubeconfig-is-awaited",
		arm:       func(st map[string]*step) bool { return started(st, kubeconfig) },
		inCluster: exists(kubeconfigGVR, naming.NamespaceKcp, naming.KubeconfigName),
		landed: func(t *testing.T, st map[string]*step) {
			if finished(st, kubeconfig) {
				t.Errorf("kill 3: the Kubeconfig's create had finished")
			}
			// The route of kill 2 and the Kubeconfig start together in this up; whichever up
			// re-creates the route (this one or the last), a field conflict fails it.
			t.Logf("kill 3 landed: %s re-created by this up: %v", shortURN(routes[0]), finished(st, routes[0]))
		},
	}}

	// leftPending is the Helm records the previous kill left pending: the next up's
	// hook must remove them before Helm installs the release again.
	var leftPending []string
	for i, kp := range points {
		ok := t.Run(kp.name, func(t *testing.T) {
			if i == 2 {
				e.volumes.paused.Store(false) // kill 1 has landed: etcd may finish now
				e.approver.hold(kubeconfigCert)
			}
			uctx, cancel := context.WithTimeout(ctx, upTimeout)
			defer cancel()
			before = inState()
			var (
				mu     sync.Mutex
				once   sync.Once
				log    = &eventLog{}
				killed = make(chan []string, 1)
			)
			start := time.Now()
			_, upLog, err := s.up(uctx, func(ev apitype.EngineEvent) {
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
						what := s.cli.killUp()
						if i == 3 {
							e.approver.release() // kill 3 has landed: the Kubeconfig may finish now
						}
						kp.landed(t, at)
						killed <- what
					}()
				})
			})
			var what []string
			select {
			case what = <-killed:
			case <-time.After(5 * time.Second):
				t.Fatalf("the up ended (err %v) without reaching the kill point\n%s", err, indent(upLog.diagnostics()))
			}
			t.Logf("killed with SIGKILL after %s: %s", time.Since(start).Round(time.Second), strings.Join(what, ", "))
			checkHelmRecordsRepaired(t, upLog, leftPending)
			if !kp.inCluster(ctx) {
				t.Errorf("the object of the kill point is not in the cluster")
			}
			repairStart := time.Now()
			defer func() {
				t.Logf("cancel, refresh and repair after the kill took %s", time.Since(repairStart).Round(100*time.Millisecond))
			}()
			// A kill while the file backend writes the state's attribute sidecar
			// (gocloud fileblob setAttrs: create, then write) leaves it empty, and every
			// command then fails with "failed to load checkpoint: EOF". The test applies
			// the repair docs/operations.md gives, and reports it.
			_ = filepath.WalkDir(filepath.Join(s.stateDir, ".pulumi", "stacks"), func(path string, de os.DirEntry, err error) error {
				if info, ierr := os.Stat(path); err == nil && ierr == nil && !de.IsDir() && strings.HasSuffix(path, ".attrs") && info.Size() == 0 {
					t.Logf("MANUAL STEP (file backend): the kill left the empty attribute file %s; removing it", filepath.Base(path))
					if err := os.Remove(path); err != nil {
						t.Fatal(err)
					}
				}
				return nil
			})
			d := s.export(ctx)
			locks := s.locks()
			t.Logf("after the kill: %d resources in the state, pending operations:%s\nlock files: %v", len(d.Resources), indent(d.pending()), locks)
			if len(locks) > 0 {
				if err := s.stack.Cancel(ctx); err != nil {
					t.Fatalf("pulumi cancel: %v", err)
				}
				if left := s.locks(); len(left) > 0 {
					t.Fatalf("pulumi cancel left the lock: %v", left)
				}
				t.Logf("pulumi cancel removed the lock")
			}
			// The engine keeps pending creates across ups until they are resolved by
			// hand (pulumi/pkg backend/journal.go); the objects they may have created
			// stay in the cluster and the next up applies them again, under the
			// program's field manager.
			if pending := d.pending(); len(pending) > 0 {
				if _, rlog, err := s.refresh(ctx, optrefresh.ClearPendingCreates()); err != nil {
					t.Fatalf("pulumi refresh --clear-pending-creates: %v\n%s", err, indent(rlog.diagnostics()))
				}
				if left := s.export(ctx).pending(); len(left) > 0 {
					t.Fatalf("pending operations left after pulumi refresh --clear-pending-creates:%s", indent(left))
				}
				t.Logf("pulumi refresh --clear-pending-creates cleared %d pending creates", len(pending))
			}
			// A Helm release killed while Helm installs it stays pending-install; the
			// next up's hook removes that record (components/helmrelease_records.go).
			leftPending = helmReleasePending(t, ctx, e)
			if kp.leavesHelmPending && len(leftPending) == 0 {
				t.Fatalf("the kill during the Helm install left no pending Helm record: the kill point was missed")
			}
			if len(leftPending) > 0 {
				t.Logf("the kill left Helm release records pending: %v", leftPending)
			}
		})
		if !ok {
			return
		}
	}

	t.Run("4-up-after-the-kills-converges", func(t *testing.T) {
		uctx, cancel := context.WithTimeout(ctx, upTimeout)
		defer cancel()
		start := time.Now()
		res, log, err := s.up(uctx, nil)
		if err != nil {
			t.Fatalf("the up after the kills failed: %v\n%s", err, indent(log.diagnostics()))
		}
		t.Logf("recovery: the up after the last kill converged in %s: %s", time.Since(start).Round(time.Second), changeCounts(summaryOf(res.Summary)))
		checkHelmRecordsRepaired(t, log, leftPending)
		if left := helmReleasePending(t, ctx, e); len(left) > 0 {
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
		checkExactlyOnce(t, ctx, e, d)
		cred, err := readCredential(ctx, e.c, naming.KubeconfigName)
		if err != nil {
			t.Fatalf("the operator's kubeconfig Secret: %v", err)
		}
		checkHubSecret(t, ctx, e, p, cred)
		// cert-manager ran without its own approver: the hub credential was issued on
		// the test's approval, given once kill 3 had landed.
		approved := e.approver.approvedRequests()
		if !slices.ContainsFunc(approved, func(r string) bool { return strings.HasPrefix(r, naming.NamespaceKcp+"/"+kubeconfigCert+"-") }) {
			t.Errorf("no request of %s was approved by the test's approver; it approved %v", kubeconfigCert, approved)
		}
		t.Logf("the test's approver approved %d certificate requests", len(approved))
		checkNoChanges(t, ctx, s, "post-kill")
	})
}

// checkHelmRecordsRepaired checks that the up logged the program's hook removing each
// record the kill before it left pending, and that the up got past the release.
func checkHelmRecordsRepaired(t *testing.T, log *eventLog, records []string) {
	t.Helper()
	if len(records) == 0 {
		return
	}
	warnings := strings.Join(log.diagnostics(), "\n")
	for _, r := range records {
		if !strings.Contains(warnings, r+" (pending-install)") {
			t.Errorf("the up after the kill did not log that its hook removed the pending Helm record %s; its warnings:\n%s", r, indent(log.diagnostics()))
		}
	}
}

// helmReleasePending returns the kcp-operator's Helm release records (Secrets of Helm's
// storage driver) whose status label is pending-install or pending-upgrade.
func helmReleasePending(t *testing.T, ctx context.Context, e *env) []string {
	t.Helper()
	records, err := pendingHelmRecords(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	return records
}

func pendingHelmRecords(ctx context.Context, e *env) ([]string, error) {
	list, err := e.c.kube.CoreV1().Secrets(naming.NamespaceOperator).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + naming.OperatorReleaseName})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sec := range list.Items {
		if st := sec.Labels["status"]; st == "pending-install" || st == "pending-upgrade" {
			out = append(out, sec.Name)
		}
	}
	return out, nil
}
