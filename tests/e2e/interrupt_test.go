package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/naming"
)

// interruptedUp: an up interrupted with Ctrl-C once the root shard has been created
// (while the engine waits for it to become Available), then run again, converges with
// no duplicate or orphaned object. The CLI cancels gracefully: it records the root shard
// with the interrupted wait as its init error, so the next up waits for it again before
// it creates what needs it. The window is real: the operator has certificates issued by
// cert-manager before it creates root-kcp, and kcp takes seconds to start on the real
// node. It runs as lifecycle's up after destroy, which creates the root shard again (the
// stack is empty; only what destroy keeps is in the cluster), so it needs no cluster of
// its own.
func interruptedUp(t *testing.T, ctx context.Context, e *env) {
	// The plan of the stack's config as it is now: the re-mints raised
	// hub.remintGeneration, which names the Kubeconfig.
	cur := *e
	cur.plan = e.stack.render()
	e = &cur
	s, p := e.stack, e.plan
	rootURN, shardURN := p.urnOf("RootShard", naming.RootShardName), p.urnOf("Shard", "alpha")

	uctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	var once sync.Once
	// where is what the engine's events showed at the moment of the interrupt.
	type where struct {
		at                       string
		rootStarted, rootDone    bool
		shardStarted, rootExists bool
	}
	var mu sync.Mutex
	seen := where{}
	interrupted := make(chan where, 1)
	_, log, err := s.up(uctx, func(ev apitype.EngineEvent) {
		mu.Lock()
		if pre := ev.ResourcePreEvent; pre != nil {
			seen.rootStarted = seen.rootStarted || pre.Metadata.URN == rootURN
			seen.shardStarted = seen.shardStarted || pre.Metadata.URN == shardURN
		}
		if out := ev.ResOutputsEvent; out != nil && out.Metadata.URN == rootURN {
			seen.rootDone = true
		}
		mu.Unlock()
		pre := ev.ResourcePreEvent
		if pre == nil || pre.Metadata.URN != rootURN || pre.Metadata.Op != apitype.OpCreate {
			return
		}
		once.Do(func() {
			go func() {
				// Interrupt once the RootShard exists in the cluster: its create has
				// reached the API server and the engine waits for Available.
				exists := false
				for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && uctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
					if _, err := e.c.dyn.Resource(rootShardGVR).Namespace(naming.NamespaceKcp).Get(uctx, naming.RootShardName, metav1.GetOptions{}); err == nil {
						exists = true
						break
					}
				}
				mu.Lock()
				w := seen
				mu.Unlock()
				w.at, w.rootExists = time.Now().Format("15:04:05.000"), exists
				interrupted <- w
				cancel() // the Automation API sends the CLI SIGINT, as Ctrl-C does
			}()
		})
	})
	select {
	case w := <-interrupted:
		t.Logf("interrupted the up with Ctrl-C (SIGINT) at %s: RootShard in the cluster %v, its create started %v and finished %v, Shard create started %v",
			w.at, w.rootExists, w.rootStarted, w.rootDone, w.shardStarted)
		// Where it was interrupted: the RootShard existed and the engine was still
		// waiting for it, so nothing that needs it had started.
		if !w.rootExists || !w.rootStarted || w.rootDone || w.shardStarted {
			t.Errorf("the interrupt did not land while the engine waited for the RootShard")
		}
	default:
		t.Fatalf("the up never started creating the RootShard (err %v)\n%s", err, indent(log.diagnostics()))
	}
	d := s.export(ctx)
	inState, initErrors := false, []string(nil)
	for _, r := range d.Resources {
		if r.URN == rootURN {
			inState, initErrors = true, r.InitErrors
		}
	}
	_, getErr := e.c.dyn.Resource(rootShardGVR).Namespace(naming.NamespaceKcp).Get(ctx, naming.RootShardName, metav1.GetOptions{})
	t.Logf("after the interrupt: %d resources in the state (the RootShard: %v, init errors %q), the RootShard in the cluster: %v, pending operations: %v",
		len(d.Resources), inState, initErrors, getErr == nil, d.pending())
	if getErr == nil && !inState && len(d.pending()) == 0 {
		t.Errorf("the RootShard exists in the cluster but neither in the state nor as a pending operation")
	}

	u2ctx, u2cancel := context.WithTimeout(ctx, upTimeout)
	defer u2cancel()
	res, log2, err := s.up(u2ctx, nil)
	if err != nil {
		t.Fatalf("the up after the interrupt failed: %v\n%s", err, indent(log2.diagnostics()))
	}
	t.Logf("up after the interrupt: %s", changeCounts(summaryOf(res.Summary)))

	d = s.export(ctx)
	if pending := d.pending(); len(pending) > 0 {
		t.Errorf("pending operations left in the state:%s", indent(pending))
	}
	checkExactlyOnce(t, ctx, e, d)
	checkOrder(t, p, log2)
	cred, err := readCredential(ctx, e.c, naming.KubeconfigObjectName(p.cfg.Hub.RemintGeneration))
	if err != nil {
		t.Fatalf("the operator's kubeconfig Secret: %v", err)
	}
	checkHubSecret(t, ctx, e, p, cred)
	checkNoChanges(t, ctx, s, "post-interrupt")
}
