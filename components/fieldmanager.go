package components

import (
	"reflect"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"

	"github.com/railgrid/railgrid-kcp/naming"
)

// Why every Kubernetes object this program writes is applied by one server-side apply
// field manager, naming.FieldManager: without it the Kubernetes provider picks a random
// manager (pulumi-kubernetes-<random>) for each create and keeps it in the state. A
// create that reached the API server but never reached the state (an up interrupted or
// killed while the create was in flight) is then re-applied on the next up by a second
// random manager. For a list the API server treats as one value
// (x-kubernetes-list-type: atomic, such as a TLSRoute's parentRefs and rules) and fills
// with defaults, the live value is the defaulted list and the new manager's is not, so
// the apply fails with a field conflict (TestReapplyAfterAnInterruptedCreate shows it
// against the real kube-apiserver). One manager that never changes re-applies its own
// fields and cannot conflict with itself. One object has a manager of its own, the hub's
// Secret (hubkubeconfig.go says why).

// forcedApplyExcluded lists the objects another writer shares, whose conflicts must
// surface rather than be forced: the kcp-operator's own API (it writes those objects'
// status and finalizers) and the patches of kubeadm's CoreDNS, which force only the
// field they must take (dns_kind.go).
func forcedApplyExcluded(resourceType string) bool {
	return strings.Contains(resourceType, "operator.kcp.io") || strings.HasSuffix(resourceType, "Patch")
}

// withStableFieldManager is a transformation for every resource of the stack: it sets
// naming.FieldManager on each Kubernetes object, and patchForce on the objects this
// program alone writes, so that a stack created with the provider's random managers
// moves its fields over to naming.FieldManager on its first up (docs/operations.md,
// "After a killed or interrupted up").
func withStableFieldManager(args *pulumi.ResourceTransformationArgs) *pulumi.ResourceTransformationResult {
	add := map[string]string{naming.AnnotationPatchFieldManager: naming.FieldManager}
	if !forcedApplyExcluded(args.Type) {
		add[naming.AnnotationPatchForce] = "true"
	}
	// A custom resource reaches the engine as an untyped map with its metadata inside.
	if untyped, ok := args.Props.(kubernetes.UntypedArgs); ok {
		meta, ok := withMetadataAnnotations(untyped["metadata"], add)
		if !ok {
			return nil
		}
		copied := kubernetes.UntypedArgs{}
		for k, v := range untyped {
			copied[k] = v
		}
		copied["metadata"] = meta
		return &pulumi.ResourceTransformationResult{Props: copied, Opts: args.Opts}
	}
	props := reflect.ValueOf(args.Props)
	if !props.IsValid() || props.Kind() != reflect.Pointer || props.IsNil() || props.Elem().Kind() != reflect.Struct {
		return nil
	}
	field := props.Elem().FieldByName("Metadata")
	if !field.IsValid() || field.Kind() != reflect.Interface || field.IsNil() {
		return nil
	}
	meta, ok := withMetadataAnnotations(field.Interface(), add)
	if !ok {
		return nil
	}
	copied := reflect.New(props.Elem().Type())
	copied.Elem().Set(props.Elem())
	copied.Elem().FieldByName("Metadata").Set(reflect.ValueOf(meta))
	return &pulumi.ResourceTransformationResult{Props: copied.Interface().(pulumi.Input), Opts: args.Opts}
}

// withMetadataAnnotations returns a copy of an object's metadata with annotations added;
// false for metadata it does not know (the program declares only these two kinds).
func withMetadataAnnotations(metadata any, add map[string]string) (any, bool) {
	switch m := metadata.(type) {
	case *metav1.ObjectMetaArgs:
		c := *m
		c.Annotations = withAnnotations(c.Annotations, add)
		return &c, true
	case *metav1.ObjectMetaPatchArgs:
		c := *m
		c.Annotations = withAnnotations(c.Annotations, add)
		return &c, true
	}
	return nil, false
}

// withAnnotations adds annotations that the object does not set itself.
func withAnnotations(annotations pulumi.StringMapInput, add map[string]string) pulumi.StringMapInput {
	merge := func(have map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range add {
			out[k] = v
		}
		for k, v := range have {
			out[k] = v
		}
		return out
	}
	switch a := annotations.(type) {
	case nil:
		return pulumi.ToStringMap(merge(nil))
	case pulumi.StringMap:
		out := pulumi.StringMap{}
		for k, v := range add {
			out[k] = pulumi.String(v)
		}
		for k, v := range a {
			out[k] = v
		}
		return out
	default:
		return a.ToStringMapOutput().ApplyT(merge).(pulumi.StringMapOutput)
	}
}
