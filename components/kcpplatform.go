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

// KcpPlatformArgs is the validated stack configuration.
type KcpPlatformArgs struct {
	Config *config.Config
}

// KcpPlatform is the whole stack: the platform (kind or GKE), one etcd per shard, the
// kcp-operator, the root shard, the additional shards, the front proxy, split-horizon
// DNS, the edge, the hub's kubeconfig and etcd snapshots.
type KcpPlatform struct {
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

// NewKcpPlatform composes the stack. Whatever the platform must read first (the GKE
// cluster) is read and checked before anything is declared.
func NewKcpPlatform(ctx *pulumi.Context, name string, args *KcpPlatformArgs, opts ...pulumi.ResourceOption) (*KcpPlatform, error) {
	if args == nil || args.Config == nil {
		return nil, errors.New("KcpPlatform: Config is required")
	}
	cfg := args.Config
	builder, err := newPlatformBuilder(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p := &KcpPlatform{}
	if err := ctx.RegisterComponentResource("railgrid:kcp:KcpPlatform", name, p, opts...); err != nil {
		return nil, err
	}
	platform, err := builder.Declare(ctx, name+"-"+string(cfg.Platform), pulumi.Parent(p))
	if err != nil {
		return nil, err
	}
	p.Platform = platform
	// Every Kubernetes object below goes through the platform's provider.
	child := []pulumi.ResourceOption{pulumi.Parent(p), pulumi.Providers(platform.Provider())}

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
		p.Etcd = append(p.Etcd, etcd)
		etcdByShard[shard.Name] = etcd
	}

	if p.Operator, err = NewKcpOperator(ctx, name+"-operator", &KcpOperatorArgs{
		Config:            cfg,
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
	if p.RootShard, err = NewKcpRootShard(ctx, name+"-root", &KcpRootShardArgs{
		Config:       cfg,
		Etcd:         etcdByShard[naming.RootShardName],
		Operator:     p.Operator,
		RolloutWaits: waits.ofRootShard(),
	}, child...); err != nil {
		return nil, err
	}
	for _, shard := range cfg.Kcp.Shards {
		s, err := NewKcpShard(ctx, name+"-shard-"+shard.Name, &KcpShardArgs{
			Config:       cfg,
			Shard:        shard,
			Etcd:         etcdByShard[shard.Name],
			RootShard:    p.RootShard,
			Operator:     p.Operator,
			RolloutWaits: waits.afterRootShard(),
		}, child...)
		if err != nil {
			return nil, err
		}
		p.Shards = append(p.Shards, s)
	}
	if p.FrontProxy, err = NewFrontProxy(ctx, name+"-frontproxy", &FrontProxyArgs{
		Config:       cfg,
		RootShard:    p.RootShard,
		Operator:     p.Operator,
		RolloutWaits: waits.afterRootShard(),
	}, child...); err != nil {
		return nil, err
	}

	records, serviceDeps := p.shardRecords(cfg)
	if p.DNS, err = NewSplitHorizonDNS(ctx, name+"-dns", &SplitHorizonDNSArgs{
		Records:   records,
		Backend:   platform.DNS(),
		DependsOn: serviceDeps,
	}, child...); err != nil {
		return nil, err
	}
	if p.Edge, err = NewKcpEdge(ctx, name+"-edge", &KcpEdgeArgs{
		Backends: p.exposedBackends(cfg),
		Backend:  platform.Edge(),
	}, child...); err != nil {
		return nil, err
	}
	if p.Hub, err = NewHubKubeconfig(ctx, name+"-hub", &HubKubeconfigArgs{
		Config:       cfg,
		FrontProxy:   p.FrontProxy,
		HubNamespace: hubNS,
	}, child...); err != nil {
		return nil, err
	}
	snapshots, err := NewEtcdSnapshots(ctx, name+"-snapshots", &EtcdSnapshotsArgs{Clusters: p.Etcd, Backend: platform.Snapshots()}, child...)
	if err != nil {
		return nil, err
	}
	p.Snapshots = snapshots.Outputs
	p.RetiredVolumes = pulumi.Map{}.ToMapOutput()
	if len(cfg.Kcp.RetiredShards) > 0 {
		retired, err := NewRetiredShardVolumes(ctx, name+"-retired", &RetiredShardVolumesArgs{
			Shards: cfg.Kcp.RetiredShards, Members: cfg.Etcd.Members,
		}, child...)
		if err != nil {
			return nil, err
		}
		p.RetiredVolumes = retired.Volumes
	}
	if err := ctx.RegisterResourceOutputs(p, pulumi.Map{
		"hubSecretName":   p.Hub.SecretName,
		"hubExpiresAt":    p.Hub.ExpiresAt,
		"edgeAddress":     p.Edge.Address,
		"splitHorizonFor": p.DNS.Hostnames,
	}); err != nil {
		return nil, err
	}
	return p, nil
}

// shardRecords are the split-horizon answers: each shard hostname to its owned Service.
func (p *KcpPlatform) shardRecords(cfg *config.Config) ([]HostRecord, []pulumi.Resource) {
	records := []HostRecord{{Shard: p.RootShard.Name, Hostname: cfg.Kcp.RootShard.Hostname, ClusterIP: cfg.Kcp.RootShard.ClusterIP}}
	deps := []pulumi.Resource{p.RootShard.Service, p.RootShard.RootShard}
	for i, s := range cfg.Kcp.Shards {
		records = append(records, HostRecord{Shard: s.Name, Hostname: s.Hostname, ClusterIP: s.ClusterIP})
		// The answer is published once the shard is Available (the design's order), so a
		// client never resolves a shard that is not serving yet.
		deps = append(deps, p.Shards[i].Service, p.Shards[i].Shard)
	}
	return records, deps
}

// exposedBackends are the hostnames the edge serves: the front proxy and every shard.
func (p *KcpPlatform) exposedBackends(cfg *config.Config) []ExposedBackend {
	backends := []ExposedBackend{
		{Name: p.FrontProxy.Name, Hostname: cfg.Kcp.FrontProxy.Hostname, Service: naming.OwnedServiceName(p.FrontProxy.Name), DependsOn: []pulumi.Resource{p.FrontProxy.Service, p.FrontProxy.FrontProxy}},
		{Name: p.RootShard.Name, Hostname: cfg.Kcp.RootShard.Hostname, Service: naming.OwnedServiceName(p.RootShard.Name), DependsOn: []pulumi.Resource{p.RootShard.Service, p.RootShard.RootShard}},
	}
	// Each route waits for its kcp object to be Available: the edge sends no traffic to a
	// shard that is still starting (the design's order: the Shard before its route).
	for i, s := range cfg.Kcp.Shards {
		backends = append(backends, ExposedBackend{Name: s.Name, Hostname: s.Hostname, Service: naming.OwnedServiceName(s.Name), DependsOn: []pulumi.Resource{p.Shards[i].Service, p.Shards[i].Shard}})
	}
	return backends
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
