package components

import (
	"encoding/json"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
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

// gatewayAddress is the first address a Gateway reports in its status, once programmed.
func gatewayAddress(gateway *apiextensions.CustomResource) pulumi.StringOutput {
	return gateway.OtherFields.ApplyT(func(fields map[string]any) string {
		status, _ := fields["status"].(map[string]any)
		addresses, _ := status["addresses"].([]any)
		if len(addresses) == 0 {
			return ""
		}
		first, _ := addresses[0].(map[string]any)
		value, _ := first["value"].(string)
		return value
	}).(pulumi.StringOutput)
}
