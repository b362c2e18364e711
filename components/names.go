package components

import (
	"fmt"

	"github.com/railgrid/railgrid-kcp/internal/naming"
)

// Every name this program derives, in one place. The names a config's values change
// (shard names, the hub namespace) come from internal/naming, which the config also
// uses to refuse a config whose names collide before anything is declared.

const (
	// Namespaces.
	NamespaceEtcd     = naming.NamespaceEtcd
	NamespaceOperator = naming.NamespaceOperator
	NamespaceKcp      = naming.NamespaceKcp

	// The kcp-operator Helm release and the issuer it builds kcp's CAs from.
	OperatorReleaseName = "kcp-operator"
	SelfSignedIssuer    = "selfsigned"

	// kcp objects named by the design document.
	FrontProxyName = naming.FrontProxyName
	// KubeconfigName is the Kubeconfig object (and its Secret) of re-mint generation 0;
	// later generations use KubeconfigObjectName.
	KubeconfigName      = "kcp-kubeconfig-frontproxy"
	KubeconfigSecretKey = "kubeconfig"
	KubeconfigUsername  = "kcp-admin"
	// The front proxy drops system:masters; admin access through it needs this group.
	KubeconfigAdminGroup = "system:kcp:admin"

	// KcpPort is the port every kcp server (shards and front proxy) listens on.
	KcpPort = 6443
	// PublicHTTPSPort is the port of the advertised https://<hostname> URLs. Owned
	// Services serve it too, so the URL works inside the cluster through split horizon.
	PublicHTTPSPort = 443

	// ClusterDomain is the cluster's DNS domain (kcp-operator's default).
	ClusterDomain = "cluster.local"

	// Labels the operator puts on kcp pods; owned Services select on them.
	LabelComponent = "app.kubernetes.io/component"
	LabelInstance  = "app.kubernetes.io/instance"

	// Operator component label values.
	ComponentRootShard  = "rootshard"
	ComponentShard      = "shard"
	ComponentFrontProxy = "front-proxy"

	// Await annotations of the Pulumi Kubernetes provider.
	AnnotationWaitFor        = "pulumi.com/waitFor"
	AnnotationTimeoutSeconds = "pulumi.com/timeoutSeconds"
	WaitForAvailable         = "condition=Available"

	// EtcdClientLabel marks pods other than kcp that may reach etcd (snapshot jobs).
	EtcdClientLabel = "railgrid.io/etcd-client"

	EtcdClientPort  = 2379
	EtcdPeerPort    = 2380
	EtcdMetricsPort = 8080
)

// RootShardDeployment is the Deployment (and Service) the operator creates for a RootShard.
func RootShardDeployment(name string) string { return naming.RootShardDeployment(name) }

// ShardDeployment is the Deployment (and Service) the operator creates for a Shard.
func ShardDeployment(name string) string { return naming.ShardDeployment(name) }

// FrontProxyDeployment is the Deployment (and Service) the operator creates for a FrontProxy.
func FrontProxyDeployment(name string) string { return naming.FrontProxyDeployment(name) }

// OperatorServiceHost is the in-cluster DNS name of an operator-created Service.
func OperatorServiceHost(service string) string {
	return fmt.Sprintf("%s.%s.svc.%s", service, NamespaceKcp, ClusterDomain)
}

// OwnedServiceName is the Service this program owns in front of a kcp component, with a
// fixed ClusterIP and appProtocol HTTPS.
func OwnedServiceName(component string) string { return naming.OwnedServiceName(component) }

// EtcdName is the StatefulSet and client Service of a shard's etcd.
func EtcdName(shard string) string { return naming.EtcdName(shard) }

// EtcdHeadlessService gives each etcd member a stable DNS name.
func EtcdHeadlessService(shard string) string { return naming.EtcdHeadlessService(shard) }

// EtcdMemberHost is the DNS name of one etcd member.
func EtcdMemberHost(shard string, ordinal int) string {
	return fmt.Sprintf("%s-%d.%s.%s.svc.%s", EtcdName(shard), ordinal, EtcdHeadlessService(shard), NamespaceEtcd, ClusterDomain)
}

// EtcdClientURL is the plain-HTTP client URL of one member (in-cluster only).
func EtcdClientURL(shard string, ordinal int) string {
	return fmt.Sprintf("http://%s:%d", EtcdMemberHost(shard, ordinal), EtcdClientPort)
}

// EtcdPeerURL is the peer URL of one member.
func EtcdPeerURL(shard string, ordinal int) string {
	return fmt.Sprintf("http://%s:%d", EtcdMemberHost(shard, ordinal), EtcdPeerPort)
}

// ShardVirtualWorkspaceURL is what APIExportEndpointSlices advertise for a shard: the
// only kcp URL that goes on a public hostname.
func ShardVirtualWorkspaceURL(hostname string) string { return "https://" + hostname }

// KubeconfigObjectName is the name of the Kubeconfig object, and of the Secret the
// operator writes for it, of a re-mint generation. Each generation gets a name of its
// own because the operator names the client Certificate after the Kubeconfig
// (kubeconfig-cert-<name>) and copies whatever that Certificate's Secret holds the
// moment it is Ready: re-creating an object of the same name finds the previous
// generation's Certificate Ready and hands back the previous credential, while a new
// name makes cert-manager issue a new Certificate from scratch, so the Secret the
// operator writes can only hold a credential issued for this generation.
func KubeconfigObjectName(generation int) string {
	if generation == 0 {
		return KubeconfigName
	}
	return fmt.Sprintf("%s-remint-%d", KubeconfigName, generation)
}
