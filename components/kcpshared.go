package components

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// What kcp's three servers (the root shard, every shard and the front proxy) share:
// their args, what each of them is once declared (its kcp-operator object and the owned
// Service in front of its pods), and the rules every server's spec follows (the shard
// flags, the public hostname on the serving certificate). Their components
// (kcprootshard.go, kcpshard.go, frontproxy.go) hold only what tells them apart.

// KcpServerArgs are the inputs kcp's three servers share: the root shard, every shard
// and the front proxy.
type KcpServerArgs struct {
	// Image is the one pinned kcp image (kcpImage).
	Image *kcpapi.ImageSpec
	// Auth is how the server authenticates clients: the hub's OIDC (kcpAuth).
	Auth *kcpapi.AuthSpec
	// AuthDependsOn is what Auth names that the program declares: the issuer's CA Secret
	// (OIDCIssuerCA). The object waits for it: its pods mount the Secret, and do not start
	// without it.
	AuthDependsOn []pulumi.Resource
	// Resources size a shard's kcp container (kcpResources); the front proxy's keeps
	// the operator's default.
	Resources *kcpapi.ResourceRequirements
	// Hostname is the public hostname, on the serving certificate.
	Hostname string
	// ClusterIP is the fixed ClusterIP of the owned Service, which split-horizon DNS
	// answers the hostname with.
	ClusterIP string
	Replicas  int
	// Placement is the platform's part of the server's pods (kcpplacement.go).
	Placement KcpPlacement
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
// image, the shard flags, the public hostname on the certificate, OIDC, its own etcd and
// where its pods run.
func (a *KcpServerArgs) commonShardSpec(etcd *EtcdCluster, pods kcpPods) kcpapi.CommonShardSpec {
	return kcpapi.CommonShardSpec{
		DeploymentTemplate:   a.Placement.template(pods, a.Replicas),
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
// spec, the operator's component label on its pods, the Deployments the operator runs
// for it, and what it is created after.
type kcpServerObject struct {
	kind      string // kcpapi.KindRootShard, KindShard or KindFrontProxy
	component string // naming.ComponentRootShard, ComponentShard or ComponentFrontProxy
	name      string
	spec      any
	// pods are the server's Deployments, each with a disruption budget of its own.
	pods      []kcpPods
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
	dependsOn := append(append([]pulumi.Resource{}, server.dependsOn...), args.AuthDependsOn...)
	obj, err := newKcpObject(ctx, name, server.kind, server.name, server.spec, nil,
		withOption([]pulumi.ResourceOption{pulumi.Parent(c), pulumi.DependsOn(dependsOn)}, args.RolloutWaits)...)
	if err != nil {
		return KcpServer{}, err
	}
	svc, err := newOwnedService(ctx, name+"-service", server.component, server.name, args.ClusterIP,
		pulumi.Parent(c), pulumi.DependsOn([]pulumi.Resource{args.Operator.KcpNamespace}))
	if err != nil {
		return KcpServer{}, err
	}
	for _, pods := range server.pods {
		if _, err := newKcpDisruptionBudget(ctx, name+"-"+pods.component+"-pdb", pods,
			pulumi.Parent(c), pulumi.DependsOn([]pulumi.Resource{args.Operator.KcpNamespace})); err != nil {
			return KcpServer{}, err
		}
	}
	k := KcpServer{Name: server.name, Object: obj, Service: svc, ObjectName: pulumi.String(server.name).ToStringOutput()}
	return k, ctx.RegisterResourceOutputs(c, pulumi.Map{"name": k.ObjectName, "serviceClusterIP": svc.Spec.ClusterIP()})
}

// withOption appends opt to opts unless it is nil.
func withOption(opts []pulumi.ResourceOption, opt pulumi.ResourceOption) []pulumi.ResourceOption {
	if opt == nil {
		return opts
	}
	return append(opts, opt)
}

// shardExtraArgs are the kcp flags every shard gets, each defined in kcp's source (the
// tree hack/fetch-shared.sh pins; tests/e2e runs them through the real binaries):
//   - --feature-gates (pkg/server/options/options.go, kcpfeatures.NewFlagValue):
//     CacheAPIs (pkg/features/kcp_features.go) for the cached-resource APIs the
//     infrastructure provider publishes its templates through (design document);
//     WorkspaceMounts (same file) because the Railgrid hub mounts workspaces through the
//     front proxy: its own external-kcp recipe enables both gates (KCP_FEATURE_GATES);
//   - --shard-virtual-workspace-url (pkg/server/options/options.go): what
//     APIExportEndpointSlices advertise, on the public hostname; never the base URL.
//
// No request timeout: kcp drops --request-timeout and --min-request-timeout from its
// flag set (disallowedFlags in pkg/server/options/flags.go), so the long timeout the
// design asks for is set at the edge (loadBalancer.timeout).
func shardExtraArgs(hostname string) []string {
	return []string{
		"--feature-gates=CacheAPIs=true,WorkspaceMounts=true",
		"--shard-virtual-workspace-url=" + naming.ShardVirtualWorkspaceURL(hostname),
	}
}

// serverCertificate adds the public hostname to a component's serving certificate: the
// in-cluster path (split horizon) presents this certificate under that name too.
func serverCertificate(hostname string) map[string]kcpapi.CertificateTemplate {
	return map[string]kcpapi.CertificateTemplate{
		"server": {Spec: kcpapi.CertificateSpecTemplate{DNSNames: []string{hostname}}},
	}
}

// newOwnedService declares the Service this program owns in front of a kcp component's
// pods, selected by the operator's labels, so that a fixed ClusterIP (which the DNS
// answers point at) and appProtocol HTTPS (for Gateway re-encryption) stick.
func newOwnedService(ctx *pulumi.Context, name, component, instance, clusterIP string, opts ...pulumi.ResourceOption) (*corev1.Service, error) {
	port := func(portName string, number int) *corev1.ServicePortArgs {
		return &corev1.ServicePortArgs{
			Name:        pulumi.String(portName),
			Port:        pulumi.Int(number),
			TargetPort:  pulumi.Int(naming.KcpPort),
			AppProtocol: pulumi.String("HTTPS"),
		}
	}
	return corev1.NewService(ctx, name, &corev1.ServiceArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:      pulumi.String(naming.OwnedServiceName(instance)),
			Namespace: pulumi.String(naming.NamespaceKcp),
			Labels:    pulumi.StringMap{"app.kubernetes.io/part-of": pulumi.String(config.Project), naming.LabelInstance: pulumi.String(instance)},
		},
		Spec: &corev1.ServiceSpecArgs{
			Type:      pulumi.String("ClusterIP"),
			ClusterIP: pulumi.String(clusterIP),
			Selector: pulumi.StringMap{
				naming.LabelComponent: pulumi.String(component),
				naming.LabelInstance:  pulumi.String(instance),
			},
			Ports: corev1.ServicePortArray{port("https", naming.PublicHTTPSPort), port("https-kcp", naming.KcpPort)},
		},
	}, opts...)
}
