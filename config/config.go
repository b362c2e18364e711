// Package config is the single source of truth for a railgrid-kcp stack: the typed
// configuration, its defaults and its validation. Components receive values from a
// validated Config; they never read stack configuration themselves.
package config

import (
	"strings"
	"time"

	"github.com/railgrid/railgrid-kcp/naming"
)

// Project is the Pulumi project name; stack config keys live under "railgrid-kcp:".
const Project = "railgrid-kcp"

// Platform names the environment a stack deploys to.
type Platform string

const (
	PlatformKind Platform = "kind"
	PlatformGKE  Platform = "gke"
)

// Config is one stack's validated configuration. Each field maps to one top-level
// stack config key (see Pulumi.yaml).
type Config struct {
	Platform     Platform     `json:"platform"`
	Versions     Versions     `json:"versions"`
	Operator     Operator     `json:"operator"`
	Kcp          Kcp          `json:"kcp"`
	OIDC         OIDC         `json:"oidc"`
	Etcd         Etcd         `json:"etcd"`
	Network      Network      `json:"network"`
	LoadBalancer LoadBalancer `json:"loadBalancer"`
	Hub          Hub          `json:"hub"`
	Kind         *Kind        `json:"kind,omitempty"`
	GKE          *GKE         `json:"gke,omitempty"`

	// given holds the key paths the stack config sets (the rest are defaults).
	given map[string]bool
}

// Versions pins every image and chart the stack installs.
type Versions struct {
	// Kcp is the one kcp tag used by every kcp image: root shard, its proxy, the
	// other shards and the front proxy.
	Kcp           string `json:"kcp"`
	OperatorChart string `json:"operatorChart"`
	OperatorImage string `json:"operatorImage"`
	Etcd          string `json:"etcd"`
	// CertManager and EnvoyGateway are installed by the kind stack only.
	CertManager  string `json:"certManager"`
	EnvoyGateway string `json:"envoyGateway"`
}

// Operator says where the kcp-operator chart comes from.
type Operator struct {
	// ChartRepository is the Helm repository of the kcp-operator chart: https:// or
	// oci://, as ChartSource.Repository.
	ChartRepository string `json:"chartRepository"`
	// ChartCAFile is the CA file of an https ChartRepository, as ChartSource.CAFile.
	ChartCAFile string `json:"chartCAFile,omitempty"`
	// ChartPath, when set, installs the chart from a local directory instead (tests).
	ChartPath string `json:"chartPath,omitempty"`
}

// ChartSource is where the kcp-operator chart comes from when ChartPath is not set.
func (o Operator) ChartSource() ChartSource {
	return ChartSource{Repository: o.ChartRepository, CAFile: o.ChartCAFile}
}

// ChartSource is where a chart the program installs comes from: the upstream source by
// default, or a mirror (air-gapped and regulated clusters). The chart's name is fixed by
// the program; Repository is an https:// Helm repository, which serves the chart by
// name, or an oci:// registry path, under which the chart is <Repository>/<name>.
// CAFile is a file of PEM certificates that the https repository's certificate chains
// to, for a mirror behind a private CA; empty, the system's trust store.
type ChartSource struct {
	Repository string `json:"repository"`
	CAFile     string `json:"caFile,omitempty"`
}

// OCIScheme starts the Repository of a chart in an OCI registry.
const OCIScheme = "oci://"

// IsOCI reports whether the chart is in an OCI registry: Helm pulls it by reference
// (<Repository>/<name>), with no repository index and no repository options.
func (s ChartSource) IsOCI() bool { return strings.HasPrefix(s.Repository, OCIScheme) }

// OCIReference is the reference of chart name in an OCI Repository.
func (s ChartSource) OCIReference(name string) string {
	return strings.TrimSuffix(s.Repository, "/") + "/" + name
}

// Kcp describes the root shard, the additional shards and the front proxy.
type Kcp struct {
	FrontProxy Endpoint     `json:"frontProxy"`
	RootShard  Endpoint     `json:"rootShard"`
	Shards     []NamedShard `json:"shards"`
	// RetiredShards names shards taken out of Shards whose etcd volumes are kept: it
	// acknowledges the retirement, and the stack reports where their volumes are.
	RetiredShards []string `json:"retiredShards,omitempty"`
	// RequestTimeout is never allowed: kcp refuses --request-timeout, and the long
	// timeout the design asks for belongs at the edge (loadBalancer.timeout). It exists so
	// that a stack file that still sets it is refused with that reason, not ignored.
	RequestTimeout *string `json:"requestTimeout,omitempty"`
	// Resources are the kcp servers' requests and memory limit (root shard and shards).
	Resources KcpResources `json:"resources"`
}

// KcpResources size each kcp server's container. There is no CPU limit: a throttled
// API server answers late, and watches and leases suffer first.
type KcpResources struct {
	CPU         string `json:"cpu"`
	Memory      string `json:"memory"`
	MemoryLimit string `json:"memoryLimit"`
}

// Endpoint is one kcp component reached under a public hostname through an owned
// Service with a fixed ClusterIP.
type Endpoint struct {
	Hostname  string `json:"hostname"`
	ClusterIP string `json:"clusterIP"`
	Replicas  int    `json:"replicas"`

	// ShardBaseURL is never allowed; it exists so that a config setting it is
	// refused with the design document's reason instead of being ignored.
	ShardBaseURL *string `json:"shardBaseURL,omitempty"`
}

// NamedShard is an additional shard (the stacks declare "alpha").
type NamedShard struct {
	Name string `json:"name"`
	Endpoint
}

// OIDC is the hub's identity provider. Claims and prefixes are fixed by the hub.
type OIDC struct {
	IssuerURL string `json:"issuerURL"`
	ClientID  string `json:"clientID"`
	// CASecret names a Secret in kcp-system holding the issuer's CA chain, for an
	// issuer whose certificate is not in the kcp image's trust store.
	CASecret *SecretKeyRef `json:"caSecret,omitempty"`
	// CACertificates is the issuer's CA chain as PEM text (one or more CERTIFICATE
	// blocks), the other way to give it: the program writes it into a Secret of its own
	// (naming.OIDCIssuerCASecret) and the users' kubeconfig carries it for kubelogin.
	// Public data, not a secret. Not with CASecret.
	CACertificates string `json:"caCertificates,omitempty"`

	// Fixed by the hub; present only so that a config changing them is refused.
	UsernameClaim  *string `json:"usernameClaim,omitempty"`
	GroupsClaim    *string `json:"groupsClaim,omitempty"`
	UsernamePrefix *string `json:"usernamePrefix,omitempty"`
	GroupsPrefix   *string `json:"groupsPrefix,omitempty"`
}

// SecretKeyRef points at one key of a Secret.
type SecretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// Etcd is the shape of every shard's etcd cluster.
type Etcd struct {
	Members      int    `json:"members"`
	VolumeSize   string `json:"volumeSize"`
	StorageClass string `json:"storageClass"`
	// DefragSchedule is when each shard's etcd is defragmented, member by member (UTC).
	DefragSchedule string `json:"defragSchedule"`
}

// Network is the cluster's Service network.
type Network struct {
	ServiceCIDR string `json:"serviceCIDR"`
}

// LoadBalancer holds the request timeout every kcp backend gets at the edge.
type LoadBalancer struct {
	Timeout string `json:"timeout"`
}

// Hub is where the hub reads its kcp kubeconfig.
type Hub struct {
	Namespace          string `json:"namespace"`
	SecretName         string `json:"secretName"`
	SecretKey          string `json:"secretKey"`
	KubeconfigValidity string `json:"kubeconfigValidity"`
	// RemintGeneration: raise it to mint a new hub credential before the old one expires.
	RemintGeneration int `json:"remintGeneration"`
	// CopySchedule is when the operator's kubeconfig is copied into the hub's Secret
	// again, so that a renewed certificate reaches the hub without an up (UTC).
	CopySchedule string `json:"copySchedule"`
}

// Kind holds the settings of the kind stack.
type Kind struct {
	// Context is the kubeconfig context of the kind cluster.
	Context string `json:"context"`
	// Kubeconfig is the kubeconfig file that holds Context. Empty: $KUBECONFIG, then
	// ~/.kube/config, as kubectl reads them. The provider and the program itself (its
	// Helm record repair) both use it.
	Kubeconfig string `json:"kubeconfig"`
	// CertManagerPresent and EnvoyGatewayPresent say the cluster already has them,
	// so the stack does not install them.
	CertManagerPresent  bool `json:"certManagerPresent"`
	EnvoyGatewayPresent bool `json:"envoyGatewayPresent"`
	// CertManagerChart and EnvoyGatewayChart are where the stack installs them from
	// (upstream by default); refused with the matching ...Present flag, which skips them.
	CertManagerChart  ChartSource `json:"certManagerChart"`
	EnvoyGatewayChart ChartSource `json:"envoyGatewayChart"`
	// GatewayNodePort is the NodePort of the Envoy Gateway listener (kind maps it to the host).
	GatewayNodePort int `json:"gatewayNodePort"`
	// NodeZones is how many nodes the kind cluster has in distinct zones (distinct
	// topology.kubernetes.io/zone labels). Each etcd member needs a node of its own and
	// 3 or 5 members spread over that many zones, so etcd.members may not exceed it.
	// kind/cluster.yaml creates one node.
	NodeZones int `json:"nodeZones"`
	// IssuerClusterIP is the fixed ClusterIP of the OIDC issuer's Service in the kind
	// cluster (the hub's Dex): the split horizon answers the issuer's hostname (the host
	// of oidc.issuerURL) with it, as it answers the shard hostnames, so kcp's pods and
	// in-cluster clients reach the issuer by its public name. Empty: no answer.
	IssuerClusterIP string `json:"issuerClusterIP,omitempty"`
}

// GKE holds the settings of the gke stack: the existing cluster and what the
// program provisions around it.
type GKE struct {
	Project   string            `json:"project"`
	Location  string            `json:"location"`
	Cluster   string            `json:"cluster"`
	Zones     []string          `json:"zones"`
	NodePools GKENodePools      `json:"nodePools"`
	Snapshots GKESnapshots      `json:"snapshots"`
	DNS       GKEResponsePolicy `json:"dns"`
	Gateway   GKEGateway        `json:"gateway"`
}

// GKENodePools sizes the kcp pool and the dedicated etcd pool.
type GKENodePools struct {
	Kcp  NodePool `json:"kcp"`
	Etcd NodePool `json:"etcd"`
}

// NodePool is one autoscaled node pool; counts are per zone.
type NodePool struct {
	MachineType string `json:"machineType"`
	MinPerZone  int    `json:"minPerZone"`
	MaxPerZone  int    `json:"maxPerZone"`
	DiskSizeGb  int    `json:"diskSizeGb"`
}

// GKESnapshots configures etcd snapshots to GCS and the restore drill.
type GKESnapshots struct {
	Schedule      string `json:"schedule"`
	DrillSchedule string `json:"drillSchedule"`
	RetentionDays int    `json:"retentionDays"`
	GcloudImage   string `json:"gcloudImageTag"`
}

// GKEResponsePolicy configures the Cloud DNS split horizon.
type GKEResponsePolicy struct {
	// ExistingResponsePolicy adds the rules to a policy that is already bound to the
	// network (only one policy can be bound to a network) instead of creating one.
	ExistingResponsePolicy string `json:"existingResponsePolicy,omitempty"`
	TTL                    int    `json:"ttl"`
}

// GKEGateway configures the GKE Gateway in front of kcp.
type GKEGateway struct {
	ClassName string `json:"className"`
	// Exactly one of CertificateSecret and CertManagerClusterIssuer names the listener certificate.
	CertificateSecret        string `json:"certificateSecret,omitempty"`
	CertManagerClusterIssuer string `json:"certManagerClusterIssuer,omitempty"`
}

// Durations parsed once validation has passed.

// LoadBalancerTimeout is the validated edge timeout.
func (c *Config) LoadBalancerTimeout() time.Duration { return mustDuration(c.LoadBalancer.Timeout) }

// KubeconfigValidity is the validated lifetime of the hub credential.
func (c *Config) KubeconfigValidity() time.Duration { return mustDuration(c.Hub.KubeconfigValidity) }

func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic("config: duration used before validation: " + s)
	}
	return d
}

// AllShards is the root shard followed by the additional shards, in config order.
func (k Kcp) AllShards() []NamedShard {
	return append([]NamedShard{{Name: naming.RootShardName, Endpoint: k.RootShard}}, k.Shards...)
}

// EtcdJobsGcloudImageTag is the google-cloud-cli tag of the jobs that move etcd
// snapshots: gke.snapshots.gcloudImageTag on the gke stack. A kind stack declares no
// snapshot jobs and has no such key; a restore there (cmd/etcdrestore) runs the key's
// default, the image the gke stack runs unless it pins another.
func (c *Config) EtcdJobsGcloudImageTag() string {
	if c.GKE != nil {
		return c.GKE.Snapshots.GcloudImage
	}
	return DefaultGcloudImageTag
}
