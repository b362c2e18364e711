package components

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/naming"
)

// kcpRolloutTimeout bounds one object's rollout, as long as the wait for its Available
// condition (kcpObjectTimeoutSeconds). rootShardFirstTimeout is short: by the time a
// Shard is updated, the root shard's own wait has passed, unless it failed.
const (
	kcpRolloutTimeout     = 30 * time.Minute
	rootShardFirstTimeout = 2 * time.Minute
)

// Why hooks: the operator's Available condition comes from the Deployments' replica
// counts without their observedGeneration, so the provider's wait for Available passes
// while the old pods still serve (pkg/controller/util deploymentReady in the kcp-operator
// source hack/fetch-shared.sh pins). An after-update hook runs in the update step, after
// the provider's wait and before the step completes, so what depends on the RootShard
// (the shards, the front proxy) is updated only once root-kcp and root-proxy have rolled
// out, and `up` returns only once every updated kcp object serves its new spec. A failed
// after-update hook fails the `up` but lets the rest go on, so the before-update hook of
// the shards and the front proxy checks the root shard again and refuses their update. No
// hook runs on a create (Available is then exact: there are no old pods) or when nothing
// changed.

// kcpRolloutWaits are the two hooks, registered once per program.
type kcpRolloutWaits struct{ rollout, rootFirst *pulumi.ResourceHook }

// ofRootShard binds the waits of the root shard: its own rollout.
func (w kcpRolloutWaits) ofRootShard() pulumi.ResourceOption {
	return pulumi.ResourceHooks(&pulumi.ResourceHookBinding{AfterUpdate: []*pulumi.ResourceHook{w.rollout}})
}

// afterRootShard binds the waits of a Shard or the FrontProxy: the root shard first, then
// its own rollout.
func (w kcpRolloutWaits) afterRootShard() pulumi.ResourceOption {
	return pulumi.ResourceHooks(&pulumi.ResourceHookBinding{
		BeforeUpdate: []*pulumi.ResourceHook{w.rootFirst},
		AfterUpdate:  []*pulumi.ResourceHook{w.rollout},
	})
}

// newKcpRolloutWaits registers the hooks; they reach the cluster as the provider does.
func newKcpRolloutWaits(ctx *pulumi.Context, access clusterAccess) (kcpRolloutWaits, error) {
	wait := func(args *pulumi.ResourceHookArgs, kind, name string, timeout time.Duration) error {
		server, err := kcpServerOf(kind, name)
		if err != nil || name == "" {
			return fmt.Errorf("%s: cannot tell which kcp server to wait for (kind %q, name %q)", args.URN, kind, name)
		}
		cfg, err := access()
		if err != nil {
			return fmt.Errorf("reaching the cluster to wait for the rollout of %s %s/%s: %w", kind, naming.NamespaceKcp, name, err)
		}
		return waitForKcpRollout(context.Background(), cfg, server, timeout, 2*time.Second)
	}
	rollout, err := ctx.RegisterResourceHook(naming.KcpRolloutHook, func(args *pulumi.ResourceHookArgs) error {
		return wait(args, stringInput(args.NewInputs, "kind"), nestedStringInput(args.NewInputs, "metadata", "name"), kcpRolloutTimeout)
	}, nil)
	if err != nil {
		return kcpRolloutWaits{}, err
	}
	rootFirst, err := ctx.RegisterResourceHook(naming.RootShardFirstHook, func(args *pulumi.ResourceHookArgs) error {
		root := nestedStringInput(args.NewInputs, "spec", "rootShard", "ref", "name")
		if err := wait(args, kcpapi.KindRootShard, root, rootShardFirstTimeout); err != nil {
			return fmt.Errorf("%s is not updated before its root shard has rolled out: %w", nestedStringInput(args.NewInputs, "metadata", "name"), err)
		}
		return nil
	}, nil)
	if err != nil {
		return kcpRolloutWaits{}, err
	}
	return kcpRolloutWaits{rollout: rollout, rootFirst: rootFirst}, nil
}

// kcpServer is a kcp object and the Deployments the operator runs for it, each with the
// path of its image in the object's spec.
type kcpServer struct {
	Kind, Name string
	resource   string // the operator.kcp.io resource
	// compiledResource and compiledField: the operator copies the object's spec into
	// spec.<compiledField> of a deploy.operator.kcp.io object of the same name, whose
	// controller writes the Deployments (kcp-operator internal/resources/*/compiled.go).
	compiledResource, compiledField string
	deployments                     []kcpDeployment
}

type kcpDeployment struct {
	Name      string
	imagePath []string // in the kcp object's spec
}

// kcpServerOf names what the operator runs for one of its kinds (naming mirrors the
// operator's names).
func kcpServerOf(kind, name string) (kcpServer, error) {
	switch kind {
	case kcpapi.KindRootShard:
		return kcpServer{Kind: kind, Name: name, resource: "rootshards", compiledResource: "compiledrootshards", compiledField: "rootShard",
			deployments: []kcpDeployment{{naming.RootShardDeployment(name), []string{"image"}}, {naming.RootShardProxyDeployment(name), []string{"proxy", "image"}}}}, nil
	case kcpapi.KindShard:
		return kcpServer{Kind: kind, Name: name, resource: "shards", compiledResource: "compiledshards", compiledField: "shard",
			deployments: []kcpDeployment{{naming.ShardDeployment(name), []string{"image"}}}}, nil
	case kcpapi.KindFrontProxy:
		return kcpServer{Kind: kind, Name: name, resource: "frontproxies", compiledResource: "compiledfrontproxies", compiledField: "frontProxy",
			deployments: []kcpDeployment{{naming.FrontProxyDeployment(name), []string{"image"}}}}, nil
	}
	return kcpServer{}, fmt.Errorf("no kcp Deployments are known for kind %q", kind)
}

// rolloutClients read the kcp objects, their compiled copies and the Deployments.
type rolloutClients struct {
	dyn  dynamic.Interface
	kube kubernetes.Interface
}

func newRolloutClients(cfg *rest.Config) (rolloutClients, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return rolloutClients{}, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return rolloutClients{}, err
	}
	return rolloutClients{dyn: dyn, kube: kube}, nil
}

// WaitForKcpRollout polls every `every` until the operator has rolled the kcp object of
// kind (RootShard, Shard or FrontProxy) and name in kcp-system out to its spec, and fails
// after timeout with what is still rolling.
func WaitForKcpRollout(ctx context.Context, cfg *rest.Config, kind, name string, timeout, every time.Duration) error {
	server, err := kcpServerOf(kind, name)
	if err != nil {
		return err
	}
	return waitForKcpRollout(ctx, cfg, server, timeout, every)
}

func waitForKcpRollout(ctx context.Context, cfg *rest.Config, server kcpServer, timeout, every time.Duration) error {
	c, err := newRolloutClients(cfg)
	if err != nil {
		return err
	}
	// Each read has its own bound, so the last one before the deadline is never cut short
	// and the error reports what was last seen, not the cut.
	deadline := time.Now().Add(timeout)
	var last []string
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		pending, err := kcpRolloutPending(rctx, c, server)
		cancel()
		switch {
		case err == nil && len(pending) == 0:
			return nil
		case err == nil:
			last = pending
		case ctx.Err() == nil:
			last = []string{err.Error()} // read again until the deadline
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return fmt.Errorf("%s %s/%s: its new spec is applied, but the operator has not rolled it out after %s: %s. "+
				"Look at `kubectl -n %s rollout status deploy/%s` and at the operator's logs (`kubectl -n %s logs deploy/%s`); "+
				"once it has rolled out, run `pulumi up` again: it updates what waits for it, checking the root shard first",
				server.Kind, naming.NamespaceKcp, server.Name, timeout, strings.Join(last, "; "),
				naming.NamespaceKcp, server.deployments[0].Name, naming.NamespaceOperator, naming.OperatorReleaseName)
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(every, time.Until(deadline))):
		}
	}
}

var (
	operatorGroupVersion = schema.GroupVersion{Group: "operator.kcp.io", Version: "v1alpha1"}
	compiledGroupVersion = schema.GroupVersion{Group: "deploy.operator.kcp.io", Version: "v1alpha1"}
)

// kcpRolloutPending says what is still rolling for server; none when it has rolled out:
// the operator has rendered the object's current spec into its compiled copy and
// reconciled that, and every Deployment has rolled out (observedGeneration ==
// generation; updated, ready and available replicas all equal to spec.replicas; no pod
// of an older ReplicaSet left) with each kcp container at the image the spec names.
func kcpRolloutPending(ctx context.Context, c rolloutClients, server kcpServer) ([]string, error) {
	obj, err := c.dyn.Resource(operatorGroupVersion.WithResource(server.resource)).Namespace(naming.NamespaceKcp).Get(ctx, server.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	compiledName := "Compiled" + server.Kind
	compiled, err := c.dyn.Resource(compiledGroupVersion.WithResource(server.compiledResource)).Namespace(naming.NamespaceKcp).Get(ctx, server.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return []string{fmt.Sprintf("the operator has not rendered its %s yet", compiledName)}, nil
	}
	if err != nil {
		return nil, err
	}
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	rendered, _, _ := unstructured.NestedMap(compiled.Object, "spec", server.compiledField)
	if !apiequality.Semantic.DeepEqual(spec, rendered) {
		return []string{fmt.Sprintf("the operator has not rendered generation %d of %s %s into its %s yet", obj.GetGeneration(), server.Kind, server.Name, compiledName)}, nil
	}
	if !conditionObserved(compiled, "Available") {
		return []string{fmt.Sprintf("the operator has not reconciled generation %d of its %s yet", compiled.GetGeneration(), compiledName)}, nil
	}
	var pending []string
	for _, d := range server.deployments {
		image, err := specImage(spec, d.imagePath)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", server.Kind, server.Name, err)
		}
		p, err := deploymentPending(ctx, c.kube, d.Name, image)
		if err != nil {
			return nil, err
		}
		if p != "" {
			pending = append(pending, p)
		}
	}
	return pending, nil
}

// conditionObserved reports whether obj has the condition with its generation stamped.
func conditionObserved(obj *unstructured.Unstructured, condition string) bool {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] != condition {
			continue
		}
		observed, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		return observed == obj.GetGeneration()
	}
	return false
}

// specImage is repository:tag of the image at path in a kcp object's spec.
func specImage(spec map[string]any, path []string) (string, error) {
	repo, _, _ := unstructured.NestedString(spec, append(append([]string(nil), path...), "repository")...)
	tag, _, _ := unstructured.NestedString(spec, append(append([]string(nil), path...), "tag")...)
	if repo == "" || tag == "" {
		return "", fmt.Errorf("spec.%s names no repository and tag", strings.Join(path, "."))
	}
	return repo + ":" + tag, nil
}

// deploymentPending says how far one Deployment is from having rolled out to image, or ""
// once it has.
func deploymentPending(ctx context.Context, kube kubernetes.Interface, name, image string) (string, error) {
	d, err := kube.AppsV1().Deployments(naming.NamespaceKcp).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("%s/%s does not exist yet", naming.NamespaceKcp, name), nil
	}
	if err != nil {
		return "", err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	counts := fmt.Sprintf("%s/%s: %d of %d replicas updated, %d ready, %d available", naming.NamespaceKcp, name, st.UpdatedReplicas, want, st.ReadyReplicas, st.AvailableReplicas)
	var stale []string
	current := false
	for _, c := range d.Spec.Template.Spec.Containers {
		repo, _, _ := strings.Cut(image, ":")
		switch {
		case c.Image == image:
			current = true
		case strings.HasPrefix(c.Image, repo+":"):
			stale = append(stale, fmt.Sprintf("container %s runs %s, not %s", c.Name, c.Image, image))
		}
	}
	switch {
	case len(stale) > 0:
		return counts + "; the operator has not moved it to the new image (" + strings.Join(stale, ", ") + ")", nil
	case !current:
		return counts + "; no container runs " + image, nil
	case st.ObservedGeneration < d.Generation:
		return counts + fmt.Sprintf("; generation %d not observed yet", d.Generation), nil
	case st.UpdatedReplicas != want || st.ReadyReplicas != want || st.AvailableReplicas != want:
		return counts, nil
	case st.Replicas != want:
		return counts + fmt.Sprintf("; %d pods in all, old ones still terminating", st.Replicas), nil
	}
	old, err := oldReplicaSetPods(ctx, kube, d)
	if err != nil {
		return "", err
	}
	if old != "" {
		return counts + "; " + old, nil
	}
	return "", nil
}

// oldReplicaSetPods names the ReplicaSets of d, other than its current one, that still
// have pods.
func oldReplicaSetPods(ctx context.Context, kube kubernetes.Interface, d *appsv1.Deployment) (string, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return "", err
	}
	list, err := kube.AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return "", err
	}
	revision := d.Annotations["deployment.kubernetes.io/revision"]
	var old []string
	for _, rs := range list.Items {
		if !metav1.IsControlledBy(&rs, d) || rs.Annotations["deployment.kubernetes.io/revision"] == revision || rs.Status.Replicas == 0 {
			continue
		}
		old = append(old, fmt.Sprintf("old ReplicaSet %s still has %d pods", rs.Name, rs.Status.Replicas))
	}
	return strings.Join(old, ", "), nil
}
