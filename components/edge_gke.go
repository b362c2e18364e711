package components

import (
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"

	"github.com/railgrid/railgrid-kcp/components/edgeapi"
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// gkeGatewayWaitFor is what the provider awaits on the GKE Gateway: an address in its
// status.
const gkeGatewayWaitFor = "jsonpath={.status.addresses[0].value}"

// gkeGatewayEdge is the GKE edge: a GKE Gateway with an HTTPS listener per hostname,
// HTTPRoutes to the owned Services (appProtocol HTTPS, so the load balancer re-encrypts),
// a GCPBackendPolicy per Service with the long timeout (the load balancer's 30 s default
// would cut watches) and a HealthCheckPolicy on /readyz (kcp answers / with 401/403).
// TLS terminates at the load balancer: OIDC users come this way; clients with
// certificates stay inside the cluster through the split horizon.
type gkeGatewayEdge struct {
	gateway config.GKEGateway
	timeout time.Duration // loadBalancer.timeout
}

func (e gkeGatewayEdge) DeclareRoutes(ctx *pulumi.Context, name string, routes []EdgeRoute, opts ...pulumi.ResourceOption) (pulumi.StringOutput, error) {
	gw := e.gateway
	timeoutSec := int(e.timeout.Seconds())
	with := func(deps []pulumi.Resource) []pulumi.ResourceOption {
		return append(append([]pulumi.ResourceOption{}, opts...), pulumi.DependsOn(deps))
	}
	certificate := gw.CertificateSecret
	// Custom resources are not awaited unless they carry pulumi.com/waitFor: wait for the
	// load balancer's address, so that edgeAddress is set after the first up.
	annotations := map[string]string{naming.AnnotationWaitFor: gkeGatewayWaitFor}
	if gw.CertManagerClusterIssuer != "" {
		// cert-manager's gateway-shim issues the listener certificate into this Secret.
		certificate = naming.EdgeCertificateSecret
		annotations["cert-manager.io/cluster-issuer"] = gw.CertManagerClusterIssuer
	}
	var listeners []edgeapi.Listener
	var serviceDeps []pulumi.Resource
	for _, route := range routes {
		listeners = append(listeners, edgeapi.Listener{
			Name: naming.EdgeListenerName(route.Name), Protocol: "HTTPS", Port: naming.PublicHTTPSPort, Hostname: route.Hostname,
			TLS:           &edgeapi.ListenerTLS{Mode: "Terminate", CertificateRefs: []edgeapi.CertificateRef{{Kind: "Secret", Name: certificate}}},
			AllowedRoutes: &edgeapi.AllowedRoutes{Namespaces: edgeapi.RouteNamespaces{From: "Same"}},
		})
		serviceDeps = append(serviceDeps, route.DependsOn...)
	}
	gateway, err := newUntyped(ctx, name+"-gateway",
		objectMeta{APIVersion: edgeapi.GatewayAPIVersion, Kind: "Gateway", Name: naming.EdgeGatewayName, Namespace: naming.NamespaceKcp, Annotations: annotations},
		edgeapi.GatewaySpec{GatewayClassName: gw.ClassName, Listeners: listeners},
		append(with(serviceDeps), pulumi.Timeouts(&pulumi.CustomTimeouts{Create: "20m", Update: "20m"}))...)
	if err != nil {
		return pulumi.StringOutput{}, err
	}
	for _, route := range routes {
		if _, err := newUntyped(ctx, name+"-route-"+route.Name,
			objectMeta{APIVersion: edgeapi.GatewayAPIVersion, Kind: "HTTPRoute", Name: naming.EdgeRouteName(route.Name), Namespace: naming.NamespaceKcp},
			edgeapi.RouteSpec{
				ParentRefs: []edgeapi.ParentRef{{Name: naming.EdgeGatewayName, SectionName: naming.EdgeListenerName(route.Name)}},
				Hostnames:  []string{route.Hostname},
				Rules:      []edgeapi.RouteRule{{BackendRefs: []edgeapi.BackendRef{{Name: route.Service, Port: naming.KcpPort}}}},
			}, with(append([]pulumi.Resource{gateway}, route.DependsOn...))...); err != nil {
			return pulumi.StringOutput{}, err
		}
		target := edgeapi.ServiceTargetRef{Group: "", Kind: "Service", Name: route.Service}
		if _, err := newUntyped(ctx, name+"-backend-policy-"+route.Name,
			objectMeta{APIVersion: edgeapi.GKEAPIVersion, Kind: "GCPBackendPolicy", Name: route.Service, Namespace: naming.NamespaceKcp},
			edgeapi.GCPBackendPolicySpec{TargetRef: target, Default: edgeapi.GCPBackendPolicyConfig{TimeoutSec: timeoutSec}},
			with(route.DependsOn)...); err != nil {
			return pulumi.StringOutput{}, err
		}
		if _, err := newUntyped(ctx, name+"-health-check-"+route.Name,
			objectMeta{APIVersion: edgeapi.GKEAPIVersion, Kind: "HealthCheckPolicy", Name: route.Service, Namespace: naming.NamespaceKcp},
			edgeapi.HealthCheckPolicySpec{TargetRef: target, Default: edgeapi.HealthCheckPolicy{
				CheckIntervalSec: 15,
				TimeoutSec:       5,
				Config: edgeapi.HealthCheckConfig{
					Type:             "HTTPS",
					HTTPSHealthCheck: edgeapi.HTTPSHealthCheck{RequestPath: "/readyz", PortSpecification: "USE_FIXED_PORT", Port: naming.KcpPort},
				},
			}}, with(route.DependsOn)...); err != nil {
			return pulumi.StringOutput{}, err
		}
	}
	return gatewayAddress(gateway), nil
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
