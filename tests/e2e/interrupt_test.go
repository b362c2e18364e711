package e2e

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/components"
	"github.com/railgrid/railgrid-kcp/config"
)

// interruptedUp: an up interrupted with Ctrl-C once the root shard has been created
// (while the engine waits for it to become Available), then run again, converges with
// no duplicate or orphaned object. The CLI cancels gracefully: it records the root shard
// with the interrupted wait as its init error, so the next up waits for it again before
// it creates what needs it.
func interruptedUp(t *testing.T, ctx context.Context, bins binaries, root, crds string) {
	// The stand-in holds the root shard Provisioning for a while after its
	// dependencies are ready, as the real operator does while it issues certificates,
	// so the interrupt lands while the engine waits for it.
	e := newEnv(t, ctx, bins, root, crds, 8*time.Second)
	s, p := e.stack, e.plan
	if missing, err := missingProjectConfig(filepath.Join(root, "Pulumi.yaml"), s.cfgFile); err != nil || len(missing) > 0 {
		// Reported by lifecycle/0-cli-accepts-project-config.
		t.Logf("working around Pulumi.yaml: dropping the declarations of %v (%v)", missing, err)
		if err := s.dropProjectConfig(missing); err != nil {
			t.Fatal(err)
		}
	}
	rootURN := p.urnOf("RootShard", config.RootShardName)

	uctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	var once sync.Once
	interrupted := make(chan string, 1)
	_, log, err := s.up(uctx, func(ev apitype.EngineEvent) {
		pre := ev.ResourcePreEvent
		if pre == nil || pre.Metadata.URN != rootURN || pre.Metadata.Op != apitype.OpCreate {
			return
		}
		once.Do(func() {
			go func() {
				// Interrupt once the RootShard exists in the cluster: its create has
				// reached the API server and the engine waits for Available.
				for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && uctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
					if _, err := e.c.dyn.Resource(rootShardGVR).Namespace(components.NamespaceKcp).Get(uctx, config.RootShardName, metav1.GetOptions{}); err == nil {
						break
					}
				}
				interrupted <- time.Now().Format("15:04:05.000")
				cancel() // the Automation API sends the CLI SIGINT, as Ctrl-C does
			}()
		})
	})
	select {
	case at := <-interrupted:
		t.Logf("interrupted the up with Ctrl-C (SIGINT) at %s, once the RootShard existed and the engine waited for it", at)
	default:
		t.Fatalf("the up never started creating the RootShard (err %v)\n%s", err, indent(log.diagnostics()))
	}
	if err == nil {
		t.Fatalf("the interrupted up reported success")
	}
	t.Logf("the interrupted up ended with: %v", firstLine(err.Error()))

	d := s.export(ctx)
	inState, initErrors := false, []string(nil)
	for _, r := range d.Resources {
		if r.URN == rootURN {
			inState, initErrors = true, r.InitErrors
		}
	}
	_, getErr := e.c.dyn.Resource(rootShardGVR).Namespace(components.NamespaceKcp).Get(ctx, config.RootShardName, metav1.GetOptions{})
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
	if v := e.operator.Violations(); len(v) > 0 {
		t.Errorf("after the interrupt the up did not wait again for what the kcp objects need:%s", indent(v))
	}
	mints := e.operator.Mints()
	if len(mints) != 1 {
		t.Errorf("the operator minted %d hub credentials, want 1", len(mints))
	}
	if len(mints) > 0 {
		checkHubSecret(t, ctx, e, p, mints[len(mints)-1])
	}
	checkNoChanges(t, ctx, s, "post-interrupt")
}
