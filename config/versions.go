package config

// Pinned versions. The design document: "Pin every kcp image explicitly, including the
// root shard's proxy image; otherwise a component follows the operator's default and
// drifts on the next operator upgrade."
const (
	DefaultKcpVersion           = "v0.33.0"
	DefaultOperatorChartVersion = "0.7.10"
	DefaultOperatorImageTag     = "v0.10.0"
	DefaultEtcdVersion          = "v3.6.14"
	DefaultCertManagerVersion   = "v1.20.2"
	DefaultEnvoyGatewayVersion  = "v1.9.0"
	DefaultGcloudImageTag       = "546.0.0-stable"
	DefaultDNSCheckImage        = "curlimages/curl:8.10.1"
	// EtcdDefragImage runs the defragmentation's script (a shell, wget and sed): the etcd
	// image is distroless. The tests run the script in Debian's busybox-static of this
	// version.
	EtcdDefragImage = "docker.io/library/busybox:1.35.0-glibc"
	// HubCopyImage copies the hub's kubeconfig: kubectl's own image, whose built-in
	// kustomize turns the operator's Secret into the hub's. The tests run the kubectl of
	// this version.
	HubCopyImage = "registry.k8s.io/kubectl:v1.34.4"
)

// Image repositories and chart sources. Repositories are fixed: only tags move.
const (
	KcpImageRepository      = "ghcr.io/kcp-dev/kcp"
	OperatorImageRepository = "ghcr.io/kcp-dev/kcp-operator"
	EtcdImageRepository     = "gcr.io/etcd-development/etcd"
	GcloudImageRepository   = "gcr.io/google.com/cloudsdktool/google-cloud-cli"

	// The charts' names are fixed; where each comes from is configurable (a mirror), with
	// these upstream sources as the defaults (see ChartSource).
	OperatorChartName       = "kcp-operator"
	OperatorChartRepository = "https://kcp-dev.github.io/helm-charts"
	CertManagerChartName    = "cert-manager"
	CertManagerChartRepo    = "https://charts.jetstack.io"
	EnvoyGatewayChartName   = "gateway-helm"
	EnvoyGatewayChartRepo   = "oci://docker.io/envoyproxy"
)

// KnownOperatorPairs lists the kcp-operator chart versions this program was checked
// against, with the operator image each one ships. A chart with another image is an
// untested combination: the chart's CRDs are templates and must match the operator.
var KnownOperatorPairs = map[string]string{
	"0.7.10": "v0.10.0",
}

// GcloudImage is the google-cloud-cli image of a tag.
func GcloudImage(tag string) string { return GcloudImageRepository + ":" + tag }

// EtcdImage is the official etcd image of a version.
func EtcdImage(version string) string { return EtcdImageRepository + ":" + version }
