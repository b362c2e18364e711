package components

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp/container"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	storagev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/storage/v1"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// gkeCluster is what the lookup of the existing cluster tells the program.
type gkeCluster struct {
	ID          string // projects/<p>/locations/<l>/clusters/<n>
	Endpoint    string
	CACert      string // base64 PEM
	NetworkURL  string
	ServiceCIDR netip.Prefix
}

type gkeBuilder struct {
	cfg     *config.Config
	cluster gkeCluster
}

// lookupGKE reads the existing cluster (never managed, never changed) and checks the
// fixed ClusterIPs against the Service range the cluster really has. It declares nothing.
func lookupGKE(ctx *pulumi.Context, cfg *config.Config) (platformBuilder, error) {
	g := cfg.GKE
	found, err := container.LookupCluster(ctx, &container.LookupClusterArgs{
		Name:     g.Cluster,
		Location: pulumi.StringRef(g.Location),
		Project:  pulumi.StringRef(g.Project),
	})
	if err != nil {
		return nil, fmt.Errorf("looking up GKE cluster %s in %s/%s: %w", g.Cluster, g.Project, g.Location, err)
	}
	if len(found.MasterAuths) == 0 || found.Endpoint == "" {
		return nil, fmt.Errorf("GKE cluster %s has no endpoint or CA certificate", g.Cluster)
	}
	cidr := found.ServicesIpv4Cidr
	if len(found.IpAllocationPolicies) > 0 && found.IpAllocationPolicies[0].ServicesIpv4CidrBlock != "" {
		cidr = found.IpAllocationPolicies[0].ServicesIpv4CidrBlock
	}
	serviceRange, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("GKE cluster %s reports Service range %q: %w", g.Cluster, cidr, err)
	}
	if errs := cfg.ServiceIPErrors(serviceRange.Masked(), "the Service range of GKE cluster "+g.Cluster); len(errs) > 0 {
		return nil, errs
	}
	return gkeBuilder{cfg: cfg, cluster: gkeCluster{
		ID:          found.Id,
		Endpoint:    found.Endpoint,
		CACert:      found.MasterAuths[0].ClusterCaCertificate,
		NetworkURL:  networkURL(g.Project, found.Network),
		ServiceCIDR: serviceRange.Masked(),
	}}, nil
}

// networkURL turns the cluster's network (a name or a self link) into the URL a
// response policy binds to.
func networkURL(project, network string) string {
	if strings.HasPrefix(network, "https://") {
		return network
	}
	if strings.HasPrefix(network, "projects/") {
		return "https://www.googleapis.com/compute/v1/" + network
	}
	return fmt.Sprintf("https://www.googleapis.com/compute/v1/projects/%s/global/networks/%s", project, network)
}

// GKEPlatform is what the gke stack provisions around kcp on an existing cluster: the
// Kubernetes provider, the kcp and etcd node pools and the etcd StorageClass.
type GKEPlatform struct {
	pulumi.ResourceState

	cfg          *config.Config
	cluster      gkeCluster
	provider     *kubernetes.Provider
	KcpPool      *container.NodePool
	EtcdPool     *container.NodePool
	StorageClass *storagev1.StorageClass
}

// access: the program reaches the cluster with the provider's own kubeconfig.
func (b gkeBuilder) access() clusterAccess { return kubeconfigText(gkeKubeconfig(b.cluster)) }

// Declare creates the provider, the node pools and the StorageClass. No Helm release is
// the GKE platform's own: releaseHooks goes to the operator's alone.
func (b gkeBuilder) Declare(ctx *pulumi.Context, name string, _ pulumi.ResourceOption, opts ...pulumi.ResourceOption) (Platform, error) {
	g := &GKEPlatform{cfg: b.cfg, cluster: b.cluster}
	if err := ctx.RegisterComponentResource("railgrid:kcp:GKEPlatform", name, g, opts...); err != nil {
		return nil, err
	}
	provider, err := kubernetes.NewProvider(ctx, name+"-k8s", &kubernetes.ProviderArgs{
		Kubeconfig: pulumi.String(gkeKubeconfig(b.cluster)),
		// A re-mint updates the hub Secret in place instead of deleting and recreating it.
		EnableSecretMutable: pulumi.Bool(true),
	}, pulumi.Parent(g))
	if err != nil {
		return nil, err
	}
	g.provider = provider
	if g.KcpPool, err = g.nodePool(ctx, name+"-pool-kcp", kcpPoolName, b.cfg.GKE.NodePools.Kcp, false); err != nil {
		return nil, err
	}
	if g.EtcdPool, err = g.nodePool(ctx, name+"-pool-etcd", "etcd", b.cfg.GKE.NodePools.Etcd, true); err != nil {
		return nil, err
	}
	// Retain: a deleted claim or StorageClass leaves the etcd disk in place. Zonal PDs
	// created where the scheduler puts the member (WaitForFirstConsumer).
	g.StorageClass, err = storagev1.NewStorageClass(ctx, name+"-etcd-storage", &storagev1.StorageClassArgs{
		Metadata:             &metav1.ObjectMetaArgs{Name: pulumi.String(b.cfg.Etcd.StorageClass)},
		Provisioner:          pulumi.String("pd.csi.storage.gke.io"),
		Parameters:           pulumi.StringMap{"type": pulumi.String("pd-ssd")},
		VolumeBindingMode:    pulumi.String("WaitForFirstConsumer"),
		ReclaimPolicy:        pulumi.String("Retain"),
		AllowVolumeExpansion: pulumi.Bool(true),
	}, pulumi.Parent(g), pulumi.Provider(provider), pulumi.RetainOnDelete(true))
	if err != nil {
		return nil, err
	}
	if err := ctx.RegisterResourceOutputs(g, pulumi.Map{
		"kcpNodePool":  g.KcpPool.Name,
		"etcdNodePool": g.EtcdPool.Name,
		"storageClass": g.StorageClass.Metadata.Name().Elem(),
	}); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *GKEPlatform) nodePool(ctx *pulumi.Context, name, poolName string, pool config.NodePool, dedicatedToEtcd bool) (*container.NodePool, error) {
	gk := g.cfg.GKE
	nodeConfig := &container.NodePoolNodeConfigArgs{
		MachineType: pulumi.String(pool.MachineType),
		DiskSizeGb:  pulumi.Int(pool.DiskSizeGb),
		DiskType:    pulumi.String("pd-balanced"),
		OauthScopes: pulumi.StringArray{pulumi.String("https://www.googleapis.com/auth/cloud-platform")},
		// Pods get Google credentials only through Workload Identity.
		WorkloadMetadataConfig: &container.NodePoolNodeConfigWorkloadMetadataConfigArgs{Mode: pulumi.String("GKE_METADATA")},
		Labels:                 pulumi.StringMap{naming.PoolLabel: pulumi.String(poolName)},
	}
	if dedicatedToEtcd {
		nodeConfig.Labels = pulumi.StringMap{naming.EtcdPoolLabelKey: pulumi.String(naming.EtcdPoolLabelValue), naming.PoolLabel: pulumi.String(poolName)}
		nodeConfig.Taints = container.NodePoolNodeConfigTaintArray{&container.NodePoolNodeConfigTaintArgs{
			Key: pulumi.String(naming.EtcdPoolTaintKey), Value: pulumi.String(naming.EtcdPoolTaintValue), Effect: pulumi.String("NO_SCHEDULE"),
		}}
	}
	return container.NewNodePool(ctx, name, &container.NodePoolArgs{
		Name:             pulumi.String(poolName),
		Project:          pulumi.String(gk.Project),
		Cluster:          pulumi.String(gk.Cluster),
		Location:         pulumi.String(gk.Location),
		NodeLocations:    pulumi.ToStringArray(gk.Zones),
		InitialNodeCount: pulumi.Int(max(pool.MinPerZone, 1)),
		Autoscaling: &container.NodePoolAutoscalingArgs{
			MinNodeCount:   pulumi.Int(pool.MinPerZone),
			MaxNodeCount:   pulumi.Int(pool.MaxPerZone),
			LocationPolicy: pulumi.String("BALANCED"),
		},
		Management:      &container.NodePoolManagementArgs{AutoRepair: pulumi.Bool(true), AutoUpgrade: pulumi.Bool(true)},
		UpgradeSettings: &container.NodePoolUpgradeSettingsArgs{MaxSurge: pulumi.Int(1), MaxUnavailable: pulumi.Int(0)},
		NodeConfig:      nodeConfig,
	}, pulumi.Parent(g), pulumi.IgnoreChanges([]string{"initialNodeCount"}))
}

// gkeKubeconfig connects with the cluster's endpoint and CA and gke-gcloud-auth-plugin
// credentials; it holds no secret.
func gkeKubeconfig(c gkeCluster) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: gke
  cluster:
    server: https://%s
    certificate-authority-data: %s
contexts:
- name: gke
  context:
    cluster: gke
    user: gke
current-context: gke
users:
- name: gke
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      installHint: Install gke-gcloud-auth-plugin (gcloud components install gke-gcloud-auth-plugin)
      provideClusterInfo: true
`, c.Endpoint, c.CACert)
}

func (g *GKEPlatform) Provider() pulumi.ProviderResource { return g.provider }

// CertManager: on GKE cert-manager is a prerequisite of the cluster (docs/gke.md).
func (g *GKEPlatform) CertManager() []pulumi.Resource { return nil }

// EtcdPlacement: the dedicated etcd pool and the Retain pd-ssd StorageClass.
func (g *GKEPlatform) EtcdPlacement() EtcdPlacement {
	return EtcdPlacement{
		StorageClassName: g.cfg.Etcd.StorageClass,
		NodeSelector:     map[string]string{naming.EtcdPoolLabelKey: naming.EtcdPoolLabelValue},
		Tolerations: corev1.TolerationArray{&corev1.TolerationArgs{
			Key: pulumi.String(naming.EtcdPoolTaintKey), Operator: pulumi.String("Equal"), Value: pulumi.String(naming.EtcdPoolTaintValue), Effect: pulumi.String("NoSchedule"),
		}},
		DependsOn: []pulumi.Resource{g.EtcdPool, g.StorageClass},
	}
}

// kcpPoolName names the node pool of kcp's servers (its nodes' naming.PoolLabel).
const kcpPoolName = "kcp"

// KcpPlacement: the kcp pool, whose nodes are in every zone of gke.zones.
func (g *GKEPlatform) KcpPlacement() KcpPlacement {
	return KcpPlacement{NodeSelector: map[string]string{naming.PoolLabel: kcpPoolName}, Zones: len(g.cfg.GKE.Zones)}
}

func (g *GKEPlatform) DNS() DNSBackend {
	return cloudDNSResponsePolicy{project: g.cfg.GKE.Project, dns: g.cfg.GKE.DNS, cluster: g.cluster}
}

func (g *GKEPlatform) Edge() EdgeGateway {
	return gkeGatewayEdge{gateway: g.cfg.GKE.Gateway, timeout: g.cfg.LoadBalancerTimeout()}
}

// UserAccess: the Gateway terminates TLS with the listener's certificate
// (gke.gateway), publicly trusted, on the standard HTTPS port.
func (g *GKEPlatform) UserAccess(frontProxyHostname string, _ pulumi.StringOutput) UserAccess {
	return UserAccess{Server: "https://" + frontProxyHostname}
}

func (g *GKEPlatform) Snapshots() SnapshotBackend {
	return gcsSnapshots{project: g.cfg.GKE.Project, location: g.cfg.GKE.Location, snapshots: g.cfg.GKE.Snapshots, etcdImage: etcdImage(g.cfg)}
}
