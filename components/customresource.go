package components

import (
	"encoding/json"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/naming"
)

// objectMeta identifies a custom resource of another project's API.
type objectMeta struct {
	APIVersion  string
	Kind        string
	Name        string
	Namespace   string // empty for cluster-scoped objects
	Annotations map[string]string
}

// newUntyped declares a custom resource from a typed spec (edgeapi, kcpapi structs):
// the spec is turned into the plain map the provider takes in this one place.
func newUntyped(ctx *pulumi.Context, name string, meta objectMeta, spec any, opts ...pulumi.ResourceOption) (*apiextensions.CustomResource, error) {
	untyped, err := toUntyped(spec)
	if err != nil {
		return nil, err
	}
	metadata := &metav1.ObjectMetaArgs{Name: pulumi.String(meta.Name)}
	if meta.Namespace != "" {
		metadata.Namespace = pulumi.String(meta.Namespace)
	}
	if len(meta.Annotations) > 0 {
		metadata.Annotations = pulumi.ToStringMap(meta.Annotations)
	}
	return apiextensions.NewCustomResource(ctx, name, &apiextensions.CustomResourceArgs{
		ApiVersion:  pulumi.String(meta.APIVersion),
		Kind:        pulumi.String(meta.Kind),
		Metadata:    metadata,
		OtherFields: kubernetes.UntypedArgs{"spec": untyped},
	}, opts...)
}

// toUntyped turns a typed spec into a plain map through its json names.
func toUntyped(spec any) (map[string]any, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	err = json.Unmarshal(raw, &out)
	return out, err
}

// waitForAvailable is what the provider awaits on a kcp object: the operator's
// Available condition.
const waitForAvailable = "condition=Available"

// kcpObjectTimeoutSeconds bounds every wait for a kcp object's Available condition:
// the operator needs cert-manager to issue every certificate and the pods to roll out.
const kcpObjectTimeoutSeconds = "1800"

// newKcpObject declares one operator.kcp.io object in kcp-system from a typed spec. It
// carries pulumi.com/waitFor so that the provider reports it created only when the
// operator marks it Available, and dependents start after that.
func newKcpObject(ctx *pulumi.Context, name, kind, objectName string, spec any, annotations map[string]string, opts ...pulumi.ResourceOption) (*apiextensions.CustomResource, error) {
	all := map[string]string{
		naming.AnnotationWaitFor:        waitForAvailable,
		naming.AnnotationTimeoutSeconds: kcpObjectTimeoutSeconds,
	}
	for k, v := range annotations {
		all[k] = v
	}
	return newUntyped(ctx, name, objectMeta{APIVersion: kcpapi.APIVersion, Kind: kind, Name: objectName, Namespace: naming.NamespaceKcp, Annotations: all}, spec, opts...)
}
