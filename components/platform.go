package components

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"

	"github.com/railgrid/railgrid-kcp/config"
)

// Platform is everything that differs between kind and GKE: the cluster connection,
// what must be installed before kcp, where etcd runs and keeps its data, how shard
// hostnames resolve inside the cluster, how kcp is exposed, and how etcd is snapshotted.
// The KcpPlatform component picks one implementation once; no kcp component branches on
// the platform.
type Platform interface {
	// Provider is the Kubernetes provider of every Kubernetes object in the stack.
	Provider() pulumi.ProviderResource
	// CertManager is what must be ready before a cert-manager Issuer can be created.
	CertManager() []pulumi.Resource
	// EtcdPlacement says where etcd members run and which storage holds their data.
	EtcdPlacement() EtcdPlacement
	// KcpPlacement says where kcp's servers run and over how many zones.
	KcpPlacement() KcpPlacement
	// DNS answers shard hostnames with owned Service ClusterIPs inside the cluster.
	DNS() DNSBackend
	// Edge is the Gateway that exposes kcp's hostnames with TLS and long timeouts.
	Edge() EdgeGateway
	// Snapshots schedules etcd snapshots (and restore drills) for each shard's etcd.
	Snapshots() SnapshotBackend
	// UserAccess is how users outside the cluster reach the front proxy of hostname
	// frontProxyHostname. kcpServerCA is kcp's own CA (the output kcpRootServerCA), for a
	// platform whose edge passes kcp's certificate through.
	UserAccess(frontProxyHostname string, kcpServerCA pulumi.StringOutput) UserAccess
}

// UserAccess is the front proxy as users outside the cluster reach it.
type UserAccess struct {
	// Server is its public URL: scheme, host and port.
	Server string
	// ServerCA is the PEM CA that the certificate presented there chains to; nil for a
	// publicly trusted certificate, which the user's system trusts already.
	ServerCA pulumi.StringInput
}

// EtcdPlacement is the platform's part of an etcd StatefulSet.
type EtcdPlacement struct {
	StorageClassName string
	NodeSelector     map[string]string
	Tolerations      corev1.TolerationArray
	// DependsOn lists what the pods need first (node pool, StorageClass).
	DependsOn []pulumi.Resource
}

// KcpPlacement is the platform's part of every kcp server's pods (kcpplacement.go).
type KcpPlacement struct {
	// NodeSelector picks the nodes of the servers' pool; empty: any node.
	NodeSelector map[string]string
	// Zones is how many zones the pool has nodes in. With two or more, each server's
	// replicas are spread over them, one per node, and never packed into fewer zones.
	Zones int
}

// HostRecord is one split-horizon answer: a public hostname and the owned Service that
// answers it inside the cluster.
type HostRecord struct {
	Shard     string
	Hostname  string
	ClusterIP string
}

// DNSBackend declares split-horizon records under the SplitHorizonDNS component.
type DNSBackend interface {
	// answersAfter is what every answer waits for (the owned Services and their kcp
	// objects); what serves all answers (kind's Corefile) does not wait for it.
	DeclareRecords(ctx *pulumi.Context, name string, records []HostRecord, answersAfter []pulumi.Resource, opts ...pulumi.ResourceOption) error
}

// EdgeRoute is one public hostname routed to one owned Service (the route's backend).
type EdgeRoute struct {
	Name      string // short name of the kcp component ("frontproxy", "root", "alpha")
	Hostname  string
	Service   string // owned Service in kcp-system
	DependsOn []pulumi.Resource
}

// EdgeGateway declares the platform's Gateway and its routes under the KcpEdge
// component, and returns the address clients reach it at.
type EdgeGateway interface {
	DeclareRoutes(ctx *pulumi.Context, name string, routes []EdgeRoute, opts ...pulumi.ResourceOption) (pulumi.StringOutput, error)
}

// SnapshotBackend declares scheduled snapshots of the given etcd clusters.
type SnapshotBackend interface {
	DeclareSnapshots(ctx *pulumi.Context, name string, clusters []*EtcdCluster, opts ...pulumi.ResourceOption) (pulumi.Map, error)
}

// platformBuilder is the first phase of a platform: it has read what already exists
// (for GKE, the cluster) and checked the config against it, declaring nothing.
type platformBuilder interface {
	// access is how the program itself reaches the cluster, as the platform's provider
	// will: the resource hooks use it (clusteraccess.go).
	access() clusterAccess
	// Declare declares the platform. releaseHooks is the option every Helm release of the
	// stack carries (helmrelease_records.go), the platform's own add-ons included.
	Declare(ctx *pulumi.Context, name string, releaseHooks pulumi.ResourceOption, opts ...pulumi.ResourceOption) (Platform, error)
}

// newPlatformBuilder is the one place that chooses between kind and GKE.
func newPlatformBuilder(ctx *pulumi.Context, cfg *config.Config) (platformBuilder, error) {
	switch cfg.Platform {
	case config.PlatformKind:
		return kindBuilder{cfg: cfg}, nil
	case config.PlatformGKE:
		return lookupGKE(ctx, cfg)
	}
	return nil, fmt.Errorf("unknown platform %q", cfg.Platform)
}
