// Package edgeapi holds the parts of the Gateway API, Envoy Gateway and GKE Gateway
// APIs that the edge writes, as small Go structs carrying each CRD's json names.
package edgeapi

const (
	GatewayGroup      = "gateway.networking.k8s.io"
	GatewayAPIVersion = GatewayGroup + "/v1"
	EnvoyGroup        = "gateway.envoyproxy.io"
	EnvoyAPIVersion   = EnvoyGroup + "/v1alpha1"
	GKEAPIVersion     = "networking.gke.io/v1"
)

// GatewayClassSpec names the controller and its parameters.
type GatewayClassSpec struct {
	ControllerName string         `json:"controllerName"`
	ParametersRef  *ParametersRef `json:"parametersRef,omitempty"`
}

// ParametersRef points a GatewayClass at its implementation-specific parameters.
type ParametersRef struct {
	Group     string `json:"group"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// GatewaySpec is a Gateway's class and listeners.
type GatewaySpec struct {
	GatewayClassName string     `json:"gatewayClassName"`
	Listeners        []Listener `json:"listeners"`
}

// Listener is one port, protocol and (optionally) hostname of a Gateway.
type Listener struct {
	Name          string         `json:"name"`
	Protocol      string         `json:"protocol"`
	Port          int            `json:"port"`
	Hostname      string         `json:"hostname,omitempty"`
	TLS           *ListenerTLS   `json:"tls,omitempty"`
	AllowedRoutes *AllowedRoutes `json:"allowedRoutes,omitempty"`
}

// ListenerTLS says whether the listener terminates TLS or passes it through.
type ListenerTLS struct {
	Mode            string           `json:"mode"`
	CertificateRefs []CertificateRef `json:"certificateRefs,omitempty"`
}

// CertificateRef names the Secret of a terminating listener.
type CertificateRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// AllowedRoutes restricts which namespaces may attach routes.
type AllowedRoutes struct {
	Namespaces RouteNamespaces `json:"namespaces"`
}

// RouteNamespaces is "Same", "All" or "Selector".
type RouteNamespaces struct {
	From string `json:"from"`
}

// RouteSpec is the common shape of TLSRoute and HTTPRoute as the edge uses them: one
// hostname to one backend Service.
type RouteSpec struct {
	ParentRefs []ParentRef `json:"parentRefs"`
	Hostnames  []string    `json:"hostnames"`
	Rules      []RouteRule `json:"rules"`
}

// ParentRef attaches a route to a Gateway (and optionally one listener).
type ParentRef struct {
	Name        string `json:"name"`
	SectionName string `json:"sectionName,omitempty"`
}

// RouteRule forwards to backends.
type RouteRule struct {
	BackendRefs []BackendRef `json:"backendRefs"`
}

// BackendRef is a Service and port.
type BackendRef struct {
	Name string `json:"name"`
	Port int    `json:"port"`
}

// PolicyTargetRef names what an Envoy Gateway policy applies to.
type PolicyTargetRef struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

// ClientTrafficPolicySpec sets Envoy's downstream (client side) timeouts.
type ClientTrafficPolicySpec struct {
	TargetRefs []PolicyTargetRef `json:"targetRefs"`
	Timeout    ClientTimeout     `json:"timeout"`
}

// ClientTimeout holds the TCP and HTTP idle timeouts of the listener.
type ClientTimeout struct {
	TCP  ClientTCPTimeout  `json:"tcp"`
	HTTP ClientHTTPTimeout `json:"http"`
}

// ClientTCPTimeout closes a connection idle for this long.
type ClientTCPTimeout struct {
	IdleTimeout string `json:"idleTimeout"`
}

// ClientHTTPTimeout closes an idle HTTP connection or stream after this long.
type ClientHTTPTimeout struct {
	IdleTimeout       string `json:"idleTimeout"`
	StreamIdleTimeout string `json:"streamIdleTimeout"`
}

// BackendTrafficPolicySpec sets Envoy's upstream (backend side) timeouts.
type BackendTrafficPolicySpec struct {
	TargetRefs []PolicyTargetRef `json:"targetRefs"`
	Timeout    BackendTimeout    `json:"timeout"`
}

// BackendTimeout holds the connect and request timeouts towards the backends.
type BackendTimeout struct {
	TCP  BackendTCPTimeout  `json:"tcp"`
	HTTP BackendHTTPTimeout `json:"http"`
}

// BackendTCPTimeout bounds connection establishment.
type BackendTCPTimeout struct {
	ConnectTimeout string `json:"connectTimeout"`
}

// BackendHTTPTimeout bounds a request, an idle connection and an idle stream.
type BackendHTTPTimeout struct {
	RequestTimeout        string `json:"requestTimeout"`
	ConnectionIdleTimeout string `json:"connectionIdleTimeout"`
	StreamIdleTimeout     string `json:"streamIdleTimeout"`
}

// EnvoyProxySpec configures the Envoy deployment Envoy Gateway runs.
type EnvoyProxySpec struct {
	Provider EnvoyProxyProvider `json:"provider"`
}

// EnvoyProxyProvider is the Kubernetes provider of Envoy.
type EnvoyProxyProvider struct {
	Type       string               `json:"type"`
	Kubernetes EnvoyProxyKubernetes `json:"kubernetes"`
}

// EnvoyProxyKubernetes shapes the Envoy Service.
type EnvoyProxyKubernetes struct {
	EnvoyService EnvoyService `json:"envoyService"`
}

// EnvoyService is the Service in front of Envoy, patched to a fixed NodePort.
type EnvoyService struct {
	Type                  string        `json:"type"`
	ExternalTrafficPolicy string        `json:"externalTrafficPolicy,omitempty"`
	Patch                 *ServicePatch `json:"patch,omitempty"`
}

// ServicePatch is a strategic-merge patch of the Envoy Service.
type ServicePatch struct {
	Type  string            `json:"type"`
	Value ServicePatchValue `json:"value"`
}

// ServicePatchValue fixes the NodePort of one Service port.
type ServicePatchValue struct {
	Spec struct {
		Ports []NodePort `json:"ports"`
	} `json:"spec"`
}

// NodePort maps a Service port to a fixed node port.
type NodePort struct {
	Port     int `json:"port"`
	NodePort int `json:"nodePort"`
}

// ServiceTargetRef points a GKE policy at a Service.
type ServiceTargetRef struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

// GCPBackendPolicySpec sets the load balancer's backend-service options.
type GCPBackendPolicySpec struct {
	TargetRef ServiceTargetRef       `json:"targetRef"`
	Default   GCPBackendPolicyConfig `json:"default"`
}

// GCPBackendPolicyConfig: timeoutSec bounds a whole response, so it bounds watches.
type GCPBackendPolicyConfig struct {
	TimeoutSec int `json:"timeoutSec"`
}

// HealthCheckPolicySpec sets the load balancer's health check of a Service.
type HealthCheckPolicySpec struct {
	TargetRef ServiceTargetRef  `json:"targetRef"`
	Default   HealthCheckPolicy `json:"default"`
}

// HealthCheckPolicy is the check's cadence and probe.
type HealthCheckPolicy struct {
	CheckIntervalSec int               `json:"checkIntervalSec"`
	TimeoutSec       int               `json:"timeoutSec"`
	Config           HealthCheckConfig `json:"config"`
}

// HealthCheckConfig is an HTTPS probe.
type HealthCheckConfig struct {
	Type             string           `json:"type"`
	HTTPSHealthCheck HTTPSHealthCheck `json:"httpsHealthCheck"`
}

// HTTPSHealthCheck probes a path on a fixed port. The CRD's rules read
// portSpecification unconditionally, so it must be set.
type HTTPSHealthCheck struct {
	RequestPath       string `json:"requestPath"`
	PortSpecification string `json:"portSpecification"`
	Port              int    `json:"port"`
}
