package components

import (
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/naming"
)

// KcpShardArgs are an additional shard's inputs: those every kcp server has, its name,
// its own etcd and the root shard it joins.
type KcpShardArgs struct {
	KcpServerArgs
	Name      string // the Shard object's name ("alpha")
	Etcd      *EtcdCluster
	RootShard *KcpRootShard
}

// KcpShard is a Shard object and the owned Service in front of its pods.
type KcpShard struct {
	pulumi.ResourceState
	KcpServer
}

// NewKcpShard declares an additional shard, created only once the root shard is
// Available and its etcd is ready, and waited on until it is Available itself.
func NewKcpShard(ctx *pulumi.Context, name string, args *KcpShardArgs, opts ...pulumi.ResourceOption) (*KcpShard, error) {
	if args == nil || !args.complete() || args.Name == "" || args.Etcd == nil || args.RootShard == nil {
		return nil, errors.New("KcpShard: Image, Auth, Operator, Name, Etcd and RootShard are required")
	}
	s := &KcpShard{}
	pods := kcpPods{component: naming.ComponentShard, instance: args.Name, deployment: naming.ShardDeployment(args.Name)}
	spec := kcpapi.ShardSpec{
		CommonShardSpec: args.commonShardSpec(args.Etcd, pods),
		RootShard:       kcpapi.RootShardConfig{Ref: kcpapi.LocalObjectReference{Name: args.RootShard.Name}},
	}
	server, err := newKcpServer(ctx, "railgrid:kcp:KcpShard", name, s, kcpServerObject{
		kind: kcpapi.KindShard, component: naming.ComponentShard, name: args.Name, spec: spec, pods: []kcpPods{pods},
		dependsOn: []pulumi.Resource{args.RootShard.Object, args.Etcd.StatefulSet, args.Operator.Release},
	}, &args.KcpServerArgs, opts...)
	if err != nil {
		return nil, err
	}
	s.KcpServer = server
	return s, nil
}
