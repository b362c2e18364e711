package components

import (
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
	helmHooks    pulumi.ResourceOption
	access       clusterAccess
}

type kindBuilder struct{ cfg *config.Config }

// Declare connects to the kind cluster and installs the add-ons.
func (b kindBuilder) Declare(ctx *pulumi.Context, name string, opts ...pulumi.ResourceOption) (Platform, error) {
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
	// The program reaches the cluster as the provider does: the same file and context.
	k.access = kubeconfigContext(b.cfg.Kind.Kubeconfig, b.cfg.Kind.Context)
	if k.helmHooks, err = newHelmRecordRepair(ctx, k.access); err != nil {
		return nil, err
	}
	releaseOpts := []pulumi.ResourceOption{pulumi.Parent(k), pulumi.Provider(provider), k.helmHooks}
	v := b.cfg.Versions
	if !b.cfg.Kind.CertManagerPresent {
		args := &HelmReleaseArgs{
			Name:            pulumi.String("cert-manager"),
			Version:         pulumi.String(v.CertManager),
			Namespace:       pulumi.String(naming.NamespaceCertManager),
			CreateNamespace: true,
			// keep: uninstalling cert-manager must not delete every Certificate with its CRDs.
			Values: pulumi.Map{"crds": pulumi.Map{"enabled": pulumi.Bool(true), "keep": pulumi.Bool(true)}},
		}
		args.setChart(config.CertManagerChartName, b.cfg.Kind.CertManagerChart)
		release, err := NewHelmRelease(ctx, name+"-cert-manager", args, releaseOpts...)
		if err != nil {
			return nil, err
		}
		k.certManager = []pulumi.Resource{release}
	}
	if !b.cfg.Kind.EnvoyGatewayPresent {
		args := &HelmReleaseArgs{
			Name:            pulumi.String("envoy-gateway"),
			Version:         pulumi.String(v.EnvoyGateway),
			Namespace:       pulumi.String(naming.NamespaceEnvoyGateway),
			CreateNamespace: true,
		}
		args.setChart(config.EnvoyGatewayChartName, b.cfg.Kind.EnvoyGatewayChart)
		release, err := NewHelmRelease(ctx, name+"-envoy-gateway", args, releaseOpts...)
		if err != nil {
			return nil, err
		}
		k.envoyGateway = []pulumi.Resource{release}
	}
	if err := ctx.RegisterResourceOutputs(k, pulumi.Map{"context": pulumi.String(b.cfg.Kind.Context)}); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *KindPlatform) Provider() pulumi.ProviderResource { return k.provider }

func (k *KindPlatform) CertManager() []pulumi.Resource { return k.certManager }

func (k *KindPlatform) HelmReleaseHooks() pulumi.ResourceOption { return k.helmHooks }

func (k *KindPlatform) ClusterAccess() clusterAccess { return k.access }

// EtcdPlacement: kind's default local-path StorageClass, any node.
func (k *KindPlatform) EtcdPlacement() EtcdPlacement {
	return EtcdPlacement{StorageClassName: k.cfg.Etcd.StorageClass}
}

func (k *KindPlatform) DNS() DNSBackend { return coreDNSHosts{} }

func (k *KindPlatform) Edge() EdgeGateway {
	return envoyGatewayEdge{timeout: k.cfg.LoadBalancerTimeout(), nodePort: k.cfg.Kind.GatewayNodePort, dependsOn: k.envoyGateway}
}

// Snapshots: the kind stack is disposable and has no object storage outside the
// cluster; scheduled snapshots and the restore drill are the gke stack's.
func (k *KindPlatform) Snapshots() SnapshotBackend { return noSnapshots{} }
