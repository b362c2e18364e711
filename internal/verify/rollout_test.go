package verify_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

func TestRolloutPassesWhenEverythingIsRolledOutAndAvailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	results := f.run(t, verify.CheckRollout)
	requireAll(t, results, verify.StatusPass)
	want := []string{
		"Deployment kcp-operator/kcp-operator",
		"StatefulSet etcd/etcd-root",
		"StatefulSet etcd/etcd-alpha",
		"Deployment kcp-system/root-kcp",
		"Deployment kcp-system/root-proxy",
		"Deployment kcp-system/alpha-shard-kcp",
		"Deployment kcp-system/frontproxy-front-proxy",
		"RootShard kcp-system/root",
		"Shard kcp-system/alpha",
		"FrontProxy kcp-system/frontproxy",
		"Kubeconfig kcp-system/kcp-kubeconfig-frontproxy",
	}
	if len(results) != len(want) {
		t.Fatalf("got %d results, want %d: %s", len(results), len(want), dump(results))
	}
	for i, item := range want {
		if results[i].Item != item || results[i].Check != verify.CheckRollout {
			t.Errorf("result %d is %s %q, want rollout %q", i, results[i].Check, results[i].Item, item)
		}
	}
	requireStatus(t, results, "Deployment kcp-system/root-kcp", verify.StatusPass, "rolled out: 2/2 replicas updated and ready")
	requireStatus(t, results, "Shard kcp-system/alpha", verify.StatusPass, "Available=True (ReplicasUp)")
}

func updateDeployment(t *testing.T, f *fixture, ns, name string, mutate func(*appsv1.Deployment)) {
	t.Helper()
	d, err := f.cluster.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mutate(d)
	if _, err := f.cluster.Kube.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestRolloutFailsWhenAShardDeploymentIsNotReady(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	updateDeployment(t, f, "kcp-system", "alpha-shard-kcp", func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 1 })
	results := f.run(t, verify.CheckRollout)
	item := "Deployment kcp-system/alpha-shard-kcp"
	requireFail(t, results, item, "not rolled out", "1 of 2 replicas ready", "still failing when the check timed out")
	requireOthersPass(t, results, item)
}

func TestRolloutFailureReasons(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		mutate func(*appsv1.Deployment)
		want   string
	}{
		"generation not observed": {func(d *appsv1.Deployment) { d.Generation = 4 }, "controller has not observed generation 4 yet (observed 3)"},
		"replicas not updated":    {func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 1 }, "1 of 2 replicas updated"},
		"old replicas remain":     {func(d *appsv1.Deployment) { d.Status.Replicas = 3 }, "1 old replica(s) pending termination"},
		"replicas drift from config": {func(d *appsv1.Deployment) {
			one := int32(1)
			d.Spec.Replicas = &one
			d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas = 1, 1, 1
		}, "spec.replicas is 1 but the stack config asks for 2"},
		"progress deadline": {func(d *appsv1.Deployment) {
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet root-kcp-123 has timed out progressing."}}
		}, "progress deadline exceeded: ReplicaSet root-kcp-123 has timed out progressing."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			updateDeployment(t, f, "kcp-system", "root-kcp", tc.mutate)
			results := f.run(t, verify.CheckRollout)
			requireFail(t, results, "Deployment kcp-system/root-kcp", tc.want)
			requireOthersPass(t, results, "Deployment kcp-system/root-kcp")
		})
	}
}

func TestRolloutFailsWhenEtcdIsRollingOrMissing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sts, err := f.cluster.Kube.AppsV1().StatefulSets("etcd").Get(ctx, "etcd-root", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sts.Status.UpdateRevision = "etcd-root-def"
	if _, err := f.cluster.Kube.AppsV1().StatefulSets("etcd").Update(ctx, sts, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.cluster.Kube.AppsV1().StatefulSets("etcd").Delete(ctx, "etcd-alpha", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	results := f.run(t, verify.CheckRollout)
	requireFail(t, results, "StatefulSet etcd/etcd-root", "rolling update from revision etcd-root-abc to etcd-root-def in progress")
	requireFail(t, results, "StatefulSet etcd/etcd-alpha", "not found")
	requireOthersPass(t, results, "StatefulSet etcd/etcd-root", "StatefulSet etcd/etcd-alpha")
}

func TestRolloutFailsWhenAKcpObjectIsNotAvailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	notAvailable := verifytest.KcpObject("Shard", "alpha", "False", "ReplicasDown", "0 of 2 replicas ready")
	if _, err := f.cluster.Dynamic.Resource(verify.GVRShard).Namespace("kcp-system").Update(ctx, notAvailable, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	noCondition := verifytest.KcpObject("FrontProxy", "frontproxy", "", "", "")
	if _, err := f.cluster.Dynamic.Resource(verify.GVRFrontProxy).Namespace("kcp-system").Update(ctx, noCondition, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.cluster.Dynamic.Resource(verify.GVRKubeconfig).Namespace("kcp-system").Delete(ctx, "kcp-kubeconfig-frontproxy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	results := f.run(t, verify.CheckRollout)
	requireFail(t, results, "Shard kcp-system/alpha", "Available=False (ReplicasDown): 0 of 2 replicas ready")
	requireFail(t, results, "FrontProxy kcp-system/frontproxy", `no Available condition yet (phase "Running")`)
	requireFail(t, results, "Kubeconfig kcp-system/kcp-kubeconfig-frontproxy", "not found")
	requireOthersPass(t, results, "Shard kcp-system/alpha", "FrontProxy kcp-system/frontproxy", "Kubeconfig kcp-system/kcp-kubeconfig-frontproxy")
}

// The check waits like kubectl rollout status: a Deployment that becomes ready while
// the check polls passes.
func TestRolloutWaitsForADeploymentToBecomeReady(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	updateDeployment(t, f, "kcp-system", "frontproxy-front-proxy", func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 0 })
	var gets atomic.Int32
	f.cluster.Kube.PrependReactor("get", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == "frontproxy-front-proxy" && gets.Add(1) == 3 {
			d := verifytest.Deployment("kcp-system", "frontproxy-front-proxy", 2)
			if err := f.cluster.Kube.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), d, "kcp-system"); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
	f.opts.Timeout = 5 * time.Second
	results := f.run(t, verify.CheckRollout)
	requireAll(t, results, verify.StatusPass)
	if gets.Load() < 3 {
		t.Fatalf("the check did not retry: %d reads", gets.Load())
	}
}
