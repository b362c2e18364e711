package components

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/config"
)

const (
	GKEGatewayAPIVersion = "networking.gke.io/v1"
	edgeCertificateName  = "kcp-edge-tls"
)

// gkeGatewayEdge is the GKE edge: a GKE Gateway with an HTTPS listener per hostname,
// HTTPRoutes to the owned Services (appProtocol HTTPS, so the load balancer re-encrypts),
// a GCPBackendPolicy per Service with the long timeout (the load balancer's 30 s default
// would cut watches) and a HealthCheckPolicy on /readyz (kcp answers / with 401/403).
// TLS terminates at the load balancer: OIDC users come this way; clients with
// certificates stay inside the cluster through the split horizon.
type gkeGatewayEdge struct{ cfg *config.Config }

func (e gkeGatewayEdge) DeclareRoutes(ctx *pulumi.Context, name string, backends []ExposedBackend, opts ...pulumi.ResourceOption) (pulumi.StringOutput, error) {
	gw := e.cfg.GKE.Gateway
	timeoutSec := int(e.cfg.LoadBalancerTimeout().Seconds())
	certificate := gw.CertificateSecret
	annotations := map[string]string{}
	if gw.CertManagerClusterIssuer != "" {
		// cert-manager's gateway-shim issues the listener certificate into this Secret.
		certificate = edgeCertificateName
		annotations["cert-manager.io/cluster-issuer"] = gw.CertManagerClusterIssuer
	}
	var listeners []any
	var serviceDeps []pulumi.Resource
	for _, b := range backends {
		listeners = append(listeners, map[string]any{
			"name": "https-" + b.Name, "protocol": "HTTPS", "port": EdgeListenerPort, "hostname": b.Hostname,
			"tls":           map[string]any{"mode": "Terminate", "certificateRefs": []any{map[string]any{"kind": "Secret", "name": certificate}}},
			"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "Same"}},
		})
		serviceDeps = append(serviceDeps, b.DependsOn...)
	}
	gateway, err := newAnnotatedUntyped(ctx, name+"-gateway", GatewayAPIVersion, "Gateway", EdgeGatewayName, NamespaceKcp, annotations, map[string]any{
		"gatewayClassName": gw.ClassName,
		"listeners":        listeners,
	}, append(opts, pulumi.DependsOn(serviceDeps))...)
	if err != nil {
		return pulumi.StringOutput{}, err
	}
	for _, b := range backends {
		deps := pulumi.DependsOn(append([]pulumi.Resource{gateway}, b.DependsOn...))
		if _, err := newUntyped(ctx, name+"-route-"+b.Name, GatewayAPIVersion, "HTTPRoute", "kcp-"+b.Name, NamespaceKcp, map[string]any{
			"parentRefs": []any{map[string]any{"name": EdgeGatewayName, "sectionName": "https-" + b.Name}},
			"hostnames":  []any{b.Hostname},
			"rules":      []any{map[string]any{"backendRefs": []any{map[string]any{"name": b.Service, "port": KcpPort}}}},
		}, append(opts, deps)...); err != nil {
			return pulumi.StringOutput{}, err
		}
		target := map[string]any{"group": "", "kind": "Service", "name": b.Service}
		if _, err := newUntyped(ctx, name+"-backend-policy-"+b.Name, GKEGatewayAPIVersion, "GCPBackendPolicy", b.Service, NamespaceKcp, map[string]any{
			"targetRef": target,
			"default":   map[string]any{"timeoutSec": timeoutSec},
		}, append(opts, pulumi.DependsOn(b.DependsOn))...); err != nil {
			return pulumi.StringOutput{}, err
		}
		if _, err := newUntyped(ctx, name+"-health-check-"+b.Name, GKEGatewayAPIVersion, "HealthCheckPolicy", b.Service, NamespaceKcp, map[string]any{
			"targetRef": target,
			"default": map[string]any{
				"checkIntervalSec": 15,
				"timeoutSec":       5,
				"config": map[string]any{
					"type":             "HTTPS",
					"httpsHealthCheck": map[string]any{"requestPath": "/readyz", "port": KcpPort},
				},
			},
		}, append(opts, pulumi.DependsOn(b.DependsOn))...); err != nil {
			return pulumi.StringOutput{}, err
		}
	}
	return gatewayAddress(gateway), nil
}
