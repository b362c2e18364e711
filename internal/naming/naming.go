// Package naming holds the names this program derives from a stack config, in one place
// that both the config (which checks them for collisions before anything is declared)
// and the components (which declare the objects) use. It imports nothing of this
// repository, so neither package depends on the other through it.
//
// The operator's own naming rules are mirrored here (kcp-operator
// internal/resources/resources.go: GetRootShardDeploymentName "<name>-kcp",
// GetRootShardProxyDeploymentName "<name>-proxy", GetShardDeploymentName
// "<name>-shard-kcp", and the FrontProxy's "<name>-front-proxy"), so that owned
// Services, waits and checks select exactly what the operator creates.
package naming

const (
	// Namespaces the program declares.
	NamespaceEtcd     = "etcd"
	NamespaceOperator = "kcp-operator"
	NamespaceKcp      = "kcp-system"

	// Namespaces of the add-ons the kind stack installs (Helm creates them).
	NamespaceCertManager  = "cert-manager"
	NamespaceEnvoyGateway = "envoy-gateway-system"

	// RootShardName is the name of the RootShard object (the design document's "root").
	RootShardName = "root"
	// FrontProxyName is the name of the FrontProxy object.
	FrontProxyName = "frontproxy"
)

// RootShardDeployment is the Deployment (and Service) the operator creates for a RootShard.
func RootShardDeployment(name string) string { return name + "-kcp" }

// RootShardProxyDeployment is the Deployment (and Service) of a RootShard's proxy.
func RootShardProxyDeployment(name string) string { return name + "-proxy" }

// ShardDeployment is the Deployment (and Service) the operator creates for a Shard.
func ShardDeployment(name string) string { return name + "-shard-kcp" }

// FrontProxyDeployment is the Deployment (and Service) the operator creates for a FrontProxy.
func FrontProxyDeployment(name string) string { return name + "-front-proxy" }

// OwnedServiceName is the Service this program owns in front of a kcp component (the
// front proxy, the root shard or a shard), with a fixed ClusterIP.
func OwnedServiceName(component string) string { return "kcp-" + component }

// EdgeRouteName is the edge route (TLSRoute on kind, HTTPRoute on GKE) of a component.
func EdgeRouteName(component string) string { return "kcp-" + component }

// EdgeListenerName is the GKE Gateway listener of a component.
func EdgeListenerName(component string) string { return "https-" + component }

// EtcdName is the StatefulSet and client Service of a shard's etcd.
func EtcdName(shard string) string { return "etcd-" + shard }

// EtcdHeadlessService gives each etcd member a stable DNS name.
func EtcdHeadlessService(shard string) string { return EtcdName(shard) + "-headless" }
