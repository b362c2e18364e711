package components

import (
	"errors"

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

// kcpPlatformTypeToken is the KcpPlatform component's Pulumi type token, the Go type's
// name. It must not change: the token is in the URN of the component and of every
// resource below it, so a new one would be a delete and a create of the whole stack in a
// deployed stack, or aliases carried for good, for a label in the preview's tree.
const kcpPlatformTypeToken = "railgrid:kcp:KcpPlatform"

// KcpPlatform is the whole stack, the component every other one is declared under: the
// platform (kind or GKE), one etcd per shard, the kcp-operator, the root shard, the
// additional shards, the front proxy, split-horizon DNS, the edge, the hub's kubeconfig
// and etcd snapshots.
type KcpPlatform struct {
	pulumi.ResourceState

	Platform   Platform
	Etcd       []*EtcdCluster // root first, then the additional shards in config order
	Operator   *KcpOperator
	RootShard  *KcpRootShard
	Shards     []*KcpShard
	FrontProxy *FrontProxy
	// IssuerCA is the Secret with the OIDC issuer's CA chain; nil unless the config gives
	// the chain (oidc.caCertificates).
	IssuerCA *OIDCIssuerCA
	DNS      *SplitHorizonDNS
	Edge     *KcpEdge
	Hub      *HubKubeconfig
	// UserKubeconfig is the users' kubeconfig: kubelogin signs them in with the hub's
	// OIDC issuer, through the front proxy's public URL (userkubeconfig.go).
	UserKubeconfig pulumi.StringOutput
	Snapshots      pulumi.Map
	// RetiredVolumes says where each retired shard's kept etcd data is.
	RetiredVolumes pulumi.MapOutput
	// Outputs are the stack's outputs, by name (Deploy exports them).
	Outputs pulumi.Map
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
	// Every Helm release of the stack carries the repair of the records an interrupted
	// Helm operation left pending; it reaches the cluster as the platform's provider does.
	access := builder.access()
	releaseHooks, err := newHelmRecordRepair(ctx, access)
	if err != nil {
		return nil, err
	}
	st := &KcpPlatform{}
	if err := ctx.RegisterComponentResource(kcpPlatformTypeToken, name, st, opts...); err != nil {
		return nil, err
	}
	if st.Platform, err = builder.Declare(ctx, name+"-"+string(cfg.Platform), releaseHooks, pulumi.Parent(st)); err != nil {
		return nil, err
	}
	b := kcpPlatformBuild{ctx: ctx, name: name, cfg: cfg, platform: st.Platform, access: access, releaseHooks: releaseHooks,
		// Every Kubernetes object below goes through the platform's provider.
		child: []pulumi.ResourceOption{pulumi.Parent(st), pulumi.Providers(st.Platform.Provider())}}
	ns, err := b.namespaces()
	if err != nil {
		return nil, err
	}
	if err := st.declareEtcd(b, ns.etcd); err != nil {
		return nil, err
	}
	if err := st.declareKcp(b, ns); err != nil {
		return nil, err
	}
	if err := st.declareAccess(b, ns.hub); err != nil {
		return nil, err
	}
	if err := st.declareDataKeeping(b); err != nil {
		return nil, err
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

// kcpPlatformBuild is what each step of NewKcpPlatform declares with: the KcpPlatform
// component's name (every child's name starts with it), the config, the platform, how
// the resource hooks reach the cluster, the option every Helm release carries, and the
// options of every child.
type kcpPlatformBuild struct {
	ctx          *pulumi.Context
	name         string
	cfg          *config.Config
	platform     Platform
	access       clusterAccess
	releaseHooks pulumi.ResourceOption
	child        []pulumi.ResourceOption
}

// stackNamespaces are the namespaces the stack declares.
type stackNamespaces struct{ etcd, operator, kcp, hub *corev1.Namespace }

// namespaces declares them. Namespaces that hold data are retained: deleting the etcd
// namespace would delete the volume claims with it, and the hub namespace also holds the
// hub. Pod Security: the etcd namespace holds only pods of this program, so it enforces
// the restricted level; kcp-system and kcp-operator run pods of upstream charts and of
// the operator, which are not ours to change, so they only warn.
func (b kcpPlatformBuild) namespaces() (ns stackNamespaces, err error) {
	if ns.etcd, err = newNamespace(b.ctx, b.name+"-ns-etcd", naming.NamespaceEtcd, true, naming.PodSecurityEnforceLabel, b.child...); err != nil {
		return ns, err
	}
	if ns.operator, err = newNamespace(b.ctx, b.name+"-ns-operator", naming.NamespaceOperator, false, naming.PodSecurityWarnLabel, b.child...); err != nil {
		return ns, err
	}
	if ns.kcp, err = newNamespace(b.ctx, b.name+"-ns-kcp", naming.NamespaceKcp, false, naming.PodSecurityWarnLabel, b.child...); err != nil {
		return ns, err
	}
	ns.hub, err = newNamespace(b.ctx, b.name+"-ns-hub", b.cfg.Hub.Namespace, true, "", b.child...)
	return ns, err
}

// declareEtcd declares one etcd per shard, the root shard's first.
func (st *KcpPlatform) declareEtcd(b kcpPlatformBuild, namespace *corev1.Namespace) error {
	for _, shard := range b.cfg.Kcp.AllShards() {
		etcd, err := NewEtcdCluster(b.ctx, b.name+"-etcd-"+shard.Name, &EtcdClusterArgs{
			Shard:      shard.Name,
			Members:    b.cfg.Etcd.Members,
			Image:      etcdImage(b.cfg),
			VolumeSize: b.cfg.Etcd.VolumeSize,
			Placement:  b.platform.EtcdPlacement(),
			Namespace:  namespace,
			Defrag:     EtcdDefrag{Schedule: b.cfg.Etcd.DefragSchedule, Image: config.EtcdDefragImage},
		}, b.child...)
		if err != nil {
			return err
		}
		st.Etcd = append(st.Etcd, etcd)
	}
	return nil
}

// etcdOf is the etcd of one shard.
func (st *KcpPlatform) etcdOf(shard string) *EtcdCluster {
	for _, etcd := range st.Etcd {
		if etcd.Shard == shard {
			return etcd
		}
	}
	return nil
}

// declareKcp declares the operator, then kcp's servers: the root shard, the other
// shards and the front proxy.
func (st *KcpPlatform) declareKcp(b kcpPlatformBuild, ns stackNamespaces) error {
	cfg := b.cfg
	var err error
	if st.Operator, err = NewKcpOperator(b.ctx, b.name+"-operator", &KcpOperatorArgs{
		ChartVersion:      cfg.Versions.OperatorChart,
		ImageTag:          cfg.Versions.OperatorImage,
		ChartSource:       cfg.Operator.ChartSource(),
		ChartPath:         cfg.Operator.ChartPath,
		OperatorNamespace: ns.operator,
		KcpNamespace:      ns.kcp,
		CertManager:       b.platform.CertManager(),
		ReleaseHooks:      b.releaseHooks,
	}, b.child...); err != nil {
		return err
	}
	// An upgrade rolls the root shard out before the shards and the front proxy are
	// updated, and up returns once every updated kcp object serves (kcprollout.go).
	waits, err := newKcpRolloutWaits(b.ctx, b.access)
	if err != nil {
		return err
	}
	// What every kcp server takes from the config, derived once: the pinned image, the
	// hub's OIDC (with the Secret of the issuer's CA, when the program owns it) and the
	// servers' size.
	image, auth, resources := kcpImage(cfg), kcpAuth(cfg), kcpResources(cfg)
	var authDeps []pulumi.Resource
	if cfg.HasIssuerCACertificates() {
		if st.IssuerCA, err = NewOIDCIssuerCA(b.ctx, b.name+"-oidc-ca", &OIDCIssuerCAArgs{
			PEM: cfg.OIDC.CACertificates, KcpNamespace: ns.kcp,
		}, b.child...); err != nil {
			return err
		}
		authDeps = []pulumi.Resource{st.IssuerCA.Secret}
	}
	server := func(e config.Endpoint, rolloutWaits pulumi.ResourceOption) KcpServerArgs {
		return KcpServerArgs{Image: image, Auth: auth, AuthDependsOn: authDeps, Resources: resources,
			Hostname: e.Hostname, ClusterIP: e.ClusterIP, Replicas: e.Replicas, Placement: b.platform.KcpPlacement(),
			Operator: st.Operator, RolloutWaits: rolloutWaits}
	}
	if st.RootShard, err = NewKcpRootShard(b.ctx, b.name+"-root", &KcpRootShardArgs{
		KcpServerArgs: server(cfg.Kcp.RootShard, waits.ofRootShard()),
		Etcd:          st.etcdOf(naming.RootShardName),
	}, b.child...); err != nil {
		return err
	}
	for _, shard := range cfg.Kcp.Shards {
		s, err := NewKcpShard(b.ctx, b.name+"-shard-"+shard.Name, &KcpShardArgs{
			KcpServerArgs: server(shard.Endpoint, waits.afterRootShard()),
			Name:          shard.Name,
			Etcd:          st.etcdOf(shard.Name),
			RootShard:     st.RootShard,
		}, b.child...)
		if err != nil {
			return err
		}
		st.Shards = append(st.Shards, s)
	}
	st.FrontProxy, err = NewFrontProxy(b.ctx, b.name+"-frontproxy", &FrontProxyArgs{
		KcpServerArgs: server(cfg.Kcp.FrontProxy, waits.afterRootShard()),
		RootShard:     st.RootShard,
	}, b.child...)
	return err
}

// declareAccess declares how clients reach kcp: split-horizon DNS inside the cluster,
// the edge from outside, and the hub's kubeconfig.
func (st *KcpPlatform) declareAccess(b kcpPlatformBuild, hubNamespace *corev1.Namespace) error {
	records, serviceDeps := st.shardRecords(b.cfg)
	var err error
	if st.DNS, err = NewSplitHorizonDNS(b.ctx, b.name+"-dns", &SplitHorizonDNSArgs{
		Records:   records,
		Backend:   b.platform.DNS(),
		DependsOn: serviceDeps,
	}, b.child...); err != nil {
		return err
	}
	if st.Edge, err = NewKcpEdge(b.ctx, b.name+"-edge", &KcpEdgeArgs{
		Routes:  st.edgeRoutes(b.cfg),
		Gateway: b.platform.Edge(),
	}, b.child...); err != nil {
		return err
	}
	if st.Hub, err = NewHubKubeconfig(b.ctx, b.name+"-hub", &HubKubeconfigArgs{
		FrontProxy:       st.FrontProxy,
		Validity:         b.cfg.Hub.KubeconfigValidity,
		RemintGeneration: b.cfg.Hub.RemintGeneration,
		HubNamespace:     hubNamespace,
		SecretName:       b.cfg.Hub.SecretName,
		SecretKey:        b.cfg.Hub.SecretKey,
		Copy:             HubCopyArgs{Schedule: b.cfg.Hub.CopySchedule, Image: config.HubCopyImage},
	}, b.child...); err != nil {
		return err
	}
	st.UserKubeconfig = newUserKubeconfig(UserKubeconfigArgs{
		Stack:     b.ctx.Stack(),
		Access:    b.platform.UserAccess(b.cfg.Kcp.FrontProxy.Hostname, st.Hub.RootServerCA),
		IssuerURL: b.cfg.OIDC.IssuerURL,
		ClientID:  b.cfg.OIDC.ClientID,
		IssuerCA:  b.cfg.OIDC.CACertificates,
	})
	return nil
}

// declareDataKeeping declares what keeps etcd's data: the platform's snapshots, and
// the report of where each retired shard's volumes are.
func (st *KcpPlatform) declareDataKeeping(b kcpPlatformBuild) error {
	snapshots, err := NewEtcdSnapshots(b.ctx, b.name+"-snapshots", &EtcdSnapshotsArgs{Clusters: st.Etcd, Backend: b.platform.Snapshots()}, b.child...)
	if err != nil {
		return err
	}
	st.Snapshots = snapshots.Outputs
	st.RetiredVolumes = pulumi.Map{}.ToMapOutput()
	if len(b.cfg.Kcp.RetiredShards) == 0 {
		return nil
	}
	retired, err := NewRetiredShardVolumes(b.ctx, b.name+"-retired", &RetiredShardVolumesArgs{
		Shards: b.cfg.Kcp.RetiredShards, Members: b.cfg.Etcd.Members,
	}, b.child...)
	if err != nil {
		return err
	}
	st.RetiredVolumes = retired.Volumes
	return nil
}

// shardRecords are the split-horizon answers: each shard hostname to its owned Service.
func (st *KcpPlatform) shardRecords(cfg *config.Config) ([]HostRecord, []pulumi.Resource) {
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
func (st *KcpPlatform) edgeRoutes(cfg *config.Config) []EdgeRoute {
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
		labels[podSecurityMode] = pulumi.String(naming.PodSecurityRestricted)
	}
	return corev1.NewNamespace(ctx, name, &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(namespace), Labels: labels},
	}, opts...)
}
