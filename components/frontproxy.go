package components

import (
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/naming"
)

// FrontProxyArgs are the front proxy's inputs: those every kcp server has, and the root
// shard it fronts.
type FrontProxyArgs struct {
	KcpServerArgs
	RootShard *KcpRootShard
}

// FrontProxy is the FrontProxy object and the owned Service in front of its pods.
type FrontProxy struct {
	pulumi.ResourceState
	KcpServer
}

// NewFrontProxy declares the front proxy, created after the root shard is Available.
func NewFrontProxy(ctx *pulumi.Context, name string, args *FrontProxyArgs, opts ...pulumi.ResourceOption) (*FrontProxy, error) {
	if args == nil || !args.complete() || args.RootShard == nil {
		return nil, errors.New("FrontProxy: Image, Auth, Operator and RootShard are required")
	}
	f := &FrontProxy{}
	pods := kcpPods{component: naming.ComponentFrontProxy, instance: naming.FrontProxyName, deployment: naming.FrontProxyDeployment(naming.FrontProxyName)}
	spec := kcpapi.FrontProxySpec{
		RootShard: kcpapi.RootShardConfig{Ref: kcpapi.LocalObjectReference{Name: args.RootShard.Name}},
		Image:     args.Image,
		Replicas:  kcpapi.Int32(args.Replicas),
		Auth:      args.Auth,
		// The minted kubeconfigs use this address: keep it the in-cluster Service so the
		// hub never leaves the cluster. The public name goes on the certificate only.
		External:             &kcpapi.ExternalConfig{Hostname: naming.OperatorServiceHost(naming.FrontProxyDeployment(naming.FrontProxyName)), Port: naming.KcpPort},
		CertificateTemplates: serverCertificate(args.Hostname),
		DeploymentTemplate:   args.Placement.template(pods, args.Replicas),
	}
	server, err := newKcpServer(ctx, "railgrid:kcp:FrontProxy", name, f, kcpServerObject{
		kind: kcpapi.KindFrontProxy, component: naming.ComponentFrontProxy, name: naming.FrontProxyName, spec: spec, pods: []kcpPods{pods},
		dependsOn: []pulumi.Resource{args.RootShard.Object, args.Operator.Release},
	}, &args.KcpServerArgs, opts...)
	if err != nil {
		return nil, err
	}
	f.KcpServer = server
	return f, nil
}
