package components

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
)

// KcpServerArgs are the inputs kcp's three servers share: the root shard, every shard
// and the front proxy.
type KcpServerArgs struct {
	// Image is the one pinned kcp image (kcpImage).
	Image *kcpapi.ImageSpec
	// Auth is how the server authenticates clients: the hub's OIDC (kcpAuth).
	Auth *kcpapi.AuthSpec
	// Resources size a shard's kcp container (kcpResources); the front proxy's keeps
	// the operator's default.
	Resources *kcpapi.ResourceRequirements
	// Hostname is the public hostname, on the serving certificate.
	Hostname string
	// ClusterIP is the fixed ClusterIP of the owned Service, which split-horizon DNS
	// answers the hostname with.
	ClusterIP string
	Replicas  int
	// Operator is the release that serves the object and the Issuer of its certificates.
	Operator *KcpOperator
	// RolloutWaits binds the waits of the object's updates (kcprollout.go); optional.
	RolloutWaits pulumi.ResourceOption
}

// complete says whether the inputs every server needs are set.
func (a *KcpServerArgs) complete() bool {
	return a.Image != nil && a.Auth != nil && a.Operator != nil
}

// commonShardSpec is what the root shard and every other shard set alike: the pinned
// image, the shard flags, the public hostname on the certificate, OIDC and its own etcd.
func (a *KcpServerArgs) commonShardSpec(etcd *EtcdCluster) kcpapi.CommonShardSpec {
	return kcpapi.CommonShardSpec{
		Image:                a.Image,
		Replicas:             kcpapi.Int32(a.Replicas),
		ExtraArgs:            shardExtraArgs(a.Hostname),
		CertificateTemplates: serverCertificate(a.Hostname),
		Auth:                 a.Auth,
		Etcd:                 kcpapi.EtcdConfig{Endpoints: etcd.Endpoints},
		Resources:            a.Resources,
	}
}

// kcpServerObject is what tells one server from another: its object's kind, name and
// spec, the operator's component label on its pods, and what it is created after.
type kcpServerObject struct {
	kind      string // kcpapi.KindRootShard, KindShard or KindFrontProxy
	component string // ComponentRootShard, ComponentShard or ComponentFrontProxy
	name      string
	spec      any
	dependsOn []pulumi.Resource
}

// KcpServer is what each of kcp's servers is, once declared: its kcp-operator object and
// the owned Service in front of its pods.
type KcpServer struct {
	// Name is the object's name, and the owned Service's instance label.
	Name    string
	Object  *apiextensions.CustomResource
	Service *corev1.Service

	ObjectName pulumi.StringOutput
}

// newKcpServer registers the component c of type typ and declares under it what each of
// kcp's servers is: the kcp-operator object, waited on until Available, and the owned
// Service in front of its pods, once kcp-system exists.
func newKcpServer(ctx *pulumi.Context, typ, name string, c pulumi.ComponentResource, server kcpServerObject, args *KcpServerArgs, opts ...pulumi.ResourceOption) (KcpServer, error) {
	if err := ctx.RegisterComponentResource(typ, name, c, opts...); err != nil {
		return KcpServer{}, err
	}
	obj, err := newKcpObject(ctx, name, server.kind, server.name, server.spec, nil,
		withOption([]pulumi.ResourceOption{pulumi.Parent(c), pulumi.DependsOn(server.dependsOn)}, args.RolloutWaits)...)
	if err != nil {
		return KcpServer{}, err
	}
	svc, err := newOwnedService(ctx, name+"-service", server.component, server.name, args.ClusterIP,
		pulumi.Parent(c), pulumi.DependsOn([]pulumi.Resource{args.Operator.KcpNamespace}))
	if err != nil {
		return KcpServer{}, err
	}
	k := KcpServer{Name: server.name, Object: obj, Service: svc, ObjectName: pulumi.String(server.name).ToStringOutput()}
	return k, ctx.RegisterResourceOutputs(c, pulumi.Map{"name": k.ObjectName, "serviceClusterIP": svc.Spec.ClusterIP()})
}
