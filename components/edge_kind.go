package components

import (
	"fmt"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"

	"github.com/railgrid/railgrid-kcp/components/edgeapi"
	"github.com/railgrid/railgrid-kcp/naming"
)

// kindGatewayWaitFor is what the provider awaits on the kind Gateway: Envoy Gateway has
// programmed it (its Envoy proxy runs and the Gateway has an address).
const kindGatewayWaitFor = "condition=Programmed"

// envoyGatewayEdge is the kind edge: Envoy Gateway with TLS passthrough, one TLSRoute
// per hostname (SNI), so client certificates reach kcp; the Envoy Service is a NodePort
// that the kind cluster maps to the host. Traffic policies keep watches open for the
// configured timeout.
type envoyGatewayEdge struct {
	timeout   time.Duration     // loadBalancer.timeout
	nodePort  int               // kind.gatewayNodePort
	dependsOn []pulumi.Resource // the Envoy Gateway release, when the stack installs it
}

// envoyGatewayDeclaration is one DeclareRoutes of the kind edge: every object waits for
// the Envoy Gateway release, and for what it names.
type envoyGatewayDeclaration struct {
	ctx  *pulumi.Context
	name string
	opts []pulumi.ResourceOption
	edge envoyGatewayEdge
}

func (d envoyGatewayDeclaration) after(deps ...pulumi.Resource) []pulumi.ResourceOption {
	all := append(append([]pulumi.Resource{}, d.edge.dependsOn...), deps...)
	return append(append([]pulumi.ResourceOption{}, d.opts...), pulumi.DependsOn(all))
}

func (e envoyGatewayEdge) DeclareRoutes(ctx *pulumi.Context, name string, routes []EdgeRoute, opts ...pulumi.ResourceOption) (pulumi.StringOutput, error) {
	d := envoyGatewayDeclaration{ctx: ctx, name: name, opts: opts, edge: e}
	class, err := d.gatewayClass()
	if err != nil {
		return pulumi.StringOutput{}, err
	}
	var serviceDeps []pulumi.Resource
	for _, route := range routes {
		serviceDeps = append(serviceDeps, route.DependsOn...)
	}
	// Custom resources are not awaited unless they carry pulumi.com/waitFor: the edge is
	// ready when Envoy Gateway says so, not when the object exists.
	gateway, err := newUntyped(ctx, name+"-gateway",
		objectMeta{APIVersion: edgeapi.GatewayAPIVersion, Kind: "Gateway", Name: naming.EdgeGatewayName, Namespace: naming.NamespaceKcp,
			Annotations: map[string]string{naming.AnnotationWaitFor: kindGatewayWaitFor}},
		edgeapi.GatewaySpec{
			GatewayClassName: naming.EdgeGatewayName,
			// No listener hostname: a wildcard would not match the apex; the TLSRoutes
			// route by SNI.
			Listeners: []edgeapi.Listener{{
				Name: "tls-passthrough", Protocol: "TLS", Port: naming.PublicHTTPSPort,
				TLS:           &edgeapi.ListenerTLS{Mode: "Passthrough"},
				AllowedRoutes: &edgeapi.AllowedRoutes{Namespaces: edgeapi.RouteNamespaces{From: "Same"}},
			}},
		}, d.after(append([]pulumi.Resource{class}, serviceDeps...)...)...)
	if err != nil {
		return pulumi.StringOutput{}, err
	}
	var routeRefs []edgeapi.PolicyTargetRef
	for _, route := range routes {
		routeName := naming.EdgeRouteName(route.Name)
		if _, err := newUntyped(ctx, name+"-route-"+route.Name,
			objectMeta{APIVersion: edgeapi.GatewayAPIVersion, Kind: "TLSRoute", Name: routeName, Namespace: naming.NamespaceKcp},
			edgeapi.RouteSpec{
				ParentRefs: []edgeapi.ParentRef{{Name: naming.EdgeGatewayName}},
				Hostnames:  []string{route.Hostname},
				Rules:      []edgeapi.RouteRule{{BackendRefs: []edgeapi.BackendRef{{Name: route.Service, Port: naming.KcpPort}}}},
			}, d.after(append([]pulumi.Resource{gateway}, route.DependsOn...)...)...); err != nil {
			return pulumi.StringOutput{}, err
		}
		routeRefs = append(routeRefs, edgeapi.PolicyTargetRef{Group: edgeapi.GatewayGroup, Kind: "TLSRoute", Name: routeName})
	}
	if err := d.trafficPolicies(gateway, routeRefs); err != nil {
		return pulumi.StringOutput{}, err
	}
	return pulumi.Sprintf("NodePort %d on the kind node (kind/cluster.yaml maps it to the host)", e.nodePort), nil
}

// gatewayClass declares the GatewayClass of the edge and the EnvoyProxy it is
// parametrized with: the Envoy Service as a NodePort on the port kind maps to the host.
func (d envoyGatewayDeclaration) gatewayClass() (*apiextensions.CustomResource, error) {
	envoyProxy := edgeapi.EnvoyProxySpec{Provider: edgeapi.EnvoyProxyProvider{
		Type: "Kubernetes",
		Kubernetes: edgeapi.EnvoyProxyKubernetes{EnvoyService: edgeapi.EnvoyService{
			Type: "NodePort",
			// Not Envoy Gateway's default Local: with Local, Envoy Gateway (v1.9) takes the
			// Gateway's address from the nodes with a Ready Envoy endpoint, and recomputes it
			// when the Envoy Deployment changes but not when the EndpointSlice does, so a
			// Deployment status that comes first leaves the Gateway AddressNotAssigned for
			// ever. With Cluster it takes every node's address, and TLS passthrough to kcp
			// needs no client source address.
			ExternalTrafficPolicy: "Cluster",
			Patch:                 &edgeapi.ServicePatch{Type: "StrategicMerge"},
		}},
	}}
	envoyProxy.Provider.Kubernetes.EnvoyService.Patch.Value.Spec.Ports = []edgeapi.NodePort{{Port: naming.PublicHTTPSPort, NodePort: d.edge.nodePort}}
	proxy, err := newUntyped(d.ctx, d.name+"-envoyproxy",
		objectMeta{APIVersion: edgeapi.EnvoyAPIVersion, Kind: "EnvoyProxy", Name: naming.EdgeGatewayName, Namespace: naming.NamespaceEnvoyGateway},
		envoyProxy, d.after()...)
	if err != nil {
		return nil, err
	}
	return newUntyped(d.ctx, d.name+"-gatewayclass",
		objectMeta{APIVersion: edgeapi.GatewayAPIVersion, Kind: "GatewayClass", Name: naming.EdgeGatewayName},
		edgeapi.GatewayClassSpec{
			ControllerName: "gateway.envoyproxy.io/gatewayclass-controller",
			ParametersRef:  &edgeapi.ParametersRef{Group: edgeapi.EnvoyGroup, Kind: "EnvoyProxy", Name: naming.EdgeGatewayName, Namespace: naming.NamespaceEnvoyGateway},
		}, d.after(proxy)...)
}

// trafficPolicies give the Gateway's connections and the routes' backends the edge
// timeout. Passthrough connections are TCP to Envoy: the TCP idle timeout is what would
// close a quiet watch. The HTTP timeouts apply if a listener ever terminates TLS.
func (d envoyGatewayDeclaration) trafficPolicies(gateway *apiextensions.CustomResource, routeRefs []edgeapi.PolicyTargetRef) error {
	timeout := fmt.Sprintf("%ds", int(d.edge.timeout.Seconds()))
	if _, err := newUntyped(d.ctx, d.name+"-client-policy",
		objectMeta{APIVersion: edgeapi.EnvoyAPIVersion, Kind: "ClientTrafficPolicy", Name: naming.EdgeGatewayName, Namespace: naming.NamespaceKcp},
		edgeapi.ClientTrafficPolicySpec{
			TargetRefs: []edgeapi.PolicyTargetRef{{Group: edgeapi.GatewayGroup, Kind: "Gateway", Name: naming.EdgeGatewayName}},
			Timeout: edgeapi.ClientTimeout{
				TCP:  edgeapi.ClientTCPTimeout{IdleTimeout: timeout},
				HTTP: edgeapi.ClientHTTPTimeout{IdleTimeout: timeout, StreamIdleTimeout: timeout},
			},
		}, d.after(gateway)...); err != nil {
		return err
	}
	_, err := newUntyped(d.ctx, d.name+"-backend-policy",
		objectMeta{APIVersion: edgeapi.EnvoyAPIVersion, Kind: "BackendTrafficPolicy", Name: naming.EdgeGatewayName, Namespace: naming.NamespaceKcp},
		edgeapi.BackendTrafficPolicySpec{
			TargetRefs: routeRefs,
			Timeout: edgeapi.BackendTimeout{
				TCP:  edgeapi.BackendTCPTimeout{ConnectTimeout: "10s"},
				HTTP: edgeapi.BackendHTTPTimeout{RequestTimeout: timeout, ConnectionIdleTimeout: timeout, StreamIdleTimeout: timeout},
			},
		}, d.after(gateway)...)
	return err
}
