package components

import (
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// KcpRootShardArgs wires the root shard to what it needs first.
type KcpRootShardArgs struct {
	Config   *config.Config
	Etcd     *EtcdCluster
	Operator *KcpOperator
	// RolloutWaits binds the waits of the RootShard's updates (kcprollout.go); optional.
	RolloutWaits pulumi.ResourceOption
}

// KcpRootShard is the RootShard object and the owned Service in front of its pods.
type KcpRootShard struct {
	pulumi.ResourceState

	Name      string
	RootShard *apiextensions.CustomResource
	Service   *corev1.Service

	ObjectName pulumi.StringOutput `pulumi:"name"`
}

// NewKcpRootShard declares the root shard. It waits for Available, and is created only
// after the operator release, the self-signed Issuer and its etcd.
func NewKcpRootShard(ctx *pulumi.Context, name string, args *KcpRootShardArgs, opts ...pulumi.ResourceOption) (*KcpRootShard, error) {
	if args == nil || args.Config == nil || args.Etcd == nil || args.Operator == nil {
		return nil, errors.New("KcpRootShard: Config, Etcd and Operator are required")
	}
	r := &KcpRootShard{Name: naming.RootShardName}
	if err := ctx.RegisterComponentResource("railgrid:kcp:KcpRootShard", name, r, opts...); err != nil {
		return nil, err
	}
	cfg := args.Config
	endpoint := cfg.Kcp.RootShard
	spec := kcpapi.RootShardSpec{
		CommonShardSpec: kcpapi.CommonShardSpec{
			Image:                kcpImage(cfg),
			Replicas:             kcpapi.Int32(endpoint.Replicas),
			ExtraArgs:            shardExtraArgs(endpoint.Hostname),
			CertificateTemplates: serverCertificate(endpoint.Hostname),
			Auth:                 kcpAuth(cfg),
			Etcd:                 kcpapi.EtcdConfig{Endpoints: args.Etcd.Endpoints},
			Resources:            kcpResources(cfg),
		},
		// Pinned too: the proxy would otherwise follow the operator's default kcp tag.
		Proxy: &kcpapi.RootShardProxySpec{Image: kcpImage(cfg), Replicas: kcpapi.Int32(endpoint.Replicas)},
		// The in-cluster front-proxy Service keeps the shards' and the hub's path in the cluster.
		External:     kcpapi.ExternalConfig{Hostname: naming.OperatorServiceHost(naming.FrontProxyDeployment(naming.FrontProxyName)), Port: naming.KcpPort},
		Certificates: kcpapi.Certificates{IssuerRef: &kcpapi.ObjectReference{Group: "cert-manager.io", Kind: "Issuer", Name: naming.SelfSignedIssuer}},
		Cache:        kcpapi.CacheConfig{Embedded: &kcpapi.EmbeddedCacheConfiguration{Enabled: true}},
	}
	// The StatefulSet itself, not the EtcdCluster component: a dependency on a component
	// covers only the children it has registered by then.
	deps := []pulumi.Resource{args.Operator.Release, args.Operator.Issuer, args.Etcd.StatefulSet}
	obj, err := newKcpObject(ctx, name, kcpapi.KindRootShard, r.Name, spec, nil,
		withOption([]pulumi.ResourceOption{pulumi.Parent(r), pulumi.DependsOn(deps)}, args.RolloutWaits)...)
	if err != nil {
		return nil, err
	}
	svc, err := newOwnedService(ctx, name+"-service", ComponentRootShard, r.Name, endpoint.ClusterIP,
		pulumi.Parent(r), pulumi.DependsOn([]pulumi.Resource{args.Operator.KcpNamespace}))
	if err != nil {
		return nil, err
	}
	r.RootShard, r.Service = obj, svc
	r.ObjectName = pulumi.String(r.Name).ToStringOutput()
	if err := ctx.RegisterResourceOutputs(r, pulumi.Map{"name": r.ObjectName, "serviceClusterIP": svc.Spec.ClusterIP()}); err != nil {
		return nil, err
	}
	return r, nil
}
