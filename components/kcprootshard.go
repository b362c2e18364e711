package components

import (
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/naming"
)

// KcpRootShardArgs are the root shard's inputs: those every kcp server has, and its etcd.
type KcpRootShardArgs struct {
	KcpServerArgs
	Etcd *EtcdCluster
}

// KcpRootShard is the RootShard object and the owned Service in front of its pods.
type KcpRootShard struct {
	pulumi.ResourceState
	KcpServer
}

// NewKcpRootShard declares the root shard. It waits for Available, and is created only
// after the operator release, the self-signed Issuer and its etcd.
func NewKcpRootShard(ctx *pulumi.Context, name string, args *KcpRootShardArgs, opts ...pulumi.ResourceOption) (*KcpRootShard, error) {
	if args == nil || !args.complete() || args.Etcd == nil {
		return nil, errors.New("KcpRootShard: Image, Auth, Operator and Etcd are required")
	}
	r := &KcpRootShard{}
	pods := []kcpPods{
		{component: naming.ComponentRootShard, instance: naming.RootShardName, deployment: naming.RootShardDeployment(naming.RootShardName)},
		{component: naming.ComponentRootShardProxy, instance: naming.RootShardName, deployment: naming.RootShardProxyDeployment(naming.RootShardName)},
	}
	spec := kcpapi.RootShardSpec{
		CommonShardSpec: args.commonShardSpec(args.Etcd, pods[0]),
		// Pinned too: the proxy would otherwise follow the operator's default kcp tag.
		Proxy: &kcpapi.RootShardProxySpec{Image: args.Image, Replicas: kcpapi.Int32(args.Replicas),
			DeploymentTemplate: args.Placement.template(pods[1], args.Replicas)},
		// The in-cluster front-proxy Service keeps the shards' and the hub's path in the cluster.
		External:     kcpapi.ExternalConfig{Hostname: naming.OperatorServiceHost(naming.FrontProxyDeployment(naming.FrontProxyName)), Port: naming.KcpPort},
		Certificates: kcpapi.Certificates{IssuerRef: &kcpapi.ObjectReference{Group: "cert-manager.io", Kind: "Issuer", Name: naming.SelfSignedIssuer}},
		Cache:        kcpapi.CacheConfig{Embedded: &kcpapi.EmbeddedCacheConfiguration{Enabled: true}},
	}
	server, err := newKcpServer(ctx, "railgrid:kcp:KcpRootShard", name, r, kcpServerObject{
		kind: kcpapi.KindRootShard, component: naming.ComponentRootShard, name: naming.RootShardName, spec: spec, pods: pods,
		// The StatefulSet itself, not the EtcdCluster component: a dependency on a
		// component covers only the children it has registered by then.
		dependsOn: []pulumi.Resource{args.Operator.Release, args.Operator.Issuer, args.Etcd.StatefulSet},
	}, &args.KcpServerArgs, opts...)
	if err != nil {
		return nil, err
	}
	r.KcpServer = server
	return r, nil
}
