package config

import "reflect"

// Defaults the program applies to a key the stack leaves out. Pulumi.yaml documents the
// same values; a test keeps the two in step.
const (
	DefaultReplicas       = 2
	DefaultEtcdMembers    = 3
	DefaultEtcdVolumeSize = "20Gi"
	// Daily, after the restore drill: compaction frees space every hour, but only a
	// defragmentation gives it back, before the database reaches its 8 GiB quota.
	DefaultDefragSchedule     = "15 4 * * *"
	DefaultLoadBalancerTimout = "1h"
	DefaultHubNamespace       = "railgrid-system"
	DefaultHubSecretName      = "railgrid-kcp"
	// HubSecretKey is the file name the hub chart mounts (/kcp-kubeconfig/admin.kubeconfig).
	HubSecretKey              = "admin.kubeconfig"
	DefaultKubeconfigValidity = "8766h"
	// Every ten minutes: cert-manager renews the hub's certificate at two thirds of its
	// life, so the copy it makes has months to reach the hub, and a run costs one pod.
	DefaultHubCopySchedule = "*/10 * * * *"
	DefaultOIDCCAKey       = "ca.crt"

	DefaultKindContext         = "kind-railgrid-kcp"
	DefaultKindServiceCIDR     = "10.96.0.0/16"
	DefaultKindStorageClass    = "standard"
	DefaultKindGatewayNodePort = 30443
	// DefaultKindNodeZones: kind/cluster.yaml creates one node.
	DefaultKindNodeZones = 1
	// kind shares one machine's cores with everything else: the operator's default
	// (1 CPU per kcp server) leaves no room for the surge pod of a rollout on a 2- or
	// 4-core machine.
	DefaultKindKcpCPU = "100m"

	DefaultGKEServiceCIDR = "34.118.224.0/20"
	// The kcp-operator's own default request.
	DefaultGKEKcpCPU = "1"
	// Both platforms: the kcp-operator's default memory request and limit.
	DefaultKcpMemory          = "1Gi"
	DefaultKcpMemoryLimit     = "2Gi"
	DefaultGKEStorageClass    = "etcd-pd-ssd"
	DefaultSnapshotSchedule   = "0 * * * *"
	DefaultDrillSchedule      = "30 3 * * *"
	DefaultSnapshotRetention  = 30
	DefaultResponsePolicyTTL  = 30
	DefaultGatewayClass       = "gke-l7-global-external-managed"
	DefaultKcpMachineType     = "e2-standard-4"
	DefaultEtcdMachineType    = "n2-standard-2"
	DefaultNodeDiskSizeGb     = 100
	DefaultKcpPoolMinPerZone  = 1
	DefaultKcpPoolMaxPerZone  = 3
	DefaultEtcdPoolMaxPerZone = 2
)

// withDefaults is the config of a stack that sets nothing but its platform: every key
// the stack leaves out keeps the value here. The config is decoded over it, so a value
// the stack gives (zero and empty included) is kept and validated, never replaced.
func withDefaults(platform Platform) *Config {
	c := &Config{
		Platform: platform,
		Versions: Versions{
			Kcp:           DefaultKcpVersion,
			OperatorChart: DefaultOperatorChartVersion,
			OperatorImage: DefaultOperatorImageTag,
			Etcd:          DefaultEtcdVersion,
			CertManager:   DefaultCertManagerVersion,
			EnvoyGateway:  DefaultEnvoyGatewayVersion,
		},
		Operator: Operator{ChartRepository: OperatorChartRepository},
		Kcp: Kcp{
			FrontProxy: Endpoint{Replicas: DefaultReplicas},
			RootShard:  Endpoint{Replicas: DefaultReplicas},
			Resources:  KcpResources{Memory: DefaultKcpMemory, MemoryLimit: DefaultKcpMemoryLimit},
		},
		Etcd:         Etcd{Members: DefaultEtcdMembers, VolumeSize: DefaultEtcdVolumeSize, DefragSchedule: DefaultDefragSchedule},
		LoadBalancer: LoadBalancer{Timeout: DefaultLoadBalancerTimout},
		Hub: Hub{
			Namespace:          DefaultHubNamespace,
			SecretName:         DefaultHubSecretName,
			SecretKey:          HubSecretKey,
			KubeconfigValidity: DefaultKubeconfigValidity,
			CopySchedule:       DefaultHubCopySchedule,
		},
	}
	switch platform {
	case PlatformKind:
		c.Kind = &Kind{
			Context: DefaultKindContext, GatewayNodePort: DefaultKindGatewayNodePort, NodeZones: DefaultKindNodeZones,
			CertManagerChart:  ChartSource{Repository: CertManagerChartRepo},
			EnvoyGatewayChart: ChartSource{Repository: EnvoyGatewayChartRepo},
		}
		c.Network.ServiceCIDR = DefaultKindServiceCIDR
		c.Kcp.Resources.CPU = DefaultKindKcpCPU
		c.Etcd.StorageClass = DefaultKindStorageClass
	case PlatformGKE:
		c.GKE = &GKE{
			NodePools: GKENodePools{
				Kcp:  NodePool{MachineType: DefaultKcpMachineType, MinPerZone: DefaultKcpPoolMinPerZone, MaxPerZone: DefaultKcpPoolMaxPerZone, DiskSizeGb: DefaultNodeDiskSizeGb},
				Etcd: NodePool{MachineType: DefaultEtcdMachineType, MaxPerZone: DefaultEtcdPoolMaxPerZone, DiskSizeGb: DefaultNodeDiskSizeGb},
			},
			Snapshots: GKESnapshots{
				Schedule:      DefaultSnapshotSchedule,
				DrillSchedule: DefaultDrillSchedule,
				RetentionDays: DefaultSnapshotRetention,
				GcloudImage:   DefaultGcloudImageTag,
			},
			DNS:     GKEResponsePolicy{TTL: DefaultResponsePolicyTTL},
			Gateway: GKEGateway{ClassName: DefaultGatewayClass},
		}
		c.Network.ServiceCIDR = DefaultGKEServiceCIDR
		c.Kcp.Resources.CPU = DefaultGKEKcpCPU
		c.Etcd.StorageClass = DefaultGKEStorageClass
	}
	return c
}

// newWithDefaults is a new element of type t (a list item, or the target of a pointer)
// with the defaults of the keys it leaves out.
func newWithDefaults(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	switch p := v.Addr().Interface().(type) {
	case *NamedShard:
		p.Replicas = DefaultReplicas
	case *SecretKeyRef:
		p.Key = DefaultOIDCCAKey
	}
	return v
}
