package components

import (
	"errors"
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// StackArgs is the validated stack configuration.
type StackArgs struct {
	Config *config.Config
}

// stackTypeToken is the Stack component's Pulumi type token. It keeps the component's
// first name: the token is in the URN of the component and of every resource below it,
// so a new one would be a delete and a create of the whole stack in a deployed stack, or
// aliases carried for good, for a label in the preview's tree.
const stackTypeToken = "railgrid:kcp:KcpPlatform"

// Stack is the whole stack, the component every other one is declared under: the
// platform (kind or GKE), one etcd per shard, the kcp-operator, the root shard, the
// additional shards, the front proxy, split-horizon DNS, the edge, the hub's kubeconfig
// and etcd snapshots.
type Stack struct {
	pulumi.ResourceState

	Platform   Platform
	Etcd       []*EtcdCluster // root first, then the additional shards in config order
	Operator   *KcpOperator
	RootShard  *KcpRootShard
	Shards     []*KcpShard
	FrontProxy *FrontProxy
	DNS        *SplitHorizonDNS
	Edge       *KcpEdge
	Hub        *HubKubeconfig
	Snapshots  pulumi.Map
	// RetiredVolumes says where each retired shard's kept etcd data is.
	RetiredVolumes pulumi.MapOutput
}

// NewStack composes the stack. Whatever the platform must read first (the GKE
// cluster) is read and checked before anything is declared.
func NewStack(ctx *pulumi.Context, name string, args *StackArgs, opts ...pulumi.ResourceOption) (*Stack, error) {
	if args == nil || args.Config == nil {
		return nil, errors.New("Stack: Config is required")
	}
	cfg := args.Config
	builder, err := newPlatformBuilder(ctx, cfg)
	if err != nil {
		return nil, err
	}
	st := &Stack{}
	if err := ctx.RegisterComponentResource(stackTypeToken, name, st, opts...); err != nil {
		return nil, err
	}
	platform, err := builder.Declare(ctx, name+"-"+string(cfg.Platform), pulumi.Parent(st))
	if err != nil {
		return nil, err
	}
	st.Platform = platform
	// Every Kubernetes object below goes through the platform's provider.
	child := []pulumi.ResourceOption{pulumi.Parent(st), pulumi.Providers(platform.Provider())}

	// Namespaces that hold data are retained: deleting the etcd namespace would delete
	// the volume claims with it, and the hub namespace also holds the hub.
	// Pod Security: the etcd namespace holds only pods of this program, so it enforces
	// the restricted level; kcp-system and kcp-operator run pods of upstream charts and
	// of the operator, which are not ours to change, so they only warn.
	etcdNS, err := newNamespace(ctx, name+"-ns-etcd", naming.NamespaceEtcd, true, PodSecurityEnforceLabel, child...)
	if err != nil {
		return nil, err
	}
	operatorNS, err := newNamespace(ctx, name+"-ns-operator", naming.NamespaceOperator, false, PodSecurityWarnLabel, child...)
	if err != nil {
		return nil, err
	}
	kcpNS, err := newNamespace(ctx, name+"-ns-kcp", naming.NamespaceKcp, false, PodSecurityWarnLabel, child...)
	if err != nil {
		return nil, err
	}
	hubNS, err := newNamespace(ctx, name+"-ns-hub", cfg.Hub.Namespace, true, "", child...)
	if err != nil {
		return nil, err
	}

	etcdByShard := map[string]*EtcdCluster{}
	for _, shard := range cfg.Kcp.AllShards() {
		etcd, err := NewEtcdCluster(ctx, name+"-etcd-"+shard.Name, &EtcdClusterArgs{
			Shard:      shard.Name,
			Members:    cfg.Etcd.Members,
			Image:      fmt.Sprintf("%s:%s", config.EtcdImageRepository, cfg.Versions.Etcd),
			VolumeSize: cfg.Etcd.VolumeSize,
			Placement:  platform.EtcdPlacement(),
			Namespace:  etcdNS,
		}, child...)
		if err != nil {
			return nil, err
		}
		st.Etcd = append(st.Etcd, etcd)
		etcdByShard[shard.Name] = etcd
	}

	if st.Operator, err = NewKcpOperator(ctx, name+"-operator", &KcpOperatorArgs{
		ChartVersion:      cfg.Versions.OperatorChart,
		ImageTag:          cfg.Versions.OperatorImage,
		ChartRepository:   cfg.Operator.ChartRepository,
		ChartPath:         cfg.Operator.ChartPath,
		OperatorNamespace: operatorNS,
		KcpNamespace:      kcpNS,
		CertManager:       platform.CertManager(),
		ReleaseHooks:      platform.HelmReleaseHooks(),
	}, child...); err != nil {
		return nil, err
	}

	// An upgrade rolls the root shard out before the shards and the front proxy are
	// updated, and up returns once every updated kcp object serves (kcprollout.go).
	waits, err := newKcpRolloutWaits(ctx, platform.ClusterAccess())
	if err != nil {
		return nil, err
	}
	// What every kcp server takes from the config, derived once: the pinned image and
	// the hub's OIDC.
	image, auth := kcpImage(cfg), kcpAuth(cfg)
	server := func(e config.Endpoint, rolloutWaits pulumi.ResourceOption) KcpServerArgs {
		return KcpServerArgs{Image: image, Auth: auth, Hostname: e.Hostname, ClusterIP: e.ClusterIP, Replicas: e.Replicas,
			Operator: st.Operator, RolloutWaits: rolloutWaits}
	}
	if st.RootShard, err = NewKcpRootShard(ctx, name+"-root", &KcpRootShardArgs{
		KcpServerArgs: server(cfg.Kcp.RootShard, waits.ofRootShard()),
		Etcd:          etcdByShard[naming.RootShardName],
	}, child...); err != nil {
		return nil, err
	}
	for _, shard := range cfg.Kcp.Shards {
		s, err := NewKcpShard(ctx, name+"-shard-"+shard.Name, &KcpShardArgs{
			KcpServerArgs: server(shard.Endpoint, waits.afterRootShard()),
			Name:          shard.Name,
			Etcd:          etcdByShard[shard.Name],
			RootShard:     st.RootShard,
		}, child...)
		if err != nil {
			return nil, err
		}
		st.Shards = append(st.Shards, s)
	}
	if st.FrontProxy, err = NewFrontProxy(ctx, name+"-frontproxy", &FrontProxyArgs{
		KcpServerArgs: server(cfg.Kcp.FrontProxy, waits.afterRootShard()),
		RootShard:     st.RootShard,
	}, child...); err != nil {
		return nil, err
	}

	records, serviceDeps := st.shardRecords(cfg)
	if st.DNS, err = NewSplitHorizonDNS(ctx, name+"-dns", &SplitHorizonDNSArgs{
		Records:   records,
		Backend:   platform.DNS(),
		DependsOn: serviceDeps,
	}, child...); err != nil {
		return nil, err
	}
	if st.Edge, err = NewKcpEdge(ctx, name+"-edge", &KcpEdgeArgs{
		Routes:  st.edgeRoutes(cfg),
		Gateway: platform.Edge(),
	}, child...); err != nil {
		return nil, err
	}
	if st.Hub, err = NewHubKubeconfig(ctx, name+"-hub", &HubKubeconfigArgs{
		FrontProxy:       st.FrontProxy,
		Validity:         cfg.Hub.KubeconfigValidity,
		RemintGeneration: cfg.Hub.RemintGeneration,
		HubNamespace:     hubNS,
		SecretName:       cfg.Hub.SecretName,
		SecretKey:        cfg.Hub.SecretKey,
	}, child...); err != nil {
		return nil, err
	}
	snapshots, err := NewEtcdSnapshots(ctx, name+"-snapshots", &EtcdSnapshotsArgs{Clusters: st.Etcd, Backend: platform.Snapshots()}, child...)
	if err != nil {
		return nil, err
	}
	st.Snapshots = snapshots.Outputs
	st.RetiredVolumes = pulumi.Map{}.ToMapOutput()
	if len(cfg.Kcp.RetiredShards) > 0 {
		retired, err := NewRetiredShardVolumes(ctx, name+"-retired", &RetiredShardVolumesArgs{
			Shards: cfg.Kcp.RetiredShards, Members: cfg.Etcd.Members,
		}, child...)
		if err != nil {
			return nil, err
		}
		st.RetiredVolumes = retired.Volumes
	}
	if err := ctx.RegisterResourceOutputs(st, pulumi.Map{
		"hubSecretName":   st.Hub.SecretName,
		"hubExpiresAt":    st.Hub.ExpiresAt,
		"edgeAddress":     st.Edge.Address,
		"splitHorizonFor": st.DNS.Hostnames,
	}); err != nil {
		return nil, err
	}
	return st, nil
}

// shardRecords are the split-horizon answers: each shard hostname to its owned Service.
func (st *Stack) shardRecords(cfg *config.Config) ([]HostRecord, []pulumi.Resource) {
	records := []HostRecord{{Shard: st.RootShard.Name, Hostname: cfg.Kcp.RootShard.Hostname, ClusterIP: cfg.Kcp.RootShard.ClusterIP}}
	deps := []pulumi.Resource{st.RootShard.Service, st.RootShard.Object}
	for i, s := range cfg.Kcp.Shards {
		records = append(records, HostRecord{Shard: s.Name, Hostname: s.Hostname, ClusterIP: s.ClusterIP})
		// The answer is published once the shard is Available (the design's order), so a
		// client never resolves a shard that is not serving yet.
		deps = append(deps, st.Shards[i].Service, st.Shards[i].Object)
	}
	return records, deps
}

// edgeRoutes are the hostnames the edge serves: the front proxy and every shard.
func (st *Stack) edgeRoutes(cfg *config.Config) []EdgeRoute {
	routes := []EdgeRoute{
		{Name: st.FrontProxy.Name, Hostname: cfg.Kcp.FrontProxy.Hostname, Service: naming.OwnedServiceName(st.FrontProxy.Name), DependsOn: []pulumi.Resource{st.FrontProxy.Service, st.FrontProxy.Object}},
		{Name: st.RootShard.Name, Hostname: cfg.Kcp.RootShard.Hostname, Service: naming.OwnedServiceName(st.RootShard.Name), DependsOn: []pulumi.Resource{st.RootShard.Service, st.RootShard.Object}},
	}
	// Each route waits for its kcp object to be Available: the edge sends no traffic to a
	// shard that is still starting (the design's order: the Shard before its route).
	for i, s := range cfg.Kcp.Shards {
		routes = append(routes, EdgeRoute{Name: s.Name, Hostname: s.Hostname, Service: naming.OwnedServiceName(s.Name), DependsOn: []pulumi.Resource{st.Shards[i].Service, st.Shards[i].Object}})
	}
	return routes
}

// newNamespace declares a namespace; podSecurityMode, when set, is the Pod Security
// label (enforce or warn) that applies the restricted level to it.
func newNamespace(ctx *pulumi.Context, name, namespace string, retain bool, podSecurityMode string, opts ...pulumi.ResourceOption) (*corev1.Namespace, error) {
	if retain {
		opts = append(opts, pulumi.RetainOnDelete(true))
	}
	labels := pulumi.StringMap{"app.kubernetes.io/part-of": pulumi.String(config.Project)}
	if podSecurityMode != "" {
		labels[podSecurityMode] = pulumi.String(PodSecurityRestricted)
	}
	return corev1.NewNamespace(ctx, name, &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(namespace), Labels: labels},
	}, opts...)
}
