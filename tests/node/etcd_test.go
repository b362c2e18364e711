//go:build linux

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

// kindPlan renders the shipped kind stack under mocks, as cmd/plan does.
func kindPlan(t *testing.T) []plan.Object {
	t.Helper()
	values, err := config.ReadStackFile(filepath.Join(testenv.RepoRoot(t), "Pulumi.kind.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := mockstack.RunConfig("kind", values, mockstack.Options{})
	if err != nil {
		t.Fatalf("rendering the kind plan: %v", err)
	}
	return plan.KubernetesObjects(rec)
}

// kindEtcdImage is the image the kind plan's etcd StatefulSets run.
func kindEtcdImage(t *testing.T) string {
	t.Helper()
	for _, o := range kindPlan(t) {
		if o.Manifest["kind"] == "StatefulSet" {
			containers, _, _ := unstructured.NestedSlice(o.Manifest, "spec", "template", "spec", "containers")
			if len(containers) > 0 {
				return containers[0].(map[string]any)["image"].(string)
			}
		}
	}
	t.Fatal("the kind plan has no StatefulSet")
	return ""
}

// etcdOfTheKindPlanRuns applies the kind plan's objects of the etcd namespace for the
// root shard (namespace, Services, StatefulSet, disruption budget, network policy, the
// defragmentation's CronJob)
// exactly as rendered, gives its claim a volume under dir, and waits for the member to
// become Ready through its real readiness probe, with no restart; then it reads from the
// kernel that the container's root filesystem is mounted read-only, as declared.
func etcdOfTheKindPlanRuns(t *testing.T, ctx context.Context, server *testenv.APIServer, node *testenv.Node, dir string) {
	kube, err := kubernetes.NewForConfig(server.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(server.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	var statefulSet string
	for _, o := range kindPlan(t) {
		meta, _ := o.Manifest["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		kind, _ := o.Manifest["kind"].(string)
		inEtcd := (kind == "Namespace" && name == "etcd") || (ns == "etcd" && strings.Contains(name, "root"))
		if !inEtcd || o.Patch {
			continue
		}
		if kind == "StatefulSet" {
			statefulSet = name
		}
		apply(t, ctx, dyn, o.Manifest)
	}
	if statefulSet == "" {
		t.Fatal("the kind plan has no etcd StatefulSet for the root shard")
	}
	set, err := kube.AppsV1().StatefulSets("etcd").Get(ctx, statefulSet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim := set.Spec.VolumeClaimTemplates[0]
	provideVolume(t, ctx, kube, *claim.Spec.StorageClassName, "etcd", claim.Name+"-"+statefulSet+"-0", claim.Spec.Resources.Requests[corev1.ResourceStorage], dir)

	pod := statefulSet + "-0"
	var last *corev1.Pod
	if err := testenv.WaitFor(ctx, 3*time.Minute, nil, func() (bool, error) {
		p, err := kube.CoreV1().Pods("etcd").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("etcd/%s did not become Ready: %v\n%s", pod, err, testenv.PodProblems(ctx, kube, "etcd"))
	}
	if last.Spec.NodeName != node.Name {
		t.Errorf("etcd/%s runs on %q, want the real node %s", pod, last.Spec.NodeName, node.Name)
	}
	for _, cs := range last.Status.ContainerStatuses {
		if cs.RestartCount != 0 {
			t.Errorf("etcd/%s container %s restarted %d times", pod, cs.Name, cs.RestartCount)
		}
		if ro, err := node.RootFilesystemReadOnly(cs.ContainerID); err != nil || !ro {
			t.Errorf("etcd/%s container %s: root filesystem read-only = %v (%v), want true", pod, cs.Name, ro, err)
		}
	}
}

// apply server-side applies one manifest of the plan.
func apply(t *testing.T, ctx context.Context, dyn dynamic.Interface, manifest map[string]any) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: manifest}
	gvk := obj.GroupVersionKind()
	resource := map[string]string{"Namespace": "namespaces", "Service": "services", "StatefulSet": "statefulsets",
		"PodDisruptionBudget": "poddisruptionbudgets", "NetworkPolicy": "networkpolicies", "CronJob": "cronjobs"}[gvk.Kind]
	if resource == "" {
		t.Fatalf("the etcd objects have a kind this test does not apply: %s", gvk.Kind)
	}
	data, err := yaml.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource}
	var client dynamic.ResourceInterface = dyn.Resource(gvr)
	if ns := obj.GetNamespace(); ns != "" {
		client = dyn.Resource(gvr).Namespace(ns)
	}
	force := true
	if _, err := client.Patch(ctx, obj.GetName(), types.ApplyYAMLPatchType, data, metav1.PatchOptions{FieldManager: "railgrid-node-test", Force: &force}); err != nil {
		t.Fatalf("applying %s %s: %v", gvk.Kind, obj.GetName(), err)
	}
}

// provideVolume makes the StorageClass the claim names (if missing) and a hostPath
// volume under dir bound to the claim, as kind's local-path provisioner would: the
// directory is the member's to write (its user), nothing else of the machine is.
func provideVolume(t *testing.T, ctx context.Context, kube kubernetes.Interface, class, ns, claim string, size resource.Quantity, dir string) {
	t.Helper()
	retain := corev1.PersistentVolumeReclaimRetain
	if _, err := kube.StorageV1().StorageClasses().Get(ctx, class, metav1.GetOptions{}); err != nil {
		if _, err := kube.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "kubernetes.io/no-provisioner", ReclaimPolicy: &retain,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, claim)
	if err := os.MkdirAll(path, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	hostPath := corev1.HostPathDirectory
	if _, err := kube.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              class,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: retain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &hostPath}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(fmt.Errorf("creating the volume for %s/%s: %w", ns, claim, err))
	}
}
