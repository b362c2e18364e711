package verify

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The operator's API (kcp-operator v1alpha1).
var (
	GVRRootShard  = schema.GroupVersionResource{Group: "operator.kcp.io", Version: "v1alpha1", Resource: "rootshards"}
	GVRShard      = schema.GroupVersionResource{Group: "operator.kcp.io", Version: "v1alpha1", Resource: "shards"}
	GVRFrontProxy = schema.GroupVersionResource{Group: "operator.kcp.io", Version: "v1alpha1", Resource: "frontproxies"}
	GVRKubeconfig = schema.GroupVersionResource{Group: "operator.kcp.io", Version: "v1alpha1", Resource: "kubeconfigs"}
)

// workload is a Deployment or StatefulSet that must be rolled out.
type workload struct {
	kind      string // "Deployment" or "StatefulSet"
	namespace string
	name      string
	// replicas the stack config asks for; 0 when the config does not set them.
	replicas int
}

func (w workload) item() string { return fmt.Sprintf("%s %s/%s", w.kind, w.namespace, w.name) }

// kcpObject is an operator object that must report Available=True.
type kcpObject struct {
	kind string
	gvr  schema.GroupVersionResource
	name string
}

func (k kcpObject) item() string {
	return fmt.Sprintf("%s %s/%s", k.kind, naming.NamespaceKcp, k.name)
}

// rolloutTargets derives, from the stack config, every workload and kcp object the
// program deploys, in deployment order.
func rolloutTargets(cfg *config.Config) ([]workload, []kcpObject) {
	w := []workload{{kind: "Deployment", namespace: naming.NamespaceOperator, name: naming.OperatorDeployment}}
	for _, s := range cfg.Kcp.AllShards() {
		w = append(w, workload{kind: "StatefulSet", namespace: naming.NamespaceEtcd, name: naming.EtcdName(s.Name), replicas: cfg.Etcd.Members})
	}
	root := naming.RootShardName
	w = append(w,
		workload{kind: "Deployment", namespace: naming.NamespaceKcp, name: naming.RootShardDeployment(root), replicas: cfg.Kcp.RootShard.Replicas},
		// The root shard's internal proxy: the RootShard's Available condition does not
		// cover it, so it is checked on its own.
		workload{kind: "Deployment", namespace: naming.NamespaceKcp, name: naming.RootShardProxyDeployment(root), replicas: cfg.Kcp.RootShard.Replicas},
	)
	for _, s := range cfg.Kcp.Shards {
		w = append(w, workload{kind: "Deployment", namespace: naming.NamespaceKcp, name: naming.ShardDeployment(s.Name), replicas: s.Replicas})
	}
	w = append(w, workload{kind: "Deployment", namespace: naming.NamespaceKcp, name: naming.FrontProxyDeployment(naming.FrontProxyName), replicas: cfg.Kcp.FrontProxy.Replicas})

	objs := []kcpObject{{kind: "RootShard", gvr: GVRRootShard, name: root}}
	for _, s := range cfg.Kcp.Shards {
		objs = append(objs, kcpObject{kind: "Shard", gvr: GVRShard, name: s.Name})
	}
	objs = append(objs,
		kcpObject{kind: "FrontProxy", gvr: GVRFrontProxy, name: naming.FrontProxyName},
		kcpObject{kind: "Kubeconfig", gvr: GVRKubeconfig, name: naming.KubeconfigObjectName(cfg.Hub.RemintGeneration)},
	)
	return w, objs
}

// checkRollout waits, like kubectl rollout status, until every workload is fully rolled
// out and every kcp object reports Available=True, or the check times out.
func checkRollout(ctx context.Context, o *Options) []Result {
	workloads, objs := rolloutTargets(o.Config)
	return poll(ctx, o.Interval, func(ctx context.Context) []Result {
		var out []Result
		for _, w := range workloads {
			out = append(out, rolloutResult(ctx, o, w))
		}
		for _, k := range objs {
			out = append(out, availableResult(ctx, o, k))
		}
		return out
	})
}

func rolloutResult(ctx context.Context, o *Options, w workload) Result {
	var (
		problem string
		summary string
		err     error
	)
	switch w.kind {
	case "Deployment":
		var d *appsv1.Deployment
		d, err = o.Kube.AppsV1().Deployments(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
		if err == nil {
			problem, summary = deploymentProblem(d, w.replicas)
		}
	case "StatefulSet":
		var s *appsv1.StatefulSet
		s, err = o.Kube.AppsV1().StatefulSets(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
		if err == nil {
			problem, summary = statefulSetProblem(s, w.replicas)
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return fail(CheckRollout, w.item(), "not found")
	case err != nil:
		return fail(CheckRollout, w.item(), "cannot read: %v", err)
	case problem != "":
		return fail(CheckRollout, w.item(), "not rolled out: %s", problem)
	}
	return pass(CheckRollout, w.item(), "rolled out: %s", summary)
}

func desired(replicas *int32) int32 {
	if replicas == nil {
		return 1
	}
	return *replicas
}

// deploymentProblem says why a Deployment is not fully rolled out ("" when it is).
func deploymentProblem(d *appsv1.Deployment, want int) (problem, summary string) {
	spec := desired(d.Spec.Replicas)
	st := d.Status
	summary = fmt.Sprintf("%d/%d replicas updated and ready", st.ReadyReplicas, spec)
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return "progress deadline exceeded: " + c.Message, summary
		}
	}
	return replicaProblem(d.Generation, st.ObservedGeneration, spec, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, want), summary
}

// statefulSetProblem says why a StatefulSet is not fully rolled out ("" when it is).
func statefulSetProblem(s *appsv1.StatefulSet, want int) (problem, summary string) {
	spec := desired(s.Spec.Replicas)
	st := s.Status
	summary = fmt.Sprintf("%d/%d replicas updated and ready", st.ReadyReplicas, spec)
	if p := replicaProblem(s.Generation, st.ObservedGeneration, spec, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, want); p != "" {
		return p, summary
	}
	rolling := s.Spec.UpdateStrategy.Type == "" || s.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType
	if rolling && st.UpdateRevision != "" && st.CurrentRevision != st.UpdateRevision {
		return fmt.Sprintf("rolling update from revision %s to %s in progress", st.CurrentRevision, st.UpdateRevision), summary
	}
	return "", summary
}

func replicaProblem(generation, observed int64, spec, current, updated, ready int32, want int) string {
	var problems []string
	if observed < generation {
		problems = append(problems, fmt.Sprintf("controller has not observed generation %d yet (observed %d)", generation, observed))
	}
	if want > 0 && int(spec) != want {
		problems = append(problems, fmt.Sprintf("spec.replicas is %d but the stack config asks for %d (run pulumi up)", spec, want))
	}
	if updated != spec {
		problems = append(problems, fmt.Sprintf("%d of %d replicas updated", updated, spec))
	}
	if current > updated {
		problems = append(problems, fmt.Sprintf("%d old replica(s) pending termination", current-updated))
	}
	if ready != spec {
		problems = append(problems, fmt.Sprintf("%d of %d replicas ready", ready, spec))
	}
	return strings.Join(problems, "; ")
}

func availableResult(ctx context.Context, o *Options, k kcpObject) Result {
	obj, err := o.Dynamic.Resource(k.gvr).Namespace(naming.NamespaceKcp).Get(ctx, k.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fail(CheckRollout, k.item(), "not found")
	case err != nil:
		return fail(CheckRollout, k.item(), "cannot read: %v", err)
	}
	cond, found := findCondition(obj, "Available")
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	if !found {
		return fail(CheckRollout, k.item(), "no Available condition yet (phase %q)", phase)
	}
	if cond.status != "True" {
		msg := fmt.Sprintf("Available=%s", orUnknown(cond.status))
		if cond.reason != "" {
			msg += " (" + cond.reason + ")"
		}
		if cond.message != "" {
			msg += ": " + cond.message
		}
		return fail(CheckRollout, k.item(), "%s", msg)
	}
	if cond.observedGeneration > 0 && cond.observedGeneration < obj.GetGeneration() {
		return fail(CheckRollout, k.item(), "Available=True is stale: observed generation %d, object is at %d", cond.observedGeneration, obj.GetGeneration())
	}
	msg := "Available=True"
	if cond.reason != "" {
		msg += " (" + cond.reason + ")"
	}
	return pass(CheckRollout, k.item(), "%s", msg)
}

type condition struct {
	status, reason, message string
	observedGeneration      int64
}

func findCondition(obj *unstructured.Unstructured, condType string) (condition, bool) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != condType {
			continue
		}
		str := func(key string) string { s, _ := m[key].(string); return s }
		var gen int64
		switch g := m["observedGeneration"].(type) {
		case int64:
			gen = g
		case float64:
			gen = int64(g)
		}
		return condition{status: str("status"), reason: str("reason"), message: str("message"), observedGeneration: gen}, true
	}
	return condition{}, false
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}
