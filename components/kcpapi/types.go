// Package kcpapi holds the parts of the kcp-operator operator.kcp.io/v1alpha1 API that
// railgrid-kcp writes, as small Go structs carrying the CRD's json names. The operator's
// own Go SDK is not served by the Go module proxy, so these mirror its field names
// (sdk/apis/operator/v1alpha1) for the fields this program sets, and nothing more.
//
// There is deliberately no shardBaseURL field: the design document forbids setting it.
package kcpapi

import corev1 "k8s.io/api/core/v1"

const (
	Group      = "operator.kcp.io"
	APIVersion = Group + "/v1alpha1"

	KindRootShard  = "RootShard"
	KindShard      = "Shard"
	KindFrontProxy = "FrontProxy"
	KindKubeconfig = "Kubeconfig"
)

// ImageSpec pins one image.
type ImageSpec struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	Name string `json:"name"`
}

// RootShardConfig points a Shard or FrontProxy at its RootShard.
type RootShardConfig struct {
	Ref LocalObjectReference `json:"ref"`
}

// EtcdConfig lists every member of the shard's etcd.
type EtcdConfig struct {
	Endpoints []string `json:"endpoints"`
}

// CertificateTemplate adjusts one certificate the operator issues.
type CertificateTemplate struct {
	Spec CertificateSpecTemplate `json:"spec"`
}

// CertificateSpecTemplate is the subset of cert-manager's Certificate spec we set.
type CertificateSpecTemplate struct {
	DNSNames []string     `json:"dnsNames,omitempty"`
	Subject  *X509Subject `json:"subject,omitempty"`
}

// X509Subject is part of a certificate subject.
type X509Subject struct {
	OrganizationalUnits []string `json:"organizationalUnits,omitempty"`
}

// AuthSpec configures authentication of a shard or the front proxy.
type AuthSpec struct {
	ServiceAccount *ServiceAccountAuthentication `json:"serviceAccount,omitempty"`
	OIDC           *OIDCConfiguration            `json:"oidc,omitempty"`
}

// ServiceAccountAuthentication enables kcp service-account tokens (required with OIDC
// on the front proxy).
type ServiceAccountAuthentication struct {
	Enabled bool `json:"enabled"`
}

// OIDCConfiguration becomes kcp's --oidc-* flags.
type OIDCConfiguration struct {
	IssuerURL      string        `json:"issuerURL"`
	ClientID       string        `json:"clientID"`
	GroupsClaim    string        `json:"groupsClaim"`
	UsernameClaim  string        `json:"usernameClaim"`
	GroupsPrefix   string        `json:"groupsPrefix"`
	UsernamePrefix string        `json:"usernamePrefix"`
	CAFileRef      *SecretKeyRef `json:"caFileRef,omitempty"`
}

// SecretKeyRef names one key of a Secret in the same namespace.
type SecretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// ExternalConfig is the address clients use for the root shard or front proxy.
type ExternalConfig struct {
	Hostname string `json:"hostname"`
	Port     int    `json:"port"`
}

// ObjectReference names a cert-manager issuer.
type ObjectReference struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

// Certificates says where the root CA comes from.
type Certificates struct {
	IssuerRef *ObjectReference `json:"issuerRef,omitempty"`
}

// CacheConfig selects kcp's cache server.
type CacheConfig struct {
	Embedded *EmbeddedCacheConfiguration `json:"embedded,omitempty"`
}

// EmbeddedCacheConfiguration runs the cache inside the root shard.
type EmbeddedCacheConfiguration struct {
	Enabled bool `json:"enabled"`
}

// CommonShardSpec is shared by RootShard and Shard.
type CommonShardSpec struct {
	Image                *ImageSpec                     `json:"image,omitempty"`
	Replicas             *int32                         `json:"replicas,omitempty"`
	ExtraArgs            []string                       `json:"extraArgs,omitempty"`
	CertificateTemplates map[string]CertificateTemplate `json:"certificateTemplates,omitempty"`
	Auth                 *AuthSpec                      `json:"auth,omitempty"`
	Etcd                 EtcdConfig                     `json:"etcd"`
	Resources            *ResourceRequirements          `json:"resources,omitempty"`
	DeploymentTemplate   *DeploymentTemplate            `json:"deploymentTemplate,omitempty"`
}

// DeploymentTemplate is what the operator copies into a server's Deployment. Of the pod
// spec, it replaces nodeSelector, affinity, tolerations and topologySpreadConstraints
// whole (internal/resources/utils/deployments.go, applyPodSpecTemplate).
type DeploymentTemplate struct {
	Spec *DeploymentSpecTemplate `json:"spec,omitempty"`
}

// DeploymentSpecTemplate holds the pod template.
type DeploymentSpecTemplate struct {
	Template *PodTemplateSpec `json:"template,omitempty"`
}

// PodTemplateSpec holds the pod spec's template.
type PodTemplateSpec struct {
	Spec *PodSpecTemplate `json:"spec,omitempty"`
}

// PodSpecTemplate is the pod placement the program sets, with the core API's types.
type PodSpecTemplate struct {
	NodeSelector              map[string]string                 `json:"nodeSelector,omitempty"`
	Affinity                  *corev1.Affinity                  `json:"affinity,omitempty"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
}

// ResourceRequirements are a container's requests and limits, as corev1 spells them.
type ResourceRequirements struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

// RootShardProxySpec configures the operator's internal proxy in front of the root shard.
type RootShardProxySpec struct {
	Image              *ImageSpec          `json:"image,omitempty"`
	Replicas           *int32              `json:"replicas,omitempty"`
	DeploymentTemplate *DeploymentTemplate `json:"deploymentTemplate,omitempty"`
}

// RootShardSpec is the spec of a RootShard.
type RootShardSpec struct {
	CommonShardSpec
	External     ExternalConfig      `json:"external"`
	Certificates Certificates        `json:"certificates"`
	Cache        CacheConfig         `json:"cache"`
	Proxy        *RootShardProxySpec `json:"proxy,omitempty"`
}

// ShardSpec is the spec of an additional Shard.
type ShardSpec struct {
	CommonShardSpec
	RootShard RootShardConfig `json:"rootShard"`
}

// FrontProxySpec is the spec of a FrontProxy.
type FrontProxySpec struct {
	RootShard            RootShardConfig                `json:"rootShard"`
	Image                *ImageSpec                     `json:"image,omitempty"`
	Replicas             *int32                         `json:"replicas,omitempty"`
	Auth                 *AuthSpec                      `json:"auth,omitempty"`
	External             *ExternalConfig                `json:"external,omitempty"`
	CertificateTemplates map[string]CertificateTemplate `json:"certificateTemplates,omitempty"`
	DeploymentTemplate   *DeploymentTemplate            `json:"deploymentTemplate,omitempty"`
}

// KubeconfigTarget says which component the minted kubeconfig talks to.
type KubeconfigTarget struct {
	FrontProxyRef *LocalObjectReference `json:"frontProxyRef,omitempty"`
}

// KubeconfigSpec is the spec of a Kubeconfig.
type KubeconfigSpec struct {
	Username            string               `json:"username"`
	Groups              []string             `json:"groups,omitempty"`
	Validity            string               `json:"validity"`
	SecretRef           LocalObjectReference `json:"secretRef"`
	Target              KubeconfigTarget     `json:"target"`
	CertificateTemplate *CertificateTemplate `json:"certificateTemplate,omitempty"`
}

// Int32 returns a pointer to n, for optional counts.
func Int32(n int) *int32 {
	v := int32(n)
	return &v
}
