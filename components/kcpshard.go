package components

import (
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/config"
)

// KcpShardArgs wires an additional shard to its root shard and its own etcd.
type KcpShardArgs struct {
	Config    *config.Config
	Shard     config.NamedShard
	Etcd      *EtcdCluster
	RootShard *KcpRootShard
	Operator  *KcpOperator
	// RolloutWaits binds the waits of the Shard's updates (kcprollout.go); optional.
	RolloutWaits pulumi.ResourceOption
}

// KcpShard is a Shard object and the owned Service in front of its pods.
type KcpShard struct {
	pulumi.ResourceState

	Name    string
	Shard   *apiextensions.CustomResource
	Service *corev1.Service

	ObjectName pulumi.StringOutput `pulumi:"name"`
}

// NewKcpShard declares an additional shard, created only once the root shard is
// Available and its etcd is ready, and waited on until it is Available itself.
func NewKcpShard(ctx *pulumi.Context, name string, args *KcpShardArgs, opts ...pulumi.ResourceOption) (*KcpShard, error) {
	if args == nil || args.Config == nil || args.Etcd == nil || args.RootShard == nil || args.Operator == nil {
		return nil, errors.New("KcpShard: Config, Shard, Etcd, RootShard and Operator are required")
	}
	s := &KcpShard{Name: args.Shard.Name}
	if err := ctx.RegisterComponentResource("railgrid:kcp:KcpShard", name, s, opts...); err != nil {
		return nil, err
	}
	cfg := args.Config
	spec := kcpapi.ShardSpec{
		CommonShardSpec: kcpapi.CommonShardSpec{
			Image:                kcpImage(cfg),
			Replicas:             kcpapi.Int32(args.Shard.Replicas),
			ExtraArgs:            shardExtraArgs(args.Shard.Hostname),
			CertificateTemplates: serverCertificate(args.Shard.Hostname),
			Auth:                 kcpAuth(cfg),
			Etcd:                 kcpapi.EtcdConfig{Endpoints: args.Etcd.Endpoints},
			Resources:            kcpResources(cfg),
		},
		RootShard: kcpapi.RootShardConfig{Ref: kcpapi.LocalObjectReference{Name: args.RootShard.Name}},
	}
	deps := []pulumi.Resource{args.RootShard.RootShard, args.Etcd.StatefulSet, args.Operator.Release}
	obj, err := newKcpObject(ctx, name, kcpapi.KindShard, s.Name, spec, nil,
		withOption([]pulumi.ResourceOption{pulumi.Parent(s), pulumi.DependsOn(deps)}, args.RolloutWaits)...)
	if err != nil {
		return nil, err
	}
	svc, err := newOwnedService(ctx, name+"-service", ComponentShard, s.Name, args.Shard.ClusterIP,
		pulumi.Parent(s), pulumi.DependsOn([]pulumi.Resource{args.Operator.KcpNamespace}))
	if err != nil {
		return nil, err
	}
	s.Shard, s.Service = obj, svc
	s.ObjectName = pulumi.String(s.Name).ToStringOutput()
	if err := ctx.RegisterResourceOutputs(s, pulumi.Map{"name": s.ObjectName, "serviceClusterIP": svc.Spec.ClusterIP()}); err != nil {
		return nil, err
	}
	return s, nil
}
