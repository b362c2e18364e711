package components

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/components/edgeapi"
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

const (
	// EdgeListenerPort is the port the edge listens on for every kcp hostname.
	EdgeListenerPort = 443
	// KindGatewayWaitFor is what the provider awaits on the kind Gateway: Envoy Gateway
	// has programmed it (its Envoy proxy runs and the Gateway has an address).
	KindGatewayWaitFor = "condition=Programmed"
)

// envoyGatewayEdge is the kind edge: Envoy Gateway with TLS passthrough, one TLSRoute
// per hostname (SNI), so client certificates reach kcp; the Envoy Service is a NodePort
// that the kind cluster maps to the host. Traffic policies keep watches open for the
// configured timeout.
type envoyGatewayEdge struct {
	cfg       *config.Config
	dependsOn []pulumi.Resource // the Envoy Gateway release, when the stack installs it
}

func (e envoyGatewayEdge) DeclareRoutes(ctx *pulumi.Context, name string, routes []EdgeRoute, opts ...pulumi.ResourceOption) (pulumi.StringOutput, error) {
	timeout := fmt.Sprintf("%ds", int(e.cfg.LoadBalancerTimeout().Seconds()))
	after := func(deps ...pulumi.Resource) []pulumi.ResourceOption {
		all := append(append([]pulumi.Resource{}, e.dependsOn...), deps...)
		return append(append([]pulumi.ResourceOption{}, opts...), pulumi.DependsOn(all))
	}
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
	envoyProxy.Provider.Kubernetes.EnvoyService.Patch.Value.Spec.Ports = []edgeapi.NodePort{{Port: EdgeListenerPort, NodePort: e.cfg.Kind.GatewayNodePort}}
	proxy, err := newUntyped(ctx, name+"-envoyproxy",
		objectMeta{APIVersion: edgeapi.EnvoyAPIVersion, Kind: "EnvoyProxy", Name: naming.EdgeGatewayName, Namespace: naming.NamespaceEnvoyGateway},
		envoyProxy, after()...)
	if err != nil {
		return pulumi.StringOutput{}, err
	}
	class, err := newUntyped(ctx, name+"-gatewayclass",
		objectMeta{APIVersion: edgeapi.GatewayAPIVersion, Kind: "GatewayClass", Name: naming.EdgeGatewayName},
		edgeapi.GatewayClassSpec{
			ControllerName: "gateway.envoyproxy.io/gatewayclass-controller",
			ParametersRef:  &edgeapi.ParametersRef{Group: edgeapi.EnvoyGroup, Kind: "EnvoyProxy", Name: naming.EdgeGatewayName, Namespace: naming.NamespaceEnvoyGateway},
		}, after(proxy)...)
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
			Annotations: map[string]string{AnnotationWaitFor: KindGatewayWaitFor}},
		edgeapi.GatewaySpec{
			GatewayClassName: naming.EdgeGatewayName,
			// No listener hostname: a wildcard would not match the apex; the TLSRoutes
			// route by SNI.
			Listeners: []edgeapi.Listener{{
				Name: "tls-passthrough", Protocol: "TLS", Port: EdgeListenerPort,
				TLS:           &edgeapi.ListenerTLS{Mode: "Passthrough"},
				AllowedRoutes: &edgeapi.AllowedRoutes{Namespaces: edgeapi.RouteNamespaces{From: "Same"}},
			}},
		}, after(append([]pulumi.Resource{class}, serviceDeps...)...)...)
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
			}, after(append([]pulumi.Resource{gateway}, route.DependsOn...)...)...); err != nil {
			return pulumi.StringOutput{}, err
		}
		routeRefs = append(routeRefs, edgeapi.PolicyTargetRef{Group: edgeapi.GatewayGroup, Kind: "TLSRoute", Name: routeName})
	}
	// Passthrough connections are TCP to Envoy: the TCP idle timeout is what would close
	// a quiet watch. The HTTP timeouts apply if a listener ever terminates TLS.
	if _, err := newUntyped(ctx, name+"-client-policy",
		objectMeta{APIVersion: edgeapi.EnvoyAPIVersion, Kind: "ClientTrafficPolicy", Name: naming.EdgeGatewayName, Namespace: naming.NamespaceKcp},
		edgeapi.ClientTrafficPolicySpec{
			TargetRefs: []edgeapi.PolicyTargetRef{{Group: edgeapi.GatewayGroup, Kind: "Gateway", Name: naming.EdgeGatewayName}},
			Timeout: edgeapi.ClientTimeout{
				TCP:  edgeapi.ClientTCPTimeout{IdleTimeout: timeout},
				HTTP: edgeapi.ClientHTTPTimeout{IdleTimeout: timeout, StreamIdleTimeout: timeout},
			},
		}, after(gateway)...); err != nil {
		return pulumi.StringOutput{}, err
	}
	if _, err := newUntyped(ctx, name+"-backend-policy",
		objectMeta{APIVersion: edgeapi.EnvoyAPIVersion, Kind: "BackendTrafficPolicy", Name: naming.EdgeGatewayName, Namespace: naming.NamespaceKcp},
		edgeapi.BackendTrafficPolicySpec{
			TargetRefs: routeRefs,
			Timeout: edgeapi.BackendTimeout{
				TCP:  edgeapi.BackendTCPTimeout{ConnectTimeout: "10s"},
				HTTP: edgeapi.BackendHTTPTimeout{RequestTimeout: timeout, ConnectionIdleTimeout: timeout, StreamIdleTimeout: timeout},
			},
		}, after(gateway)...); err != nil {
		return pulumi.StringOutput{}, err
	}
	return pulumi.Sprintf("NodePort %d on the kind node (kind/cluster.yaml maps it to the host)", e.cfg.Kind.GatewayNodePort), nil
}
