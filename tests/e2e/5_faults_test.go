//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Stage 5, faults: what goes wrong on a running stack, and what the platform loses
// (nothing): two ups at once, killed pods, the kubelet and containerd restarted.
var faultSteps = []step{
	{"two-ups-at-once", twoUpsAtOnce, false},
	{"killed-pods-lose-nothing", killedPodsLoseNothing, false},
	{"kubelet-and-containerd-restart", kubeletAndContainerdRestart, false},
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
	// No process to watch: the node's supervisor starts the kubelet again if it exits,
	// as its unit does (testenv/kubeletservice.go).
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
