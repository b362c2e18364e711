package naming

import "fmt"

// In-cluster addresses and ports.
const (
	// ClusterDomain is the cluster's DNS domain (kcp-operator's default).
	ClusterDomain = "cluster.local"
	// KcpPort is the port every kcp server (shards and front proxy) listens on.
	KcpPort = 6443
	// PublicHTTPSPort is the port of the advertised https://<hostname> URLs: the edge
	// listens on it for every kcp hostname, and the owned Services serve it too, so the
	// URL works inside the cluster through split horizon.
	PublicHTTPSPort = 443

	// KindEdgeHostPort is the host port at which the kind edge is reached from the machine
	// that runs kind: kind/cluster.yaml maps the edge's NodePort (kind.gatewayNodePort,
	// default 30443) to it.
	KindEdgeHostPort = 8443

	// RootWorkspacePath is the path of kcp's root workspace behind the front proxy, where
	// a kubeconfig's server points (kcp's own admin kubeconfigs do the same).
	RootWorkspacePath = "/clusters/root"

	// The ports of every etcd member: clients (kcp, the snapshot jobs), peers, and the
	// health and metrics endpoints the probes read.
	EtcdClientPort  = 2379
	EtcdPeerPort    = 2380
	EtcdMetricsPort = 8080
)

// ShardVirtualWorkspaceURL is what APIExportEndpointSlices advertise for a shard: the
// only kcp URL that goes on a public hostname.
func ShardVirtualWorkspaceURL(hostname string) string { return "https://" + hostname }

// OperatorServiceHost is the in-cluster DNS name of an operator-created Service.
func OperatorServiceHost(service string) string { return serviceHost(service, NamespaceKcp) }

// EtcdServiceHost is the in-cluster DNS name of a shard's etcd client Service.
func EtcdServiceHost(shard string) string { return serviceHost(EtcdName(shard), NamespaceEtcd) }

// EtcdHeadlessHost is the domain under which each member of a shard's etcd has its name.
func EtcdHeadlessHost(shard string) string {
	return serviceHost(EtcdHeadlessService(shard), NamespaceEtcd)
}

// EtcdMemberHost is the DNS name of one etcd member.
func EtcdMemberHost(shard string, ordinal int) string {
	return fmt.Sprintf("%s-%d.%s", EtcdName(shard), ordinal, EtcdHeadlessHost(shard))
}

// EtcdClientURL is the plain-HTTP client URL of one member (in-cluster only).
func EtcdClientURL(shard string, ordinal int) string {
	return fmt.Sprintf("http://%s:%d", EtcdMemberHost(shard, ordinal), EtcdClientPort)
}

// EtcdPeerURL is the peer URL of one member.
func EtcdPeerURL(shard string, ordinal int) string {
	return fmt.Sprintf("http://%s:%d", EtcdMemberHost(shard, ordinal), EtcdPeerPort)
}

// EtcdInitialCluster is the --initial-cluster of a shard's etcd of members members:
// every member's name with its peer URL. The StatefulSet starts its members with it, and
// a restore writes the same membership into the restored data.
func EtcdInitialCluster(shard string, members int) string {
	var peers string
	for i := 0; i < members; i++ {
		if i > 0 {
			peers += ","
		}
		peers += EtcdMemberName(shard, i) + "=" + EtcdPeerURL(shard, i)
	}
	return peers
}

func serviceHost(service, namespace string) string {
	return fmt.Sprintf("%s.%s.svc.%s", service, namespace, ClusterDomain)
}
