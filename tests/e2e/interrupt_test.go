package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/components"
	"github.com/railgrid/railgrid-kcp/config"
)

// interruptedUp: an up interrupted once the root shard has been created (while the
// engine waits for it to become Available), then run again, converges with no
// duplicate or orphaned object. First with Ctrl-C (the CLI cancels gracefully and
// records the root shard with the interrupted wait as its init error; the operator runs
// up again), then, after a destroy, with kill -9 (a CI runner that dies), which leaves
// the stack locked and the create pending; the operator runs pulumi cancel, refresh
// --import-pending-creates and up.
func interruptedUp(t *testing.T, ctx context.Context, bins binaries, root, crds string) {
	// The stand-in holds the root shard Provisioning for a while after its
	// dependencies are ready, as the real operator does while it issues certificates,
	// so the interrupt lands while the engine waits for it.
	e := newEnv(t, ctx, bins, root, crds, 8*time.Second)
	s := e.stack
	if missing, err := missingProjectConfig(filepath.Join(root, "Pulumi.yaml"), s.cfgFile); err != nil || len(missing) > 0 {
		// Reported by lifecycle/0-cli-accepts-project-config.
		t.Logf("working around Pulumi.yaml: dropping the declarations of %v (%v)", missing, err)
		if err := s.dropProjectConfig(missing); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("ctrl-c", func(t *testing.T) { interruptAndRecover(t, ctx, e, false) })
	dctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	if _, log, err := s.destroy(dctx); err != nil {
		t.Fatalf("destroy between the two interrupts failed: %v\n%s", err, indent(log.diagnostics()))
	}
	t.Run("kill-9", func(t *testing.T) { interruptAndRecover(t, ctx, e, true) })
}

func interruptAndRecover(t *testing.T, ctx context.Context, e *env, kill bool) {
	s, p := e.stack, e.plan
	rootURN := p.urnOf("RootShard", config.RootShardName)
	mintsBefore := len(e.operator.Mints())

	uctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	var once sync.Once
	interrupted := make(chan string, 1)
	how := "Ctrl-C (SIGINT)"
	if kill {
		how = "kill -9 of the CLI and its plugins"
	}
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
				if kill {
					s.cli.killAll()
				} else {
					cancel()
				}
			}()
		})
	})
	select {
	case at := <-interrupted:
		t.Logf("interrupted the up with %s at %s, once the RootShard existed and the engine waited for it", how, at)
	default:
		t.Fatalf("the up never started creating the RootShard (err %v)\n%s", err, indent(log.diagnostics()))
	}
	if err == nil {
		t.Fatalf("the interrupted up reported success")
	}
	t.Logf("the interrupted up ended with: %v", firstLine(err.Error()))

	// A killed CLI leaves the stack locked: `pulumi cancel` releases it.
	if kill {
		if err := s.stack.Cancel(ctx); err != nil {
			t.Logf("pulumi cancel: %v", firstLine(stderrOf(err)))
		}
	}
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
	violationsBefore := len(e.operator.Violations())

	if kill {
		// Pending creates of objects that exist are imported with their IDs, the others
		// dropped: pulumi refresh --import-pending-creates / --clear-pending-creates.
		var imports []optrefresh.PendingCreate
		for _, op := range d.PendingOperations {
			if op.Type != "creating" {
				continue
			}
			if id, ok := liveID(ctx, e.c, op.Resource.Type, op.Resource.Inputs); ok {
				imports = append(imports, optrefresh.PendingCreate{URN: op.Resource.URN, ID: id})
			}
		}
		var ropts []optrefresh.Option
		if len(imports) > 0 {
			ropts = append(ropts, optrefresh.ImportPendingCreates(imports))
			t.Logf("refresh imports the pending creates %v", imports)
		}
		if len(d.PendingOperations) > len(imports) {
			ropts = append(ropts, optrefresh.ClearPendingCreates())
		}
		rctx, rcancel := context.WithTimeout(ctx, upTimeout)
		defer rcancel()
		rres, rlog, err := s.refresh(rctx, ropts...)
		if err != nil {
			t.Fatalf("refresh after the interrupt failed: %v\n%s", err, indent(rlog.diagnostics()))
		}
		t.Logf("refresh: %s", changeCounts(summaryOf(rres.Summary)))
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
	if v := e.operator.Violations()[violationsBefore:]; len(v) > 0 {
		if kill {
			// The import reads the root shard without waiting for Available, so the up
			// that follows may create what needs it before it is ready (the real operator
			// waits for the root shard by itself).
			t.Logf("NOTE: after refresh --import-pending-creates the up did not wait for the root shard again:%s", indent(v))
		} else {
			t.Errorf("after the interrupt the up did not wait again for what the kcp objects need:%s", indent(v))
		}
	}
	mints := e.operator.Mints()
	if n := len(mints) - mintsBefore; n != 1 {
		t.Errorf("the operator minted %d hub credentials, want 1", n)
	}
	if len(mints) > 0 {
		checkHubSecret(t, ctx, e, p, mints[len(mints)-1])
	}
	checkNoChanges(t, ctx, s, "post-interrupt")
}

// liveID returns the provider ID ("<namespace>/<name>" or "<name>") of the object a
// pending create was creating, if it exists in the cluster.
func liveID(ctx context.Context, c *cluster, typ string, inputs map[string]any) (string, bool) {
	parts := strings.Split(typ, ":")
	md, _ := inputs["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	if len(parts) != 3 || parts[0] != "kubernetes" || name == "" {
		return "", false
	}
	apiVersion := parts[1]
	if strings.HasPrefix(apiVersion, "core/") {
		apiVersion = strings.TrimPrefix(apiVersion, "core/")
	}
	mapper, err := newMapper(c)
	if err != nil {
		return "", false
	}
	obj, err := liveObject(ctx, c, mapper, map[string]any{"apiVersion": apiVersion, "kind": parts[2], "metadata": map[string]any{"name": name, "namespace": ns}})
	if err != nil || obj == nil {
		return "", false
	}
	if ns != "" {
		return ns + "/" + name, true
	}
	return name, true
}
