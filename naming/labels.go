package naming

// Labels the kcp-operator puts on kcp pods; the owned Services, the disruption budgets,
// the spread constraints and etcd's NetworkPolicy select on them.
const (
	LabelComponent = "app.kubernetes.io/component"
	LabelInstance  = "app.kubernetes.io/instance"

	// The operator's component label values.
	ComponentRootShard      = "rootshard"
	ComponentRootShardProxy = "rootshard-proxy"
	ComponentShard          = "shard"
	ComponentFrontProxy     = "front-proxy"
)

// PoolLabel names the GKE node pool a node belongs to (kcp, etcd).
const PoolLabel = "railgrid.io/pool"

// Labels this program puts on its own pods.
const (
	// EtcdClientLabel marks pods other than kcp that may reach a shard's etcd (value: the
	// shard): the snapshot and defragmentation jobs.
	EtcdClientLabel = "railgrid.io/etcd-client"
	// EtcdJobLabel marks the snapshot, restore-drill, defragmentation and restore pods
	// (value: snapshot, drill, defrag or restore).
	EtcdJobLabel = "railgrid.io/etcd-job"
	// EtcdRestoreLabel marks the Jobs and pods of one restore (value: its id), so that
	// `kubectl wait -l` waits for exactly them.
	EtcdRestoreLabel = "railgrid.io/etcd-restore"
	// ShardLabel names the shard an object belongs to (the etcd objects, the restore Jobs).
	ShardLabel = "railgrid.io/shard"
	// AnnotationHubSecretUID is the UID of the hub's Secret on the pod of the Job that
	// fills it (components/hubkubeconfigcopy.go).
	AnnotationHubSecretUID = "railgrid.io/hub-secret-uid"
)

// The GKE etcd node pool's label and taint: etcd members, and the Jobs that restore
// their volumes, select the label and tolerate the taint.
const (
	EtcdPoolLabelKey   = "workload"
	EtcdPoolLabelValue = "etcd"
	EtcdPoolTaintKey   = "dedicated"
	EtcdPoolTaintValue = "etcd"
)

// Pod Security admission labels and levels
// (https://kubernetes.io/docs/concepts/security/pod-security-admission/).
const (
	PodSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"
	PodSecurityWarnLabel    = "pod-security.kubernetes.io/warn"
	PodSecurityRestricted   = "restricted"
)

// Annotations the Pulumi Kubernetes provider reads on an object.
const (
	// AnnotationWaitFor is what the provider awaits on an object before it reports it
	// created (pulumi-kubernetes >= 4.18 awaits a custom resource only when it is set).
	AnnotationWaitFor        = "pulumi.com/waitFor"
	AnnotationTimeoutSeconds = "pulumi.com/timeoutSeconds"
	// AnnotationPatchFieldManager makes the provider apply an object as FieldManager
	// instead of a random manager, and AnnotationPatchForce makes it force conflicting
	// fields over to it.
	AnnotationPatchFieldManager = "pulumi.com/patchFieldManager"
	AnnotationPatchForce        = "pulumi.com/patchForce"
	// AnnotationReplaceUnready makes the provider replace an object (a Job) that is
	// not ready, instead of awaiting it again, on the next update.
	AnnotationReplaceUnready = "pulumi.com/replaceUnready"
)

// FieldManager is the server-side apply field manager of every Kubernetes object this
// program writes (components/fieldmanager.go says why it never changes).
const FieldManager = "railgrid-kcp"

// NonRootUID is the user and group of every container this program defines (etcd's
// members and the jobs that snapshot and restore them), which own the etcd data. The
// official etcd image is distroless and declares no user, so the restricted level's
// runAsNonRoot needs a numeric user; 65532 is distroless's "nonroot".
const NonRootUID = 65532
