//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// upgradeOrder watches a kcp version bump from both sides. From the cluster's: when root-kcp
// and root-proxy had rolled out the new image with every replica Ready, and when the
// Shard and the FrontProxy first carried the new image. From the engine's: what the root
// shard's Deployments were when the engine finished the RootShard's update and when it
// began the Shard's and the FrontProxy's.
type upgradeOrder struct {
	mu                      sync.Mutex
	rootReady, shard, proxy time.Time
	// engine holds, per event seen ("RootShard update finished", "Shard update began",
	// ...), what was still rolling on the root shard then ("" when nothing was).
	engine map[string]string
}

// rootShardRollout says what of root-kcp and root-proxy has not rolled out image yet
// ("" once both have): the test's own reading of the Deployments, independent of the
// program's.
func rootShardRollout(ctx context.Context, c *cluster, image string) string {
	var pending []string
	for _, name := range []string{naming.RootShardDeployment(naming.RootShardName), naming.RootShardName + "-proxy"} {
		if p := deploymentRollout(ctx, c, name, image); p != "" {
			pending = append(pending, p)
		}
	}
	return strings.Join(pending, "; ")
}

// deploymentRollout says how far one kcp Deployment is from having rolled out image.
func deploymentRollout(ctx context.Context, c *cluster, name, image string) string {
	d, err := c.kube.AppsV1().Deployments(naming.NamespaceKcp).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err != nil:
		return fmt.Sprintf("%s: %v", name, err)
	case d.Spec.Template.Spec.Containers[0].Image != image:
		return fmt.Sprintf("%s runs %s", name, d.Spec.Template.Spec.Containers[0].Image)
	case !deploymentReady(d.Generation, d.Status, d.Spec.Replicas):
		return fmt.Sprintf("%s: generation %d (observed %d), %d updated, %d ready, %d available, %d in all", name,
			d.Generation, d.Status.ObservedGeneration, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.Replicas)
	}
	return ""
}

func watchUpgradeOrder(ctx context.Context, c *cluster, version string) (*upgradeOrder, func()) {
	o := &upgradeOrder{engine: map[string]string{}}
	want := "ghcr.io/kcp-dev/kcp:" + version
	carries := func(ctx context.Context, gvr schema.GroupVersionResource, name string) bool {
		obj, err := c.dyn.Resource(gvr).Namespace(naming.NamespaceKcp).Get(ctx, name, metav1.GetOptions{})
		return err == nil && imageOf(obj.Object, "spec", "image") == want
	}
	stopPolling := poll(ctx, 100*time.Millisecond, func(ctx context.Context) {
		now := time.Now()
		// The Shard and the FrontProxy are read before the root shard: once they carry the
		// new image, a root shard that had rolled out before is seen so in the same round.
		shard, proxy := carries(ctx, shardGVR, "alpha"), carries(ctx, frontProxyGVR, naming.FrontProxyName)
		rootReady := rootShardRollout(ctx, c, want) == ""
		o.mu.Lock()
		for _, x := range []struct {
			ok bool
			at *time.Time
		}{{rootReady, &o.rootReady}, {shard, &o.shard}, {proxy, &o.proxy}} {
			if x.ok && x.at.IsZero() {
				*x.at = now
			}
		}
		o.mu.Unlock()
	})
	return o, stopPolling
}

// onEngineEvent reads the root shard's Deployments when the engine finishes the
// RootShard's update and when it begins the Shard's or the FrontProxy's (the event
// callback runs as the event arrives, after the engine emitted it).
func (o *upgradeOrder) onEngineEvent(ctx context.Context, c *cluster, p rendered, version string) func(apitype.EngineEvent) {
	want := "ghcr.io/kcp-dev/kcp:" + version
	labels := map[string]string{
		p.urnOf("RootShard", naming.RootShardName):   "RootShard",
		p.urnOf("Shard", "alpha"):                    "Shard",
		p.urnOf("FrontProxy", naming.FrontProxyName): "FrontProxy",
	}
	return func(e apitype.EngineEvent) {
		var what string
		switch {
		case e.ResOutputsEvent != nil && labels[e.ResOutputsEvent.Metadata.URN] == "RootShard" && e.ResOutputsEvent.Metadata.Op == apitype.OpUpdate:
			what = "RootShard update finished"
		case e.ResourcePreEvent != nil && labels[e.ResourcePreEvent.Metadata.URN] != "" && labels[e.ResourcePreEvent.Metadata.URN] != "RootShard" &&
			e.ResourcePreEvent.Metadata.Op == apitype.OpUpdate:
			what = labels[e.ResourcePreEvent.Metadata.URN] + " update began"
		default:
			return
		}
		pending := rootShardRollout(ctx, c, want)
		o.mu.Lock()
		if _, seen := o.engine[what]; !seen {
			o.engine[what] = pending
		}
		o.mu.Unlock()
	}
}

// check fails unless the root shard had rolled out before the engine finished its update
// and before anything that depends on it was updated, as the cluster and the engine saw it.
func (o *upgradeOrder) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, what := range []string{"RootShard update finished", "Shard update began", "FrontProxy update began"} {
		pending, seen := o.engine[what]
		switch {
		case !seen:
			t.Errorf("upgrade order: no engine event %q in the version bump", what)
		case pending != "":
			t.Errorf("upgrade order: %s while the root shard was still rolling out: %s", what, pending)
		default:
			t.Logf("upgrade order: %s after root-kcp and root-proxy had rolled out", what)
		}
	}
	for _, x := range []struct {
		what string
		at   time.Time
	}{{"Shard alpha", o.shard}, {"FrontProxy " + naming.FrontProxyName, o.proxy}} {
		switch {
		case x.at.IsZero():
			t.Errorf("%s never got the new version", x.what)
		case o.rootReady.IsZero() || x.at.Before(o.rootReady):
			t.Errorf("upgrade order: %s got the new version at %s, before root-kcp and root-proxy had rolled out (%s)",
				x.what, x.at.Format("15:04:05.000"), orNever(o.rootReady))
		default:
			t.Logf("upgrade order: %s got the new version %s after the root shard had rolled out", x.what, x.at.Sub(o.rootReady).Round(time.Millisecond))
		}
	}
}

func orNever(at time.Time) string {
	if at.IsZero() {
		return "not by the end of the up"
	}
	return at.Format("15:04:05.000")
}

// checkImages checks that every kcp object and every Deployment the operator runs for
// them use the kcp version, and that the objects are Available for their current spec
// once those Deployments have rolled out.
func checkImages(t *testing.T, ctx context.Context, c *cluster, version string) {
	t.Helper()
	want := "ghcr.io/kcp-dev/kcp:" + version
	kcpObjects := []struct {
		gvr  schema.GroupVersionResource
		name string
		path [][]string
	}{
		{rootShardGVR, naming.RootShardName, [][]string{{"spec", "image"}, {"spec", "proxy", "image"}}},
		{shardGVR, "alpha", [][]string{{"spec", "image"}}},
		{frontProxyGVR, naming.FrontProxyName, [][]string{{"spec", "image"}}},
	}
	for _, o := range kcpObjects {
		obj, err := c.dyn.Resource(o.gvr).Namespace(naming.NamespaceKcp).Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s %s: %v", o.gvr.Resource, o.name, err)
			continue
		}
		for _, path := range o.path {
			if got := imageOf(obj.Object, path...); got != want {
				t.Errorf("%s %s %s is %s, want %s", o.gvr.Resource, o.name, strings.Join(path, "."), got, want)
			}
		}
	}
	// The up waited for these rollouts (components/kcprollout.go): each has rolled out the
	// moment it returns.
	for _, name := range []string{
		naming.RootShardDeployment(naming.RootShardName), naming.RootShardName + "-proxy",
		naming.ShardDeployment("alpha"), naming.FrontProxyDeployment(naming.FrontProxyName),
	} {
		if pending := deploymentRollout(ctx, c, name, want); pending != "" {
			t.Errorf("the up returned before Deployment %s had rolled out: %s", name, pending)
		}
	}
	for _, o := range kcpObjects {
		err := testenv.WaitFor(ctx, 2*time.Minute, nil, func() (bool, error) {
			obj, err := c.dyn.Resource(o.gvr).Namespace(naming.NamespaceKcp).Get(ctx, o.name, metav1.GetOptions{})
			return err == nil && isAvailable(obj), nil
		})
		if err != nil {
			t.Errorf("%s %s is not Available for its current spec once its Deployments rolled out: %v", o.gvr.Resource, o.name, err)
		}
	}
}
