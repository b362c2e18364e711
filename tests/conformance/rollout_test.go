package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/railgrid/railgrid-kcp/components"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// TestKcpRolloutWaitReadsWhatTheOperatorWrites runs the wait of the program's kcp
// rollout hooks (components/kcprollout.go) against a real kube-apiserver with the
// operator's CRDs: the kind plan's RootShard, a CompiledRootShard and the two Deployments
// laid out as the kcp-operator writes them (406169b: the compiled object carries the
// RootShard's spec in spec.rootShard and stamps its Available condition with its
// generation; root-kcp and root-proxy run the spec's images). No controller runs, so
// the test sets every status itself and walks the wait through each way a rollout is
// unfinished, then finished. tests/e2e's version bump runs the hooks with the real
// operator and engine.
func TestKcpRolloutWaitReadsWhatTheOperatorWrites(t *testing.T) {
	servers, root := requireServers(t)
	ctx := testContext(t)
	all, err := testenv.LoadCRDs(testenv.CRDsDir(root))
	require.NoError(t, err)
	var crds []*unstructured.Unstructured
	for _, crd := range all {
		if name := crd.GetName(); name == "rootshards.operator.kcp.io" || name == "compiledrootshards.deploy.operator.kcp.io" {
			crds = append(crds, crd)
		}
	}
	require.Len(t, crds, 2)
	p, err := renderStack(root, "kind")
	require.NoError(t, err)
	var rootShard *unstructured.Unstructured
	for _, o := range p.objects {
		if o.Manifest["kind"] == "RootShard" {
			rootShard = &unstructured.Unstructured{Object: o.Manifest}
		}
	}
	require.NotNil(t, rootShard, "the kind plan's RootShard")
	rootShard.SetAnnotations(nil)

	_, cfg := startAPIServer(t, ctx, servers, "10.96.0.0/16")
	cl, err := newClient(cfg)
	require.NoError(t, err)
	require.NoError(t, cl.installCRDs(ctx, crds))
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := naming.NamespaceKcp
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	rootShards := cl.dynamic.Resource(schema.GroupVersionResource{Group: "operator.kcp.io", Version: "v1alpha1", Resource: "rootshards"}).Namespace(ns)
	compiledRootShards := cl.dynamic.Resource(schema.GroupVersionResource{Group: "deploy.operator.kcp.io", Version: "v1alpha1", Resource: "compiledrootshards"}).Namespace(ns)
	live, err := rootShards.Create(ctx, rootShard, metav1.CreateOptions{})
	require.NoError(t, err)
	spec, _, _ := unstructured.NestedMap(live.Object, "spec")
	image := "ghcr.io/kcp-dev/kcp:" + p.cfg.Versions.Kcp

	// render writes what the operator's RootShard controller writes: the compiled copy of
	// the RootShard's spec, then (as its controller does) the Available condition stamped
	// with the compiled object's generation.
	render := func(spec map[string]any) {
		t.Helper()
		obj, err := compiledRootShards.Get(ctx, naming.RootShardName, metav1.GetOptions{})
		if err != nil {
			obj = &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "deploy.operator.kcp.io/v1alpha1", "kind": "CompiledRootShard",
				"metadata": map[string]any{"name": naming.RootShardName, "namespace": ns},
			}}
		}
		require.NoError(t, unstructured.SetNestedMap(obj.Object, spec, "spec", "rootShard"))
		if obj.GetResourceVersion() == "" {
			obj, err = compiledRootShards.Create(ctx, obj, metav1.CreateOptions{})
		} else {
			obj, err = compiledRootShards.Update(ctx, obj, metav1.UpdateOptions{})
		}
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedSlice(obj.Object, []any{map[string]any{
			"type": "Available", "status": "True", "reason": "ReplicasUp", "message": "set by the test",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": obj.GetGeneration(),
		}}, "status", "conditions"))
		_, err = compiledRootShards.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	// deployment writes one of the operator's Deployments with the rollout state given.
	deployment := func(name, image string, updated, ready int32) *appsv1.Deployment {
		t.Helper()
		labels := map[string]string{naming.LabelInstance: name}
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			d, err = kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{"deployment.kubernetes.io/revision": "2"}},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](2),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "kcp", Image: image}}},
					},
				},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		if d.Spec.Template.Spec.Containers[0].Image != image {
			d.Spec.Template.Spec.Containers[0].Image = image
			d, err = kube.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: updated, ReadyReplicas: ready, AvailableReplicas: ready}
		d, err = kube.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		require.NoError(t, err)
		return d
	}
	wait := func() error {
		return components.WaitForKcpRollout(ctx, cfg, "RootShard", naming.RootShardName, time.Second, 100*time.Millisecond)
	}
	kcpName, proxyName := naming.RootShardDeployment(naming.RootShardName), naming.RootShardName+"-proxy"

	// Not rendered yet.
	require.ErrorContains(t, wait(), "the operator has not rendered its CompiledRootShard yet")

	// Rendered, root-kcp halfway, root-proxy not started: the error names each Deployment
	// and its counts, what to look at, and the bound.
	render(spec)
	deployment(kcpName, image, 1, 0)
	deployment(proxyName, image, 0, 0)
	err = wait()
	require.ErrorContains(t, err, "RootShard kcp-system/root: its new spec is applied, but the operator has not rolled it out after 1s")
	require.ErrorContains(t, err, "kcp-system/root-kcp: 1 of 2 replicas updated, 0 ready, 0 available")
	require.ErrorContains(t, err, "kcp-system/root-proxy: 0 of 2 replicas updated, 0 ready, 0 available")
	require.ErrorContains(t, err, "kubectl -n kcp-system rollout status deploy/root-kcp")

	// Both rolled out: the wait returns.
	kcpDeployment := deployment(kcpName, image, 2, 2)
	deployment(proxyName, image, 2, 2)
	require.NoError(t, wait())

	// An old ReplicaSet of root-kcp that still has a pod.
	labels := kcpDeployment.Spec.Selector.MatchLabels
	rs, err := kube.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: kcpName + "-old", Namespace: ns, Labels: labels,
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": "1"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(kcpDeployment, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kcp", Image: "ghcr.io/kcp-dev/kcp:v0.32.0"}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	rs.Status = appsv1.ReplicaSetStatus{Replicas: 1}
	_, err = kube.AppsV1().ReplicaSets(ns).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.ErrorContains(t, wait(), "old ReplicaSet root-kcp-old still has 1 pods")
	require.NoError(t, kube.AppsV1().ReplicaSets(ns).Delete(ctx, rs.Name, metav1.DeleteOptions{}))
	require.NoError(t, wait())

	// A new RootShard spec the operator has not rendered yet: the Deployments' rollout of
	// the old one does not count.
	bumped := "v0.33.1"
	_, err = rootShards.Patch(ctx, naming.RootShardName, types.MergePatchType,
		[]byte(`{"spec":{"image":{"tag":"`+bumped+`"},"proxy":{"image":{"tag":"`+bumped+`"}}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.ErrorContains(t, wait(), "the operator has not rendered generation 2 of RootShard root into its CompiledRootShard yet")

	// Rendered, but the Deployments still run the old image.
	live, err = rootShards.Get(ctx, naming.RootShardName, metav1.GetOptions{})
	require.NoError(t, err)
	spec, _, _ = unstructured.NestedMap(live.Object, "spec")
	render(spec)
	require.ErrorContains(t, wait(), "the operator has not moved it to the new image (container kcp runs "+image)

	// Rolled out, but from another repository than the spec names.
	deployment(kcpName, "registry.example/kcp-dev/kcp:"+bumped, 2, 2)
	deployment(proxyName, "ghcr.io/kcp-dev/kcp:"+bumped, 2, 2)
	require.ErrorContains(t, wait(), "kcp-system/root-kcp: 2 of 2 replicas updated, 2 ready, 2 available; no container runs ghcr.io/kcp-dev/kcp:"+bumped)

	// The new image rolled out on both: done.
	deployment(kcpName, "ghcr.io/kcp-dev/kcp:"+bumped, 2, 2)
	deployment(proxyName, "ghcr.io/kcp-dev/kcp:"+bumped, 2, 2)
	require.NoError(t, wait())
}
