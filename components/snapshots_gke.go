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

	gcloudImage := fmt.Sprintf("%s:%s", config.GcloudImageRepository, s.snapshots.GcloudImage)
	for _, c := range clusters {
		deps := pulumi.DependsOn([]pulumi.Resource{c.StatefulSet, snapshotSA, drillSA, jobsPolicy})
		if _, err := batchv1.NewCronJob(ctx, name+"-"+c.Shard+"-snapshot", &batchv1.CronJobArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.EtcdSnapshotCronJob(c.Shard)), Namespace: pulumi.String(naming.NamespaceEtcd)},
			Spec:     snapshotCronJob(c.Shard, s.snapshots.Schedule, s.etcdImage, gcloudImage, bucket.Name),
		}, append(opts, deps)...); err != nil {
			return nil, err
		}
		if _, err := batchv1.NewCronJob(ctx, name+"-"+c.Shard+"-drill", &batchv1.CronJobArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.EtcdRestoreDrillCronJob(c.Shard)), Namespace: pulumi.String(naming.NamespaceEtcd)},
			Spec:     drillCronJob(c.Shard, s.snapshots.DrillSchedule, s.etcdImage, gcloudImage, bucket.Name),
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

// EtcdJobLabel marks the snapshot and restore-drill pods (value: snapshot or drill).
const EtcdJobLabel = "railgrid.io/etcd-job"

// newEtcdJobsNetworkPolicy admits no traffic at all into the snapshot and drill pods:
// they hold a full copy of a shard's data and serve nothing. The drill's throwaway
// etcd listens on 127.0.0.1 only.
func newEtcdJobsNetworkPolicy(ctx *pulumi.Context, name string, opts []pulumi.ResourceOption) (*networkingv1.NetworkPolicy, error) {
	return networkingv1.NewNetworkPolicy(ctx, name+"-jobs-netpol", &networkingv1.NetworkPolicyArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.EtcdJobsNetworkPolicy), Namespace: pulumi.String(naming.NamespaceEtcd)},
		Spec: &networkingv1.NetworkPolicySpecArgs{
			PodSelector: &metav1.LabelSelectorArgs{MatchExpressions: metav1.LabelSelectorRequirementArray{
				&metav1.LabelSelectorRequirementArgs{Key: pulumi.String(EtcdJobLabel), Operator: pulumi.String("Exists")},
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

// SnapshotUploadScript and the drill's scripts run in the google-cloud-cli image with
// bash and coreutils only: that image puts python3 on PATH only on arm64.
//
// SnapshotUploadScript uploads the checked snapshot as gs://<bucket>/<shard>/<UTC
// timestamp>.db. --no-clobber: a retry after an upload that did land must not try to
// overwrite it, which needs storage.objects.delete.
const SnapshotUploadScript = `set -euo pipefail
ts="$(date -u +%Y%m%dT%H%M%SZ)"
target="gs://${BUCKET}/${SHARD}/${ts}.db"
for attempt in 1 2 3 4 5; do
  # Workload Identity credentials can lag the pod start by a few seconds.
  if gcloud storage cp --no-clobber /backup/snapshot.db "${target}"; then exit 0; fi
  sleep 10
done
echo "upload of the ${SHARD} snapshot to ${target} failed" >&2
exit 1`

// DrillFetchScript downloads the newest snapshot of the shard.
const DrillFetchScript = `set -euo pipefail
prefix="gs://${BUCKET}/${SHARD}/"
if ! listing="$(gcloud storage ls "${prefix}")"; then
  echo "cannot list ${prefix}: no snapshot of ${SHARD} yet, or no read access" >&2
  exit 1
fi
newest="$(printf '%s\n' "${listing}" | { grep '\.db$' || true; } | sort | tail -n 1)"
if [ -z "${newest}" ]; then echo "no snapshot of ${SHARD} in ${prefix}" >&2; exit 1; fi
echo "restoring ${newest}"
gcloud storage cp "${newest}" /scratch/snapshot.db`

// DrillVerifyScript counts the keys the restored etcd serves through its JSON gateway,
// over bash's /dev/tcp (no python3 or curl needed). Key and range_end "\0" (AA==)
// select the whole keyspace; etcd leaves out a count of 0.
const DrillVerifyScript = `set -euo pipefail
body='{"key":"AA==","range_end":"AA==","count_only":true}'
ask() {
  exec 3<>/dev/tcp/127.0.0.1/2379
  printf 'POST /v3/kv/range HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %s\r\n\r\n%s' "${#body}" "${body}" >&3
  cat <&3
}
count=""
for attempt in $(seq 1 60); do
  if reply="$(ask 2>/dev/null)"; then
    case "${reply}" in
      "HTTP/1."?" 200"*)
        count="$(printf '%s' "${reply}" | { grep -o '"count":"[0-9]*"' || true; } | tr -dc 0-9)"
        count="${count:-0}"
        break ;;
    esac
  fi
  sleep 2
done
if [ -z "${count}" ]; then echo "the restored etcd never answered on 127.0.0.1:2379" >&2; exit 1; fi
if [ "${count}" -eq 0 ]; then echo "the restored snapshot serves no keys" >&2; exit 1; fi
echo "restore drill passed: ${count} keys served"`

// snapshotCronJob saves a snapshot from one member (etcdctl refuses several endpoints),
// checks it, and uploads it. Failures stay visible as failed Jobs.
func snapshotCronJob(shard, schedule, etcdImage, gcloudImage string, bucket pulumi.StringOutput) *batchv1.CronJobSpecArgs {
	client := fmt.Sprintf("http://%s:%d", naming.EtcdServiceHost(shard), EtcdClientPort)
	return &batchv1.CronJobSpecArgs{
		Schedule:                   pulumi.String(schedule),
		ConcurrencyPolicy:          pulumi.String("Forbid"),
		StartingDeadlineSeconds:    pulumi.Int(600),
		SuccessfulJobsHistoryLimit: pulumi.Int(3),
		FailedJobsHistoryLimit:     pulumi.Int(5),
		JobTemplate: &batchv1.JobTemplateSpecArgs{Spec: &batchv1.JobSpecArgs{
			BackoffLimit:          pulumi.Int(2),
			ActiveDeadlineSeconds: pulumi.Int(1800),
			Template: &corev1.PodTemplateSpecArgs{
				// The client label lets the pod through the etcd NetworkPolicy.
				Metadata: &metav1.ObjectMetaArgs{Labels: pulumi.StringMap{EtcdClientLabel: pulumi.String(shard), EtcdJobLabel: pulumi.String("snapshot")}},
				Spec: &corev1.PodSpecArgs{
					ServiceAccountName: pulumi.String(naming.SnapshotServiceAccount),
					RestartPolicy:      pulumi.String("Never"),
					SecurityContext:    restrictedPodSecurity(),
					Volumes:            corev1.VolumeArray{emptyDir("backup")},
					InitContainers: corev1.ContainerArray{
						// A member-local status call fails within seconds, naming the
						// endpoint, where an unreachable etcd would leave the save silent
						// until its command timeout.
						command("connect", etcdImage, "backup", resources("50m", "32Mi", "128Mi"),
							"/usr/local/bin/etcdctl", "--endpoints="+client, "--dial-timeout=5s", "--command-timeout=30s", "endpoint", "status"),
						command("save", etcdImage, "backup", resources("100m", "64Mi", "256Mi"),
							"/usr/local/bin/etcdctl", "--endpoints="+client, "--command-timeout=10m", "snapshot", "save", "/backup/snapshot.db"),
						command("check", etcdImage, "backup", resources("100m", "64Mi", "1Gi"),
							"/usr/local/bin/etcdutl", "snapshot", "status", "/backup/snapshot.db", "-w", "json"),
					},
					Containers: corev1.ContainerArray{withGcloudEnv(command("upload", gcloudImage, "backup", resources("100m", "256Mi", "1Gi"),
						"bash", "-c", SnapshotUploadScript), "backup", bucket, shard)},
				},
			},
		}},
	}
}

// drillCronJob proves a restore: it takes the newest snapshot of the shard, checks it,
// restores it into scratch storage, starts a throwaway etcd on it and confirms that it
// serves keys. Any step failing fails the Job. The pod has no etcd client label: it
// never talks to the live etcd.
func drillCronJob(shard, schedule, etcdImage, gcloudImage string, bucket pulumi.StringOutput) *batchv1.CronJobSpecArgs {
	local := "http://127.0.0.1"
	sidecar := command("etcd", etcdImage, "scratch", resources("250m", "256Mi", "2Gi"), "/usr/local/bin/etcd",
		"--name=drill", "--data-dir=/scratch/restored",
		"--listen-client-urls="+local+":2379", "--advertise-client-urls="+local+":2379",
		"--listen-peer-urls="+local+":2380", "--initial-advertise-peer-urls="+local+":2380",
		"--initial-cluster=drill="+local+":2380")
	// A native sidecar: it runs beside the verify container and stops with the Job.
	sidecar.RestartPolicy = pulumi.String("Always")
	return &batchv1.CronJobSpecArgs{
		Schedule:                   pulumi.String(schedule),
		ConcurrencyPolicy:          pulumi.String("Forbid"),
		StartingDeadlineSeconds:    pulumi.Int(600),
		SuccessfulJobsHistoryLimit: pulumi.Int(3),
		FailedJobsHistoryLimit:     pulumi.Int(5),
		JobTemplate: &batchv1.JobTemplateSpecArgs{Spec: &batchv1.JobSpecArgs{
			BackoffLimit:          pulumi.Int(1),
			ActiveDeadlineSeconds: pulumi.Int(3600),
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: pulumi.StringMap{EtcdJobLabel: pulumi.String("drill")}},
				Spec: &corev1.PodSpecArgs{
					ServiceAccountName: pulumi.String(naming.DrillServiceAccount),
					RestartPolicy:      pulumi.String("Never"),
					SecurityContext:    restrictedPodSecurity(),
					Volumes:            corev1.VolumeArray{emptyDir("scratch")},
					InitContainers: corev1.ContainerArray{
						withGcloudEnv(command("fetch", gcloudImage, "scratch", resources("100m", "256Mi", "1Gi"), "bash", "-c", DrillFetchScript), "scratch", bucket, shard),
						command("status", etcdImage, "scratch", resources("100m", "64Mi", "1Gi"),
							"/usr/local/bin/etcdutl", "snapshot", "status", "/scratch/snapshot.db", "-w", "json"),
						command("restore", etcdImage, "scratch", resources("100m", "128Mi", "2Gi"),
							"/usr/local/bin/etcdutl", "snapshot", "restore", "/scratch/snapshot.db",
							"--data-dir=/scratch/restored", "--name=drill",
							"--initial-cluster=drill="+local+":2380", "--initial-advertise-peer-urls="+local+":2380"),
						sidecar,
					},
					Containers: corev1.ContainerArray{command("verify", gcloudImage, "scratch", resources("50m", "32Mi", "128Mi"), "bash", "-c", DrillVerifyScript)},
				},
			},
		}},
	}
}

func emptyDir(name string) *corev1.VolumeArgs {
	return &corev1.VolumeArgs{Name: pulumi.String(name), EmptyDir: &corev1.EmptyDirVolumeSourceArgs{}}
}

// command is a container running one exec-form command with the shared volume mounted
// at /<volume>, under the restricted Pod Security Standard with a read-only root
// filesystem: the snapshot, the restored data and gcloud's configuration all go to that
// volume.
func command(name, image, volume string, res *corev1.ResourceRequirementsArgs, argv ...string) *corev1.ContainerArgs {
	return &corev1.ContainerArgs{
		Name:            pulumi.String(name),
		Image:           pulumi.String(image),
		Command:         pulumi.ToStringArray(argv),
		Resources:       res,
		SecurityContext: restrictedContainerSecurity(),
		VolumeMounts:    corev1.VolumeMountArray{&corev1.VolumeMountArgs{Name: pulumi.String(volume), MountPath: pulumi.String("/" + volume)}},
	}
}

// withGcloudEnv gives a google-cloud-cli container the bucket and shard, a writable
// gcloud configuration directory on the pod's volume (the root filesystem is read-only,
// and the non-root user has no home), and turns parallel composite uploads off: they
// compose temporary objects and delete them, which needs storage.objects.delete
// (https://cloud.google.com/storage/docs/parallel-composite-uploads). gcloud storage
// also takes semaphores in /dev/shm, which the runtime mounts writable in every pod,
// apart from the root filesystem, and writes nothing else outside the volume
// (tests/snapshots runs these containers with the root filesystem read-only).
func withGcloudEnv(c *corev1.ContainerArgs, volume string, bucket pulumi.StringOutput, shard string) *corev1.ContainerArgs {
	c.Env = corev1.EnvVarArray{
		&corev1.EnvVarArgs{Name: pulumi.String("BUCKET"), Value: bucket},
		&corev1.EnvVarArgs{Name: pulumi.String("SHARD"), Value: pulumi.String(shard)},
		&corev1.EnvVarArgs{Name: pulumi.String("CLOUDSDK_CONFIG"), Value: pulumi.String("/" + volume + "/gcloud")},
		&corev1.EnvVarArgs{Name: pulumi.String("CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_ENABLED"), Value: pulumi.String("False")},
	}
	return c
}
