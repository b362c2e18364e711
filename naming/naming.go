// Package naming is the one place for the names this program derives: the Namespaces,
// Services, Deployments, StatefulSets, claims, Secrets, ConfigMaps, routes and kcp
// objects it declares or that the kcp-operator and Helm create from what it declares
// (naming.go); the in-cluster DNS names of those Services, their ports and URLs
// (addresses.go); and the labels, annotations and field manager the objects carry
// (labels.go). The config checks the names for collisions before anything is declared,
// the components declare the objects with them, and cmd/verify and the tests look the
// objects up by them; a naming rule changes here, once, and no package imports the
// components to learn a name.
//
// It sits at the bottom of the tree: it imports nothing of this repository and no
// Pulumi SDK, so every package may import it and cmd/verify does not link Pulumi for a
// few strings.
//
// The operator's own naming rules are mirrored here (kcp-operator
// internal/resources/resources.go: GetRootShardDeploymentName "<name>-kcp",
// GetRootShardProxyDeploymentName "<name>-proxy", GetShardDeploymentName
// "<name>-shard-kcp", and the FrontProxy's "<name>-front-proxy"), so that owned
// Services, waits and checks select exactly what the operator creates.
package naming

import "fmt"

// Namespaces.
const (
	// Namespaces the program declares.
	NamespaceEtcd     = "etcd"
	NamespaceOperator = "kcp-operator"
	NamespaceKcp      = "kcp-system"

	// Namespaces of the add-ons the kind stack installs (Helm creates them).
	NamespaceCertManager  = "cert-manager"
	NamespaceEnvoyGateway = "envoy-gateway-system"

	// NamespaceKubeSystem is the cluster's own namespace, where kind's CoreDNS runs and
	// the kind split horizon keeps its ConfigMaps.
	NamespaceKubeSystem = "kube-system"
)

// Objects with fixed names.
const (
	// RootShardName is the name of the RootShard object (the design document's "root").
	RootShardName = "root"
	// FrontProxyName is the name of the FrontProxy object.
	FrontProxyName = "frontproxy"

	// OperatorReleaseName is the kcp-operator Helm release.
	OperatorReleaseName = "kcp-operator"
	// OperatorDeployment is the operator's Deployment: the chart names it after the release.
	OperatorDeployment = OperatorReleaseName
	// SelfSignedIssuer is the cert-manager Issuer the operator builds kcp's CAs from.
	SelfSignedIssuer = "selfsigned"

	// KubeconfigName is the Kubeconfig object (and its Secret) of re-mint generation 0;
	// later generations use KubeconfigObjectName. The operator writes the kubeconfig
	// under KubeconfigSecretKey.
	KubeconfigName      = "kcp-kubeconfig-frontproxy"
	KubeconfigSecretKey = "kubeconfig"
	// HubCopy names what copies the operator's kubeconfig into the hub's Secret, in
	// NamespaceKcp: the ServiceAccount, the ConfigMap of the copy's kustomization
	// (HubCopyKustomizationKey), the CronJob, and the Role and RoleBinding in the hub's
	// namespace. It is also the copy's field manager on the hub's Secret.
	HubCopy                 = "railgrid-kcp-hub-copy"
	HubCopyKustomizationKey = "kustomization.yaml"
	// HubSecretFieldManager is the field manager Pulumi applies the hub's Secret with,
	// other than FieldManager (components/hubkubeconfig.go says why).
	HubSecretFieldManager = "railgrid-kcp-hub-secret"
	// KubeconfigUsername is the user the hub's Kubeconfig object asks for (the client
	// certificate's CN), and KubeconfigAdminGroup its group (O): the front proxy drops
	// system:masters, so admin access through it needs system:kcp:admin.
	KubeconfigUsername   = "kcp-admin"
	KubeconfigAdminGroup = "system:kcp:admin"

	// EdgeGatewayName names the edge's Gateway, and on kind its GatewayClass, EnvoyProxy
	// and traffic policies.
	EdgeGatewayName = "kcp-edge"
	// EdgeCertificateSecret is the Secret cert-manager issues the GKE listener
	// certificate into, when the config names a ClusterIssuer.
	EdgeCertificateSecret = "kcp-edge-tls"

	// SplitHorizonHostsConfigMap holds the kind split horizon's answers.
	SplitHorizonHostsConfigMap = "railgrid-kcp-hosts"
	// SplitHorizonCorefileConfigMap is the Corefile kind's CoreDNS reads: kubeadm's plus
	// the hosts stanza.
	SplitHorizonCorefileConfigMap = "railgrid-kcp-corefile"

	// OIDCIssuerCASecret is the Secret in NamespaceKcp the program writes the issuer's CA
	// chain into (oidc.caCertificates), under OIDCIssuerCAKey; every kcp server's
	// spec.auth.oidc.caFileRef names it.
	OIDCIssuerCASecret = "railgrid-kcp-oidc-ca"
	OIDCIssuerCAKey    = "ca.crt"

	// ResponsePolicyName is the Cloud DNS response policy the gke stack creates when the
	// config does not name an existing one.
	ResponsePolicyName = "railgrid-kcp"

	// The Kubernetes ServiceAccounts of the GKE snapshot and restore-drill jobs, and the
	// NetworkPolicy that shuts their pods off (namespace etcd).
	SnapshotServiceAccount = "etcd-snapshots"
	DrillServiceAccount    = "etcd-restore-drill"
	EtcdJobsNetworkPolicy  = "etcd-jobs"
)

// kubeadm's CoreDNS (a kind cluster's), in NamespaceKubeSystem, which the kind split
// horizon extends: its ConfigMap and Deployment are kubeadm's, the Deployment's
// config-volume is pointed at SplitHorizonCorefileConfigMap.
const (
	CoreDNSConfigMap  = "coredns"
	CoreDNSDeployment = "coredns"
	CoreDNSContainer  = "coredns"
	// CoreDNSConfigVolume is kubeadm's volume of the Corefile, mounted at /etc/coredns.
	CoreDNSConfigVolume = "config-volume"
	CorefileKey         = "Corefile"
	CorefilePath        = "/etc/coredns/Corefile"
)

// The resource hooks the program registers with the Pulumi engine.
const (
	// HelmRecordRepairHook runs before every Helm release of the stack is installed or
	// upgraded.
	HelmRecordRepairHook = "railgrid-kcp-helm-interrupted-records"
	// KcpRolloutHook runs after a RootShard, Shard or FrontProxy is updated and returns
	// once the operator has rolled that object's Deployments out to its new spec.
	KcpRolloutHook = "railgrid-kcp-wait-for-kcp-rollout"
	// RootShardFirstHook runs before a Shard or the FrontProxy is updated and refuses the
	// update while the root shard has not rolled out.
	RootShardFirstHook = "railgrid-kcp-root-shard-first"
)

// RootShardDeployment is the Deployment (and Service) the operator creates for a RootShard.
func RootShardDeployment(name string) string { return name + "-kcp" }

// RootShardProxyDeployment is the Deployment (and Service) of a RootShard's proxy.
func RootShardProxyDeployment(name string) string { return name + "-proxy" }

// ShardDeployment is the Deployment (and Service) the operator creates for a Shard.
func ShardDeployment(name string) string { return name + "-shard-kcp" }

// FrontProxyDeployment is the Deployment (and Service) the operator creates for a FrontProxy.
func FrontProxyDeployment(name string) string { return name + "-front-proxy" }

// OwnedServiceName is the Service this program owns in front of a kcp component (the
// front proxy, the root shard or a shard), with a fixed ClusterIP.
func OwnedServiceName(component string) string { return "kcp-" + component }

// ShardServerCertificate is the cert-manager Certificate, and its Secret, that the
// operator issues a RootShard's or a Shard's serving certificate into (kcp-operator
// GetRootShardCertificateName and GetShardCertificateName: "<name>-server"). Its ca.crt
// is the CA that issued it.
func ShardServerCertificate(shard string) string { return shard + "-server" }

// FrontProxyServerCertificate is the Certificate, and its Secret, of a FrontProxy's
// serving certificate (kcp-operator GetFrontProxyCertificateName:
// "<root shard>-<front proxy>-server").
func FrontProxyServerCertificate(rootShard, frontProxy string) string {
	return rootShard + "-" + frontProxy + "-server"
}

// KcpRootShard is the name of the root shard's Shard object (core.kcp.io) in kcp's root
// workspace: the operator passes the root shard no --shard-name, and kcp's default is
// "root", whatever the RootShard object is called.
const KcpRootShard = "root"

// KcpShardName is the name of a shard's Shard object (core.kcp.io) in kcp's root
// workspace: the operator passes --shard-name=<Shard object name>.
func KcpShardName(shard string) string { return shard }

// EdgeRouteName is the edge route (TLSRoute on kind, HTTPRoute on GKE) of a component.
func EdgeRouteName(component string) string { return "kcp-" + component }

// EdgeListenerName is the GKE Gateway listener of a component.
func EdgeListenerName(component string) string { return "https-" + component }

// KubeconfigObjectName is the name of the Kubeconfig object, and of the Secret the
// operator writes for it, of a re-mint generation. Each generation gets a name of its
// own because the operator names the client Certificate after the Kubeconfig
// (kubeconfig-cert-<name>) and copies whatever that Certificate's Secret holds the
// moment it is Ready: re-creating an object of the same name finds the previous
// generation's Certificate Ready and hands back the previous credential, while a new
// name makes cert-manager issue a new Certificate from scratch, so the Secret the
// operator writes can only hold a credential issued for this generation.
func KubeconfigObjectName(generation int) string {
	if generation == 0 {
		return KubeconfigName
	}
	return fmt.Sprintf("%s-remint-%d", KubeconfigName, generation)
}

// HubCopyJob is the Job `pulumi up` runs to copy a re-mint generation's kubeconfig into
// the hub's Secret; the CronJob HubCopy repeats the copy after each renewal.
func HubCopyJob(generation int) string { return fmt.Sprintf("%s-mint-%d", HubCopy, generation) }

// EtcdName is the StatefulSet and client Service of a shard's etcd.
func EtcdName(shard string) string { return "etcd-" + shard }

// EtcdHeadlessService gives each etcd member a stable DNS name.
func EtcdHeadlessService(shard string) string { return EtcdName(shard) + "-headless" }

// EtcdMemberName is the name of member i of a shard's etcd: its pod's name, which the
// member also takes as its etcd name (--name=$(HOSTNAME)).
func EtcdMemberName(shard string, member int) string {
	return fmt.Sprintf("%s-%d", EtcdName(shard), member)
}

// EtcdDataClaimTemplate is the volume claim template of the etcd StatefulSets.
const EtcdDataClaimTemplate = "data"

// EtcdClaimName is the volume claim of member i of a shard's etcd StatefulSet: the
// claim template, the StatefulSet's name and the ordinal.
func EtcdClaimName(shard string, member int) string {
	return EtcdDataClaimTemplate + "-" + EtcdMemberName(shard, member)
}

// Where an etcd member's volume is mounted, and its data directory on it: a
// subdirectory, so that a restore can move the old data aside on the same volume and
// write the restored data where the member reads it.
const (
	EtcdDataMount = "/var/lib/etcd"
	EtcdDataDir   = EtcdDataMount + "/data"
)

// EtcdRestoreJob is the Job of one restore (named by its id, at most 16 characters)
// that restores member i of a shard's etcd from a snapshot: cmd/etcdrestore prints it,
// and it mounts that member's claim. A new restore gets Jobs of its own: a Job's pod
// template cannot be changed, and the Jobs of an earlier one stay to be read.
func EtcdRestoreJob(shard string, member int, id string) string {
	return EtcdMemberName(shard, member) + "-restore-" + id
}

// EtcdRestoreToken is the --initial-cluster-token of one restore of a shard's etcd: new
// for every restore, so a restored member never joins a member that still holds the
// cluster of before.
func EtcdRestoreToken(shard, id string) string { return EtcdName(shard) + "-restore-" + id }

// EtcdSnapshotCronJob is the GKE CronJob that snapshots a shard's etcd.
func EtcdSnapshotCronJob(shard string) string { return EtcdName(shard) + "-snapshot" }

// EtcdRestoreDrillCronJob is the GKE CronJob that restores a shard's newest snapshot.
func EtcdRestoreDrillCronJob(shard string) string { return EtcdName(shard) + "-restore-drill" }

// EtcdDefragCronJob is the CronJob that defragments a shard's etcd.
func EtcdDefragCronJob(shard string) string { return EtcdName(shard) + "-defrag" }

// UserKubeconfigCluster is the cluster, and the context, of the kubeconfig a stack exports
// for its users (output userKubeconfig); UserKubeconfigUser is its user, who signs in
// with OIDC. Named after the stack, so that the kubeconfigs of two stacks can be merged.
func UserKubeconfigCluster(stack string) string { return "railgrid-kcp-" + stack }

// UserKubeconfigUser: see UserKubeconfigCluster.
func UserKubeconfigUser(stack string) string { return "railgrid-kcp-" + stack + "-oidc" }
