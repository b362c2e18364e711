//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Stage 7, destroy: destroy keeps what holds data and removes the rest; what it kept is
// what a later up takes over, also when that up is interrupted with Ctrl-C.
var destroySteps = []step{
	{"destroy-keeps-data", destroyKeepsData, true},
	{"interrupted-up-after-destroy-reuses-kept-data", interruptedUpAfterDestroyReusesKeptData, false},
}

// destroyKeepsData: destroy keeps the etcd volumes and the operator's CRDs and removes
// the rest; nothing is lifted, as the operator removes each Shard from the running root
// shard before its finalizer lets the Shard go.
func destroyKeepsData(t *testing.T, l *lifecycle) {
	ctx, s := l.ctx, l.stack
	pvcsBefore, err := countObjects(ctx, l.c, pvcGVR, naming.NamespaceEtcd)
	if err != nil || len(pvcsBefore) == 0 {
		t.Fatalf("no etcd volume claims before destroy (%v)", err)
	}
	addOnCRDsBefore, err := addOnCRDs(ctx, l.c)
	if err != nil || len(addOnCRDsBefore) == 0 {
		t.Fatalf("no CRDs of the add-ons before destroy (%v)", err)
	}
	dctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	res, log, err := s.destroy(dctx)
	if err != nil {
		t.Fatalf("destroy failed: %v\n%s", err, indent(log.diagnostics()))
	}
	t.Logf("destroy: %s", changeCounts(summaryOf(res.Summary)))
	checkAfterDestroy(t, ctx, l.env, l.plan, pvcsBefore, addOnCRDsBefore)
	checkEnvoyProxyRemoved(t, ctx, l.env)
	if d := s.export(ctx); len(d.Resources) > 0 {
		var left []string
		for _, r := range d.Resources {
			left = append(left, shortURN(r.URN))
		}
		t.Errorf("the state still holds %d resources after destroy:%s", len(left), indent(left))
	}
}

// interruptedUpAfterDestroyReusesKeptData: the same stack, on the same cluster, comes
// back on the retained volumes, also when that up is interrupted with Ctrl-C while it
// waits for the root shard and run again; the releases destroy uninstalled are installed
// again, over what they left.
func interruptedUpAfterDestroyReusesKeptData(t *testing.T, l *lifecycle) {
	ctx, c := l.ctx, l.c
	// The namespace destroy deleted must be gone before it can be created again.
	if err := testenv.WaitFor(ctx, 3*time.Minute, nil, func() (bool, error) {
		_, err := c.kube.CoreV1().Namespaces().Get(ctx, naming.NamespaceKcp, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		ns, _ := c.kube.CoreV1().Namespaces().Get(ctx, naming.NamespaceKcp, metav1.GetOptions{})
		t.Fatalf("namespace %s is still there after destroy (%v): %s", naming.NamespaceKcp, err, compact(ns.Status))
	}
	before := map[string]string{}
	for k, uid := range dataHolders(t, ctx, c) {
		if strings.HasPrefix(k, "persistentvolumeclaims ") {
			before[k] = uid
		}
	}
	interruptedUp(t, ctx, l.env)
	checkSameObjects(t, before, dataHolders(t, ctx, c))
	checkAddOnsInstalled(t, ctx, c, "the up after destroy")
}

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

// checkAfterDestroy: the data, the CRDs and the namespaces the README says stay are kept
// (and said so), with what the add-ons' charts leave (checkAddOnsAfterDestroy); the rest
// is gone.
// addOnCRDsBefore are the add-ons' CRDs before destroy, which it must keep.
func checkAfterDestroy(t *testing.T, ctx context.Context, e *env, p rendered, pvcsBefore, addOnCRDsBefore []string) {
	t.Helper()
	c := e.c
	var kept []string
	pvcs, err := countObjects(ctx, c, pvcGVR, naming.NamespaceEtcd)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pvcs, pvcsBefore) {
		t.Errorf("destroy did not keep the etcd volume claims: %v, were %v", pvcs, pvcsBefore)
	}
	for _, name := range pvcs {
		ns, n, _ := strings.Cut(name, "/")
		pvc, err := c.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, n, metav1.GetOptions{})
		if err == nil && pvc.DeletionTimestamp == nil && pvc.Status.Phase == "Bound" {
			kept = append(kept, fmt.Sprintf("PersistentVolumeClaim %s (Bound to %s)", name, pvc.Spec.VolumeName))
		} else {
			t.Errorf("etcd volume claim %s is not kept bound (%v)", name, err)
		}
	}
	for _, res := range []string{"rootshards", "shards", "frontproxies", "kubeconfigs", "cacheservers"} {
		name := res + ".operator.kcp.io"
		crd, err := c.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil || crd.GetDeletionTimestamp() != nil {
			t.Errorf("destroy removed the operator's CRD %s (%v)", name, err)
			continue
		}
		kept = append(kept, "CustomResourceDefinition "+name)
	}
	for _, ns := range []string{naming.NamespaceEtcd, p.cfg.Hub.Namespace} {
		n, err := c.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil || n.DeletionTimestamp != nil {
			t.Errorf("destroy removed the retained namespace %s (%v)", ns, err)
			continue
		}
		kept = append(kept, "Namespace "+ns)
	}
	// CoreDNS keeps working: its pods still read the retained Corefile, whose hosts
	// stanza now reads an absent file.
	checkCoreDNSReadsOurCorefile(t, ctx, e, p, false)
	kept = append(kept, "ConfigMap kube-system/"+naming.SplitHorizonCorefileConfigMap+" (the Corefile CoreDNS mounts; its hosts file is gone)")

	// Gone: kcp objects, owned Services, the hub Secret, the hosts ConfigMap, etcd, the edge.
	gone := []struct {
		what string
		gvr  schema.GroupVersionResource
		ns   string
		name string
	}{
		{"RootShard", rootShardGVR, "", ""}, {"Shard", shardGVR, "", ""}, {"FrontProxy", frontProxyGVR, "", ""}, {"Kubeconfig", kubeconfigGVR, "", ""},
		{"Service", serviceGVR, naming.NamespaceKcp, ""},
		{"Secret", secretGVR, p.cfg.Hub.Namespace, p.cfg.Hub.SecretName},
		{"ConfigMap", configMapGVR, naming.NamespaceKubeSystem, naming.SplitHorizonHostsConfigMap},
		{"StatefulSet", statefulSetGVR, naming.NamespaceEtcd, ""},
		{"Deployment", deploymentGVR, naming.NamespaceKcp, ""},
		{"Gateway", gatewayGVR, naming.NamespaceKcp, ""},
		{"GatewayClass", gwClassGVR, "", naming.EdgeGatewayName},
		{"EnvoyProxy", envoyProxyGVR, naming.NamespaceEnvoyGateway, naming.EdgeGatewayName},
		{"Namespace", namespaceGVR, "", naming.NamespaceKcp},
	}
	var removed []string
	for _, g := range gone {
		var left []string
		var listErr error
		// What the operator created (Deployments, owned by its Compiled* objects) goes
		// by garbage collection after destroy returns: give it a while, then fail.
		_ = testenv.WaitFor(ctx, 90*time.Second, nil, func() (bool, error) {
			names, err := countObjects(ctx, c, g.gvr, g.ns)
			left, listErr = nil, err
			for _, n := range names {
				short := n[strings.LastIndex(n, "/")+1:]
				if g.name == "" || short == g.name {
					left = append(left, n)
				}
			}
			if g.gvr == namespaceGVR && len(left) > 0 {
				// A namespace that is terminating is being removed.
				if ns, err := c.kube.CoreV1().Namespaces().Get(ctx, g.name, metav1.GetOptions{}); err == nil && ns.DeletionTimestamp != nil {
					left = nil
				}
			}
			return err == nil && len(left) == 0, nil
		})
		if listErr != nil {
			t.Errorf("listing %s: %v", g.what, listErr)
			continue
		}
		if len(left) > 0 {
			t.Errorf("destroy left %s %v", g.what, left)
			continue
		}
		target := g.what
		if g.name != "" {
			target += " " + g.name
		} else if g.ns != "" {
			target += "s in " + g.ns
		} else {
			target += "s"
		}
		removed = append(removed, target)
	}
	kept = append(kept, checkAddOnsAfterDestroy(t, ctx, c, addOnCRDsBefore)...)
	t.Logf("destroy kept on purpose:%s", indent(kept))
	t.Logf("destroy removed:%s", indent(removed))
}
