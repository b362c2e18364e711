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

// FrontProxyArgs wires the front proxy to its root shard.
type FrontProxyArgs struct {
	Config    *config.Config
	RootShard *KcpRootShard
	Operator  *KcpOperator
	// RolloutWaits binds the waits of the FrontProxy's updates (kcprollout.go); optional.
	RolloutWaits pulumi.ResourceOption
}

// FrontProxy is the FrontProxy object and the owned Service in front of its pods.
type FrontProxy struct {
	pulumi.ResourceState

	Name       string
	FrontProxy *apiextensions.CustomResource
	Service    *corev1.Service

	ObjectName pulumi.StringOutput `pulumi:"name"`
}

// NewFrontProxy declares the front proxy, created after the root shard is Available.
func NewFrontProxy(ctx *pulumi.Context, name string, args *FrontProxyArgs, opts ...pulumi.ResourceOption) (*FrontProxy, error) {
	if args == nil || args.Config == nil || args.RootShard == nil || args.Operator == nil {
		return nil, errors.New("FrontProxy: Config, RootShard and Operator are required")
	}
	f := &FrontProxy{Name: naming.FrontProxyName}
	if err := ctx.RegisterComponentResource("railgrid:kcp:FrontProxy", name, f, opts...); err != nil {
		return nil, err
	}
	cfg := args.Config
	endpoint := cfg.Kcp.FrontProxy
	spec := kcpapi.FrontProxySpec{
		RootShard: kcpapi.RootShardConfig{Ref: kcpapi.LocalObjectReference{Name: args.RootShard.Name}},
		Image:     kcpImage(cfg),
		Replicas:  kcpapi.Int32(endpoint.Replicas),
		Auth:      kcpAuth(cfg),
		// The minted kubeconfigs use this address: keep it the in-cluster Service so the
		// hub never leaves the cluster. The public name goes on the certificate only.
		External:             &kcpapi.ExternalConfig{Hostname: naming.OperatorServiceHost(naming.FrontProxyDeployment(f.Name)), Port: naming.KcpPort},
		CertificateTemplates: serverCertificate(endpoint.Hostname),
	}
	deps := []pulumi.Resource{args.RootShard.RootShard, args.Operator.Release}
	obj, err := newKcpObject(ctx, name, kcpapi.KindFrontProxy, f.Name, spec, nil,
		withOption([]pulumi.ResourceOption{pulumi.Parent(f), pulumi.DependsOn(deps)}, args.RolloutWaits)...)
	if err != nil {
		return nil, err
	}
	svc, err := newOwnedService(ctx, name+"-service", ComponentFrontProxy, f.Name, endpoint.ClusterIP,
		pulumi.Parent(f), pulumi.DependsOn([]pulumi.Resource{args.Operator.KcpNamespace}))
	if err != nil {
		return nil, err
	}
	f.FrontProxy, f.Service = obj, svc
	f.ObjectName = pulumi.String(f.Name).ToStringOutput()
	if err := ctx.RegisterResourceOutputs(f, pulumi.Map{"name": f.ObjectName, "serviceClusterIP": svc.Spec.ClusterIP()}); err != nil {
		return nil, err
	}
	return f, nil
}
