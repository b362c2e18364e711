package components

import (
	"fmt"

	"github.com/railgrid/railgrid-kcp/naming"
)

// The labels, annotations, ports and keys the components share. The names of the
// objects, and the in-cluster DNS names of their Services, come from package naming.

const (
	// The hub kubeconfig's Secret key and the identity it holds (named in package
	// naming, where cmd/verify reads the identity it checks).
	KubeconfigSecretKey  = "kubeconfig"
	KubeconfigUsername   = naming.KubeconfigUsername
	KubeconfigAdminGroup = naming.KubeconfigAdminGroup

	// PublicHTTPSPort is the port of the advertised https://<hostname> URLs. Owned
	// Services serve it too, so the URL works inside the cluster through split horizon.
	PublicHTTPSPort = 443

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

// EtcdClientURL is the plain-HTTP client URL of one member (in-cluster only).
func EtcdClientURL(shard string, ordinal int) string {
	return fmt.Sprintf("http://%s:%d", naming.EtcdMemberHost(shard, ordinal), EtcdClientPort)
}

// EtcdPeerURL is the peer URL of one member.
func EtcdPeerURL(shard string, ordinal int) string {
	return fmt.Sprintf("http://%s:%d", naming.EtcdMemberHost(shard, ordinal), EtcdPeerPort)
}

// ShardVirtualWorkspaceURL is what APIExportEndpointSlices advertise for a shard: the
// only kcp URL that goes on a public hostname.
func ShardVirtualWorkspaceURL(hostname string) string { return "https://" + hostname }
