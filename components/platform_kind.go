package components

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// KindPlatform is what the kind stack adds around kcp: the cluster connection and, unless
// the config says they are present, cert-manager and Envoy Gateway from their charts
// (upstream, or the mirrors kind.certManagerChart and kind.envoyGatewayChart name).
type KindPlatform struct {
	pulumi.ResourceState

	provider     *kubernetes.Provider
	cfg          *config.Config
	certManager  []pulumi.Resource
	envoyGateway []pulumi.Resource
}

type kindBuilder struct{ cfg *config.Config }

// access: the program reaches the cluster as the provider does, with the same file and
// context.
func (b kindBuilder) access() clusterAccess {
	return kubeconfigContext(b.cfg.Kind.Kubeconfig, b.cfg.Kind.Context)
}

// Declare connects to the kind cluster and installs the add-ons.
func (b kindBuilder) Declare(ctx *pulumi.Context, name string, releaseHooks pulumi.ResourceOption, opts ...pulumi.ResourceOption) (Platform, error) {
	k := &KindPlatform{cfg: b.cfg}
	if err := ctx.RegisterComponentResource("railgrid:kcp:KindPlatform", name, k, opts...); err != nil {
		return nil, err
	}
	providerArgs := &kubernetes.ProviderArgs{
		Context: pulumi.String(b.cfg.Kind.Context),
		// The split-horizon hosts file is a ConfigMap that CoreDNS re-reads in place.
		EnableConfigMapMutable: pulumi.Bool(true),
		// A re-mint updates the hub Secret in place instead of deleting and recreating it.
		EnableSecretMutable: pulumi.Bool(true),
	}
	if b.cfg.Kind.Kubeconfig != "" {
		// The provider takes a path or a kubeconfig's contents; unset, it reads
		// $KUBECONFIG or ~/.kube/config, and a stack made without the key keeps its inputs.
		providerArgs.Kubeconfig = pulumi.String(b.cfg.Kind.Kubeconfig)
	}
	provider, err := kubernetes.NewProvider(ctx, name+"-k8s", providerArgs, pulumi.Parent(k))
	if err != nil {
		return nil, err
	}
	k.provider = provider
	releaseOpts := []pulumi.ResourceOption{pulumi.Parent(k), pulumi.Provider(provider), releaseHooks}
	kind, v := b.cfg.Kind, b.cfg.Versions
	if k.certManager, err = (kindAddOn{
		release: "cert-manager", version: v.CertManager, namespace: naming.NamespaceCertManager,
		chart: config.CertManagerChartName, source: kind.CertManagerChart, present: kind.CertManagerPresent,
		// keep: uninstalling cert-manager must not delete every Certificate with its CRDs.
		values: pulumi.Map{"crds": pulumi.Map{"enabled": pulumi.Bool(true), "keep": pulumi.Bool(true)}},
	}).install(ctx, name, releaseOpts); err != nil {
		return nil, err
	}
	if k.envoyGateway, err = (kindAddOn{
		release: "envoy-gateway", version: v.EnvoyGateway, namespace: naming.NamespaceEnvoyGateway,
		chart: config.EnvoyGatewayChartName, source: kind.EnvoyGatewayChart, present: kind.EnvoyGatewayPresent,
	}).install(ctx, name, releaseOpts); err != nil {
		return nil, err
	}
	if err := ctx.RegisterResourceOutputs(k, pulumi.Map{"context": pulumi.String(b.cfg.Kind.Context)}); err != nil {
		return nil, err
	}
	return k, nil
}

// kindAddOn is an add-on the kind stack installs with a Helm release of its own, from
// its chart, unless the config says the cluster has it (present).
type kindAddOn struct {
	release, version, namespace string
	chart                       string // the chart's name in source
	source                      config.ChartSource
	present                     bool
	values                      pulumi.Map
}

// install declares the add-on's release, <name>-<release>, and returns what waits for
// the add-on: the release, or nothing when the cluster has the add-on.
func (a kindAddOn) install(ctx *pulumi.Context, name string, opts []pulumi.ResourceOption) ([]pulumi.Resource, error) {
	if a.present {
		return nil, nil
	}
	args := &HelmReleaseArgs{
		Name:            pulumi.String(a.release),
		Version:         pulumi.String(a.version),
		Namespace:       pulumi.String(a.namespace),
		CreateNamespace: true,
		Values:          a.values,
	}
	args.setChart(a.chart, a.source)
	release, err := NewHelmRelease(ctx, name+"-"+a.release, args, opts...)
	if err != nil {
		return nil, err
	}
	return []pulumi.Resource{release}, nil
}

func (k *KindPlatform) Provider() pulumi.ProviderResource { return k.provider }

func (k *KindPlatform) CertManager() []pulumi.Resource { return k.certManager }

// EtcdPlacement: kind's default local-path StorageClass, any node.
func (k *KindPlatform) EtcdPlacement() EtcdPlacement {
	return EtcdPlacement{StorageClassName: k.cfg.Etcd.StorageClass}
}

// KcpPlacement: anywhere on the one node; nothing to spread over.
func (k *KindPlatform) KcpPlacement() KcpPlacement { return KcpPlacement{} }

// DNS: CoreDNS's hosts file, which also answers the issuer's hostname with its Service's
// ClusterIP when kind.issuerClusterIP is set: nothing resolves the issuer's public name
// inside a kind cluster otherwise.
func (k *KindPlatform) DNS() DNSBackend {
	if !k.cfg.HasIssuerClusterIP() {
		return coreDNSHosts{}
	}
	return coreDNSHosts{issuer: &HostRecord{Hostname: k.cfg.IssuerHostname(), ClusterIP: k.cfg.Kind.IssuerClusterIP}}
}

func (k *KindPlatform) Edge() EdgeGateway {
	return envoyGatewayEdge{timeout: k.cfg.LoadBalancerTimeout(), nodePort: k.cfg.Kind.GatewayNodePort, dependsOn: k.envoyGateway}
}

// UserAccess: the edge passes TLS through, so the front proxy presents kcp's own
// certificate (its hostname on it, issued by kcp's CA), at the host port kind/cluster.yaml
// maps the edge to.
func (k *KindPlatform) UserAccess(frontProxyHostname string, kcpServerCA pulumi.StringOutput) UserAccess {
	return UserAccess{Server: fmt.Sprintf("https://%s:%d", frontProxyHostname, naming.KindEdgeHostPort), ServerCA: kcpServerCA}
}

// Snapshots: the kind stack is disposable and has no object storage outside the
// cluster; scheduled snapshots and the restore drill are the gke stack's.
func (k *KindPlatform) Snapshots() SnapshotBackend { return noSnapshots{} }
