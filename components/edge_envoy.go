package components

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"

	"github.com/railgrid/railgrid-kcp/config"
)

const (
	GatewayAPIGroup   = "gateway.networking.k8s.io"
	GatewayAPIVersion = GatewayAPIGroup + "/v1"
	EnvoyAPIVersion   = "gateway.envoyproxy.io/v1alpha1"
	EdgeGatewayName   = "kcp-edge"
	// EdgeListenerPort is the port the edge listens on for every kcp hostname.
	EdgeListenerPort = 443
)

// envoyGatewayEdge is the kind edge: Envoy Gateway with TLS passthrough, one TLSRoute
// per hostname (SNI), so client certificates reach kcp; the Envoy Service is a NodePort
// that the kind cluster maps to the host. Traffic policies keep watches open for the
// configured timeout.
type envoyGatewayEdge struct {
	cfg       *config.Config
	dependsOn []pulumi.Resource
}

func (e envoyGatewayEdge) DeclareRoutes(ctx *pulumi.Context, name string, backends []ExposedBackend, opts ...pulumi.ResourceOption) (pulumi.StringOutput, error) {
	timeout := fmt.Sprintf("%ds", int(e.cfg.LoadBalancerTimeout().Seconds()))
	after := func(deps ...pulumi.Resource) []pulumi.ResourceOption {
		return append(append([]pulumi.ResourceOption{}, opts...), pulumi.DependsOn(append(append([]pulumi.Resource{}, e.dependsOn...), deps...)))
	}
	proxy, err := newUntyped(ctx, name+"-envoyproxy", EnvoyAPIVersion, "EnvoyProxy", EdgeGatewayName, NamespaceEnvoyGateway, map[string]any{
		"provider": map[string]any{
			"type": "Kubernetes",
			"kubernetes": map[string]any{"envoyService": map[string]any{
				"type": "NodePort",
				"patch": map[string]any{"type": "StrategicMerge", "value": map[string]any{"spec": map[string]any{
					"ports": []any{map[string]any{"port": EdgeListenerPort, "nodePort": e.cfg.Kind.GatewayNodePort}},
				}}},
			}},
		},
	}, after()...)
	if err != nil {
		return pulumi.StringOutput{}, err
	}
	class, err := newUntyped(ctx, name+"-gatewayclass", GatewayAPIVersion, "GatewayClass", EdgeGatewayName, "", map[string]any{
		"controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
		"parametersRef": map[string]any{
			"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy", "name": EdgeGatewayName, "namespace": NamespaceEnvoyGateway,
		},
	}, after(proxy)...)
	if err != nil {
		return pulumi.StringOutput{}, err
	}
	var serviceDeps []pulumi.Resource
	for _, b := range backends {
		serviceDeps = append(serviceDeps, b.DependsOn...)
	}
	gateway, err := newUntyped(ctx, name+"-gateway", GatewayAPIVersion, "Gateway", EdgeGatewayName, NamespaceKcp, map[string]any{
		"gatewayClassName": EdgeGatewayName,
		// No listener hostname: a wildcard would not match the apex, and SNI routing is
		// done by the TLSRoutes.
		"listeners": []any{map[string]any{
			"name": "tls-passthrough", "protocol": "TLS", "port": EdgeListenerPort,
			"tls":           map[string]any{"mode": "Passthrough"},
			"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "Same"}},
		}},
	}, after(append([]pulumi.Resource{class}, serviceDeps...)...)...)
	if err != nil {
		return pulumi.StringOutput{}, err
	}
	var routeRefs []any
	for _, b := range backends {
		routeName := "kcp-" + b.Name
		if _, err := newUntyped(ctx, name+"-route-"+b.Name, GatewayAPIVersion, "TLSRoute", routeName, NamespaceKcp, map[string]any{
			"parentRefs": []any{map[string]any{"name": EdgeGatewayName}},
			"hostnames":  []any{b.Hostname},
			"rules":      []any{map[string]any{"backendRefs": []any{map[string]any{"name": b.Service, "port": KcpPort}}}},
		}, after(append([]pulumi.Resource{gateway}, b.DependsOn...)...)...); err != nil {
			return pulumi.StringOutput{}, err
		}
		routeRefs = append(routeRefs, map[string]any{"group": GatewayAPIGroup, "kind": "TLSRoute", "name": routeName})
	}
	// Passthrough connections are TCP to Envoy: the TCP idle timeout is what would close
	// a quiet watch. The HTTP timeouts apply if a listener ever terminates TLS.
	if _, err := newUntyped(ctx, name+"-client-policy", EnvoyAPIVersion, "ClientTrafficPolicy", EdgeGatewayName, NamespaceKcp, map[string]any{
		"targetRefs": []any{map[string]any{"group": GatewayAPIGroup, "kind": "Gateway", "name": EdgeGatewayName}},
		"timeout": map[string]any{
			"tcp":  map[string]any{"idleTimeout": timeout},
			"http": map[string]any{"idleTimeout": timeout, "streamIdleTimeout": timeout},
		},
	}, after(gateway)...); err != nil {
		return pulumi.StringOutput{}, err
	}
	if _, err := newUntyped(ctx, name+"-backend-policy", EnvoyAPIVersion, "BackendTrafficPolicy", EdgeGatewayName, NamespaceKcp, map[string]any{
		"targetRefs": routeRefs,
		"timeout": map[string]any{
			"tcp":  map[string]any{"connectTimeout": "10s"},
			"http": map[string]any{"requestTimeout": timeout, "connectionIdleTimeout": timeout, "streamIdleTimeout": timeout},
		},
	}, after(gateway)...); err != nil {
		return pulumi.StringOutput{}, err
	}
	return pulumi.Sprintf("NodePort %d on the kind node (see kind/cluster.yaml for the host port)", e.cfg.Kind.GatewayNodePort), nil
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

// newUntyped declares a custom resource of another project's API (Gateway API, Envoy
// Gateway, cert-manager, GKE) from a plain spec.
func newUntyped(ctx *pulumi.Context, name, apiVersion, kind, objectName, namespace string, spec map[string]any, opts ...pulumi.ResourceOption) (*apiextensions.CustomResource, error) {
	return newAnnotatedUntyped(ctx, name, apiVersion, kind, objectName, namespace, nil, spec, opts...)
}

// newAnnotatedUntyped is newUntyped with annotations on the object.
func newAnnotatedUntyped(ctx *pulumi.Context, name, apiVersion, kind, objectName, namespace string, annotations map[string]string, spec map[string]any, opts ...pulumi.ResourceOption) (*apiextensions.CustomResource, error) {
	meta := &metav1.ObjectMetaArgs{Name: pulumi.String(objectName)}
	if namespace != "" {
		meta.Namespace = pulumi.String(namespace)
	}
	if len(annotations) > 0 {
		meta.Annotations = pulumi.ToStringMap(annotations)
	}
	return apiextensions.NewCustomResource(ctx, name, &apiextensions.CustomResourceArgs{
		ApiVersion:  pulumi.String(apiVersion),
		Kind:        pulumi.String(kind),
		Metadata:    meta,
		OtherFields: kubernetes.UntypedArgs{"spec": spec},
	}, opts...)
}
