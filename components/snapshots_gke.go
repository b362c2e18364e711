package components

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp/serviceaccount"
	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp/storage"
	"github.com/pulumi/pulumi-random/sdk/v4/go/random"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	batchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	networkingv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/networking/v1"

	"github.com/railgrid/railgrid-kcp/components/etcdjobs"
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// gcsSnapshots takes scheduled etcd snapshots to a GCS bucket outside the cluster and
// proves on a schedule that the newest snapshot of each shard restores and serves keys.
type gcsSnapshots struct {
	project   string
	location  string // of the bucket
	snapshots config.GKESnapshots
	etcdImage string // the members' pinned image
}

func (s gcsSnapshots) DeclareSnapshots(ctx *pulumi.Context, name string, clusters []*EtcdCluster, opts ...pulumi.ResourceOption) (pulumi.Map, error) {
	// Protected like the bucket: a new suffix would be a new bucket name, and so a
	// replacement of the bucket.
	suffix, err := random.NewRandomId(ctx, name+"-bucket-suffix", &random.RandomIdArgs{ByteLength: pulumi.Int(4)}, append(opts, pulumi.Protect(true))...)
	if err != nil {
		return nil, err
	}
	// Protected: `pulumi destroy` refuses to delete the snapshots.
	bucket, err := storage.NewBucket(ctx, name+"-bucket", &storage.BucketArgs{
		Project:                  pulumi.String(s.project),
		Name:                     pulumi.Sprintf("kcp-etcd-snapshots-%s", suffix.Hex),
		Location:                 pulumi.String(strings.ToUpper(s.location)),
		UniformBucketLevelAccess: pulumi.Bool(true),
		PublicAccessPrevention:   pulumi.String("enforced"),
		Versioning:               &storage.BucketVersioningArgs{Enabled: pulumi.Bool(true)},
		LifecycleRules: storage.BucketLifecycleRuleArray{
			&storage.BucketLifecycleRuleArgs{
				Action:    &storage.BucketLifecycleRuleActionArgs{Type: pulumi.String("Delete")},
				Condition: &storage.BucketLifecycleRuleConditionArgs{Age: pulumi.Int(s.snapshots.RetentionDays)},
			},
			&storage.BucketLifecycleRuleArgs{
				Action: &storage.BucketLifecycleRuleActionArgs{Type: pulumi.String("Delete")},
				// NoAge: without it the provider adds age 0 to a rule that sets no age.
				Condition: &storage.BucketLifecycleRuleConditionArgs{
					DaysSinceNoncurrentTime: pulumi.Int(s.snapshots.RetentionDays),
					WithState:               pulumi.String("ARCHIVED"),
					NoAge:                   pulumi.Bool(true),
				},
			},
		},
	}, append(opts, pulumi.Protect(true))...)
	if err != nil {
		return nil, err
	}

	// The snapshot job may create objects and, as gcloud's upload needs, read and list
	// them, but never delete or overwrite one; the drill may only read them.
	snapshotSA, err := s.workloadIdentity(ctx, name+"-snapshots", "kcp-etcd-snapshots", naming.SnapshotServiceAccount, bucket, SnapshotRoles, opts)
	if err != nil {
		return nil, err
	}
	drillSA, err := s.workloadIdentity(ctx, name+"-drill", "kcp-etcd-restore-drill", naming.DrillServiceAccount, bucket, DrillRoles, opts)
	if err != nil {
		return nil, err
	}
	jobsPolicy, err := newEtcdJobsNetworkPolicy(ctx, name, opts)
	if err != nil {
		return nil, err
	}

	images := jobImages{etcd: s.etcdImage, gcloud: config.GcloudImage(s.snapshots.GcloudImage)}
	for _, c := range clusters {
		deps := pulumi.DependsOn([]pulumi.Resource{c.StatefulSet, snapshotSA, drillSA, jobsPolicy})
		if _, err := batchv1.NewCronJob(ctx, name+"-"+c.Shard+"-snapshot", &batchv1.CronJobArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.EtcdSnapshotCronJob(c.Shard)), Namespace: pulumi.String(naming.NamespaceEtcd)},
			Spec:     snapshotCronJob(c.Shard, s.snapshots.Schedule, images, bucket.Name),
		}, append(opts, deps)...); err != nil {
			return nil, err
		}
		if _, err := batchv1.NewCronJob(ctx, name+"-"+c.Shard+"-drill", &batchv1.CronJobArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.EtcdRestoreDrillCronJob(c.Shard)), Namespace: pulumi.String(naming.NamespaceEtcd)},
			Spec:     drillCronJob(c.Shard, s.snapshots.DrillSchedule, images, bucket.Name),
		}, append(opts, deps)...); err != nil {
			return nil, err
		}
	}
	return pulumi.Map{
		"bucket":           bucket.Name,
		"snapshotSchedule": pulumi.String(s.snapshots.Schedule),
		"drillSchedule":    pulumi.String(s.snapshots.DrillSchedule),
		"retentionDays":    pulumi.Int(s.snapshots.RetentionDays),
	}, nil
}

// The bucket roles of the two Google service accounts. roles/storage.objectCreator
// alone is not enough: `gcloud storage cp` also gets and lists objects. Neither role
// holds storage.objects.delete, which deleting and overwriting an object need
// (https://cloud.google.com/storage/docs/access-control/iam-roles).
var (
	SnapshotRoles = []string{"roles/storage.objectCreator", "roles/storage.objectViewer"}
	DrillRoles    = []string{"roles/storage.objectViewer"}
)

// newEtcdJobsNetworkPolicy admits no traffic at all into the snapshot and drill pods:
// they hold a full copy of a shard's data and serve nothing. The drill's throwaway
// etcd listens on 127.0.0.1 only.
func newEtcdJobsNetworkPolicy(ctx *pulumi.Context, name string, opts []pulumi.ResourceOption) (*networkingv1.NetworkPolicy, error) {
	return networkingv1.NewNetworkPolicy(ctx, name+"-jobs-netpol", &networkingv1.NetworkPolicyArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.EtcdJobsNetworkPolicy), Namespace: pulumi.String(naming.NamespaceEtcd)},
		Spec: &networkingv1.NetworkPolicySpecArgs{
			PodSelector: &metav1.LabelSelectorArgs{MatchExpressions: metav1.LabelSelectorRequirementArray{
				&metav1.LabelSelectorRequirementArgs{Key: pulumi.String(naming.EtcdJobLabel), Operator: pulumi.String("Exists")},
			}},
			PolicyTypes: pulumi.StringArray{pulumi.String("Ingress")},
		},
	}, opts...)
}

// workloadIdentity creates a Google service account with the given roles on the bucket,
// and a Kubernetes ServiceAccount in the etcd namespace bound to it through Workload
// Identity.
func (s gcsSnapshots) workloadIdentity(ctx *pulumi.Context, name, accountID, ksa string, bucket *storage.Bucket, roles []string, opts []pulumi.ResourceOption) (*corev1.ServiceAccount, error) {
	project := s.project
	gsa, err := serviceaccount.NewAccount(ctx, name+"-gsa", &serviceaccount.AccountArgs{
		Project:     pulumi.String(project),
		AccountId:   pulumi.String(accountID),
		DisplayName: pulumi.String("railgrid-kcp " + ksa),
	}, opts...)
	if err != nil {
		return nil, err
	}
	for _, role := range roles {
		if _, err := storage.NewBucketIAMMember(ctx, name+"-bucket-"+strings.TrimPrefix(role, "roles/storage."), &storage.BucketIAMMemberArgs{
			Bucket: bucket.Name,
			Role:   pulumi.String(role),
			Member: gsa.Member,
		}, opts...); err != nil {
			return nil, err
		}
	}
	if _, err := serviceaccount.NewIAMMember(ctx, name+"-workload-identity", &serviceaccount.IAMMemberArgs{
		ServiceAccountId: gsa.Name,
		Role:             pulumi.String("roles/iam.workloadIdentityUser"),
		Member:           pulumi.String(WorkloadIdentityMember(project, naming.NamespaceEtcd, ksa)),
	}, opts...); err != nil {
		return nil, err
	}
	return corev1.NewServiceAccount(ctx, name+"-ksa", &corev1.ServiceAccountArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:        pulumi.String(ksa),
			Namespace:   pulumi.String(naming.NamespaceEtcd),
			Annotations: pulumi.StringMap{"iam.gke.io/gcp-service-account": gsa.Email},
		},
	}, opts...)
}

// WorkloadIdentityMember is the IAM member of a Kubernetes ServiceAccount.
func WorkloadIdentityMember(project, namespace, ksa string) string {
	return fmt.Sprintf("serviceAccount:%s.svc.id.goog[%s/%s]", project, namespace, ksa)
}

// snapshotCronJob saves a snapshot from one member, checks it, and uploads it
// (etcdjobs.SnapshotSteps). Failures stay visible as failed Jobs.
func snapshotCronJob(shard, schedule string, images jobImages, bucket pulumi.StringOutput) *batchv1.CronJobSpecArgs {
	init, main := etcdjobs.SnapshotSteps(shard)
	return etcdJob{
		schedule: schedule, backoffLimit: 2, activeDeadlineSeconds: 1800,
		// The client label lets the pod through the etcd NetworkPolicy.
		labels:         pulumi.StringMap{naming.EtcdClientLabel: pulumi.String(shard), naming.EtcdJobLabel: pulumi.String("snapshot")},
		serviceAccount: naming.SnapshotServiceAccount,
		volume:         etcdjobs.BackupVolume,
		initContainers: images.containers(init, bucket),
		containers:     images.containers(main, bucket),
	}.cronJobSpec()
}

// drillCronJob proves a restore: it takes the newest snapshot of the shard, checks it,
// restores it into scratch storage with the restore's own steps (etcdjobs.RestoreSteps,
// which cmd/etcdrestore runs into the members' volumes), starts a throwaway etcd on it
// and confirms that it serves keys. Any step failing fails the Job. The pod has no etcd
// client label: it never talks to the live etcd.
func drillCronJob(shard, schedule string, images jobImages, bucket pulumi.StringOutput) *batchv1.CronJobSpecArgs {
	init, main := etcdjobs.DrillSteps(shard)
	return etcdJob{
		schedule: schedule, backoffLimit: 1, activeDeadlineSeconds: 3600,
		labels:         pulumi.StringMap{naming.EtcdJobLabel: pulumi.String("drill")},
		serviceAccount: naming.DrillServiceAccount,
		volume:         etcdjobs.ScratchVolume,
		initContainers: images.containers(init, bucket),
		containers:     images.containers(main, bucket),
	}.cronJobSpec()
}
