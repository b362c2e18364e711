package config

// Defaults the program applies to a key the stack leaves out. Pulumi.yaml documents the
// same values; a test keeps the two in step.
const (
	DefaultReplicas           = 2
	DefaultRequestTimeout     = "1h"
	DefaultEtcdMembers        = 3
	DefaultEtcdVolumeSize     = "20Gi"
	DefaultLoadBalancerTimout = "1h"
	DefaultHubNamespace       = "railgrid-system"
	DefaultHubSecretName      = "railgrid-kcp"
	// HubSecretKey is the file name the hub chart mounts (/kcp-kubeconfig/admin.kubeconfig).
	HubSecretKey              = "admin.kubeconfig"
	DefaultKubeconfigValidity = "8766h"
	DefaultOIDCCAKey          = "ca.crt"

	DefaultKindContext         = "kind-railgrid-kcp"
	DefaultKindServiceCIDR     = "10.96.0.0/16"
	DefaultKindStorageClass    = "standard"
	DefaultKindGatewayNodePort = 30443

	DefaultGKEServiceCIDR     = "34.118.224.0/20"
	DefaultGKEStorageClass    = "etcd-pd-ssd"
	DefaultSnapshotSchedule   = "0 * * * *"
	DefaultDrillSchedule      = "30 3 * * *"
	DefaultSnapshotRetention  = 30
	DefaultResponsePolicyTTL  = 30
	DefaultGatewayClass       = "gke-l7-global-external-managed"
	DefaultKcpMachineType     = "e2-standard-4"
	DefaultEtcdMachineType    = "n2-standard-2"
	DefaultNodeDiskSizeGb     = 100
	DefaultKcpPoolMaxPerZone  = 3
	DefaultEtcdPoolMaxPerZone = 2
)

// applyDefaults fills every key the stack left out. Platform-specific defaults apply
// only to the platform the stack names.
func (c *Config) applyDefaults() {
	v := &c.Versions
	setString(&v.Kcp, DefaultKcpVersion)
	setString(&v.OperatorChart, DefaultOperatorChartVersion)
	setString(&v.OperatorImage, DefaultOperatorImageTag)
	setString(&v.Etcd, DefaultEtcdVersion)
	setString(&v.CertManager, DefaultCertManagerVersion)
	setString(&v.EnvoyGateway, DefaultEnvoyGatewayVersion)

	if c.Operator.ChartPath == "" {
		setString(&c.Operator.ChartRepository, OperatorChartRepository)
	}

	setInt(&c.Kcp.FrontProxy.Replicas, DefaultReplicas)
	setInt(&c.Kcp.RootShard.Replicas, DefaultReplicas)
	for i := range c.Kcp.Shards {
		setInt(&c.Kcp.Shards[i].Replicas, DefaultReplicas)
	}
	setString(&c.Kcp.RequestTimeout, DefaultRequestTimeout)

	if c.OIDC.CASecret != nil {
		setString(&c.OIDC.CASecret.Key, DefaultOIDCCAKey)
	}

	setInt(&c.Etcd.Members, DefaultEtcdMembers)
	setString(&c.Etcd.VolumeSize, DefaultEtcdVolumeSize)
	setString(&c.LoadBalancer.Timeout, DefaultLoadBalancerTimout)

	setString(&c.Hub.Namespace, DefaultHubNamespace)
	setString(&c.Hub.SecretName, DefaultHubSecretName)
	setString(&c.Hub.SecretKey, HubSecretKey)
	setString(&c.Hub.KubeconfigValidity, DefaultKubeconfigValidity)

	switch c.Platform {
	case PlatformKind:
		if c.Kind == nil {
			c.Kind = &Kind{}
		}
		setString(&c.Kind.Context, DefaultKindContext)
		setInt(&c.Kind.GatewayNodePort, DefaultKindGatewayNodePort)
		setString(&c.Network.ServiceCIDR, DefaultKindServiceCIDR)
		setString(&c.Etcd.StorageClass, DefaultKindStorageClass)
	case PlatformGKE:
		if c.GKE == nil {
			c.GKE = &GKE{}
		}
		g := c.GKE
		setString(&c.Network.ServiceCIDR, DefaultGKEServiceCIDR)
		setString(&c.Etcd.StorageClass, DefaultGKEStorageClass)
		setString(&g.NodePools.Kcp.MachineType, DefaultKcpMachineType)
		setInt(&g.NodePools.Kcp.MaxPerZone, DefaultKcpPoolMaxPerZone)
		setInt(&g.NodePools.Kcp.DiskSizeGb, DefaultNodeDiskSizeGb)
		setString(&g.NodePools.Etcd.MachineType, DefaultEtcdMachineType)
		setInt(&g.NodePools.Etcd.MaxPerZone, DefaultEtcdPoolMaxPerZone)
		setInt(&g.NodePools.Etcd.DiskSizeGb, DefaultNodeDiskSizeGb)
		setString(&g.Snapshots.Schedule, DefaultSnapshotSchedule)
		setString(&g.Snapshots.DrillSchedule, DefaultDrillSchedule)
		setInt(&g.Snapshots.RetentionDays, DefaultSnapshotRetention)
		setString(&g.Snapshots.GcloudImage, DefaultGcloudImageTag)
		setInt(&g.DNS.TTL, DefaultResponsePolicyTTL)
		setString(&g.Gateway.ClassName, DefaultGatewayClass)
	}
}

func setString(field *string, def string) {
	if *field == "" {
		*field = def
	}
}

func setInt(field *int, def int) {
	if *field == 0 {
		*field = def
	}
}
