package components

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp/serviceaccount"
	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp/storage"
	"github.com/pulumi/pulumi-random/sdk/v4/go/random"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	batchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"

	"github.com/railgrid/railgrid-kcp/config"
)

// Kubernetes ServiceAccounts of the snapshot and drill jobs (namespace etcd).
const (
	SnapshotServiceAccount = "etcd-snapshots"
	DrillServiceAccount    = "etcd-restore-drill"
)

// gcsSnapshots takes scheduled etcd snapshots to a GCS bucket outside the cluster and
// proves on a schedule that the newest snapshot of each shard restores and serves keys.
type gcsSnapshots struct {
	cfg      *config.Config
	cluster  gkeCluster
	provider *kubernetes.Provider
}

func (s gcsSnapshots) DeclareSnapshots(ctx *pulumi.Context, name string, clusters []*EtcdCluster, opts ...pulumi.ResourceOption) (pulumi.Map, error) {
	g := s.cfg.GKE
	suffix, err := random.NewRandomId(ctx, name+"-bucket-suffix", &random.RandomIdArgs{ByteLength: pulumi.Int(4)}, opts...)
	if err != nil {
		return nil, err
	}
	// Protected: `pulumi destroy` refuses to delete the snapshots.
	bucket, err := storage.NewBucket(ctx, name+"-bucket", &storage.BucketArgs{
		Project:                  pulumi.String(g.Project),
		Name:                     pulumi.Sprintf("kcp-etcd-snapshots-%s", suffix.Hex),
		Location:                 pulumi.String(strings.ToUpper(g.Location)),
		UniformBucketLevelAccess: pulumi.Bool(true),
		PublicAccessPrevention:   pulumi.String("enforced"),
		Versioning:               &storage.BucketVersioningArgs{Enabled: pulumi.Bool(true)},
		LifecycleRules: storage.BucketLifecycleRuleArray{
			&storage.BucketLifecycleRuleArgs{
				Action:    &storage.BucketLifecycleRuleActionArgs{Type: pulumi.String("Delete")},
				Condition: &storage.BucketLifecycleRuleConditionArgs{Age: pulumi.Int(g.Snapshots.RetentionDays)},
			},
			&storage.BucketLifecycleRuleArgs{
				Action:    &storage.BucketLifecycleRuleActionArgs{Type: pulumi.String("Delete")},
				Condition: &storage.BucketLifecycleRuleConditionArgs{DaysSinceNoncurrentTime: pulumi.Int(g.Snapshots.RetentionDays), WithState: pulumi.String("ARCHIVED")},
			},
		},
	}, append(opts, pulumi.Protect(true))...)
	if err != nil {
		return nil, err
	}

	// The snapshot job may only create objects; the drill may only read them.
	snapshotSA, err := s.workloadIdentity(ctx, name+"-snapshots", "kcp-etcd-snapshots", SnapshotServiceAccount, bucket, "roles/storage.objectCreator", opts)
	if err != nil {
		return nil, err
	}
	drillSA, err := s.workloadIdentity(ctx, name+"-drill", "kcp-etcd-restore-drill", DrillServiceAccount, bucket, "roles/storage.objectViewer", opts)
	if err != nil {
		return nil, err
	}

	etcdImage := fmt.Sprintf("%s:%s", config.EtcdImageRepository, s.cfg.Versions.Etcd)
	gcloudImage := fmt.Sprintf("%s:%s", config.GcloudImageRepository, g.Snapshots.GcloudImage)
	for _, c := range clusters {
		deps := pulumi.DependsOn([]pulumi.Resource{c.StatefulSet, snapshotSA, drillSA})
		if _, err := batchv1.NewCronJob(ctx, name+"-"+c.Shard+"-snapshot", &batchv1.CronJobArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(EtcdName(c.Shard) + "-snapshot"), Namespace: pulumi.String(NamespaceEtcd)},
			Spec:     snapshotCronJob(c.Shard, g.Snapshots.Schedule, etcdImage, gcloudImage, bucket.Name),
		}, append(opts, deps)...); err != nil {
			return nil, err
		}
		if _, err := batchv1.NewCronJob(ctx, name+"-"+c.Shard+"-drill", &batchv1.CronJobArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(EtcdName(c.Shard) + "-restore-drill"), Namespace: pulumi.String(NamespaceEtcd)},
			Spec:     drillCronJob(c.Shard, g.Snapshots.DrillSchedule, etcdImage, gcloudImage, bucket.Name),
		}, append(opts, deps)...); err != nil {
			return nil, err
		}
	}
	return pulumi.Map{
		"bucket":           bucket.Name,
		"snapshotSchedule": pulumi.String(g.Snapshots.Schedule),
		"drillSchedule":    pulumi.String(g.Snapshots.DrillSchedule),
		"retentionDays":    pulumi.Int(g.Snapshots.RetentionDays),
	}, nil
}

// workloadIdentity creates a Google service account with one role on the bucket, and a
// Kubernetes ServiceAccount in the etcd namespace bound to it through Workload Identity.
func (s gcsSnapshots) workloadIdentity(ctx *pulumi.Context, name, accountID, ksa string, bucket *storage.Bucket, role string, opts []pulumi.ResourceOption) (*corev1.ServiceAccount, error) {
	project := s.cfg.GKE.Project
	gsa, err := serviceaccount.NewAccount(ctx, name+"-gsa", &serviceaccount.AccountArgs{
		Project:     pulumi.String(project),
		AccountId:   pulumi.String(accountID),
		DisplayName: pulumi.String("railgrid-kcp " + ksa),
	}, opts...)
	if err != nil {
		return nil, err
	}
	if _, err := storage.NewBucketIAMMember(ctx, name+"-bucket-role", &storage.BucketIAMMemberArgs{
		Bucket: bucket.Name,
		Role:   pulumi.String(role),
		Member: gsa.Member,
	}, opts...); err != nil {
		return nil, err
	}
	if _, err := serviceaccount.NewIAMMember(ctx, name+"-workload-identity", &serviceaccount.IAMMemberArgs{
		ServiceAccountId: gsa.Name,
		Role:             pulumi.String("roles/iam.workloadIdentityUser"),
		Member:           pulumi.String(WorkloadIdentityMember(project, NamespaceEtcd, ksa)),
	}, opts...); err != nil {
		return nil, err
	}
	return corev1.NewServiceAccount(ctx, name+"-ksa", &corev1.ServiceAccountArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:        pulumi.String(ksa),
			Namespace:   pulumi.String(NamespaceEtcd),
			Annotations: pulumi.StringMap{"iam.gke.io/gcp-service-account": gsa.Email},
		},
	}, opts...)
}

// WorkloadIdentityMember is the IAM member of a Kubernetes ServiceAccount.
func WorkloadIdentityMember(project, namespace, ksa string) string {
	return fmt.Sprintf("serviceAccount:%s.svc.id.goog[%s/%s]", project, namespace, ksa)
}

// snapshotCronJob saves a snapshot from one member (etcdctl refuses several endpoints),
// checks it, and uploads it as gs://<bucket>/<shard>/<UTC timestamp>.db. Failures stay
// visible as failed Jobs.
func snapshotCronJob(shard, schedule, etcdImage, gcloudImage string, bucket pulumi.StringOutput) *batchv1.CronJobSpecArgs {
	client := fmt.Sprintf("http://%s.%s.svc.%s:%d", EtcdName(shard), NamespaceEtcd, ClusterDomain, EtcdClientPort)
	upload := `set -euo pipefail
ts="$(date -u +%Y%m%dT%H%M%SZ)"
for attempt in 1 2 3 4 5; do
  # Workload Identity credentials can lag the pod start by a few seconds.
  if gcloud storage cp /backup/snapshot.db "gs://${BUCKET}/${SHARD}/${ts}.db"; then exit 0; fi
  sleep 10
done
echo "upload of the ${SHARD} snapshot to gs://${BUCKET} failed" >&2
exit 1`
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
				Metadata: &metav1.ObjectMetaArgs{Labels: pulumi.StringMap{EtcdClientLabel: pulumi.String(shard)}},
				Spec: &corev1.PodSpecArgs{
					ServiceAccountName: pulumi.String(SnapshotServiceAccount),
					RestartPolicy:      pulumi.String("Never"),
					Volumes:            corev1.VolumeArray{emptyDir("backup")},
					InitContainers: corev1.ContainerArray{
						command("save", etcdImage, "backup", "/usr/local/bin/etcdctl", "--endpoints="+client, "--command-timeout=10m", "snapshot", "save", "/backup/snapshot.db"),
						command("check", etcdImage, "backup", "/usr/local/bin/etcdutl", "snapshot", "status", "/backup/snapshot.db", "-w", "json"),
					},
					Containers: corev1.ContainerArray{withEnv(command("upload", gcloudImage, "backup", "bash", "-c", upload), bucket, shard)},
				},
			},
		}},
	}
}

// drillCronJob proves a restore: it takes the newest snapshot of the shard, checks it,
// restores it into scratch storage, starts a throwaway etcd on it and confirms that it
// serves keys. Any step failing fails the Job.
func drillCronJob(shard, schedule, etcdImage, gcloudImage string, bucket pulumi.StringOutput) *batchv1.CronJobSpecArgs {
	fetch := `set -euo pipefail
newest="$(gcloud storage ls "gs://${BUCKET}/${SHARD}/" | grep '\.db$' | sort | tail -n 1)"
if [ -z "${newest}" ]; then echo "no snapshot of ${SHARD} in gs://${BUCKET}" >&2; exit 1; fi
echo "restoring ${newest}"
gcloud storage cp "${newest}" /scratch/snapshot.db`
	verify := `set -euo pipefail
python3 - <<'PY'
import json, sys, time, urllib.request
# Count every key (key and range_end "\0" select the whole keyspace) through etcd's JSON gateway.
body = json.dumps({"key": "AA==", "range_end": "AA==", "count_only": True}).encode()
for attempt in range(60):
    try:
        with urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:2379/v3/kv/range", data=body), timeout=5) as r:
            count = int(json.load(r).get("count", "0"))
        break
    except Exception as e:
        time.sleep(2)
else:
    sys.exit("the restored etcd never answered")
if count == 0:
    sys.exit("the restored snapshot serves no keys")
print(f"restore drill passed: {count} keys served")
PY`
	local := "http://127.0.0.1"
	sidecar := command("etcd", etcdImage, "scratch", "/usr/local/bin/etcd",
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
				Spec: &corev1.PodSpecArgs{
					ServiceAccountName: pulumi.String(DrillServiceAccount),
					RestartPolicy:      pulumi.String("Never"),
					Volumes:            corev1.VolumeArray{emptyDir("scratch")},
					InitContainers: corev1.ContainerArray{
						withEnv(command("fetch", gcloudImage, "scratch", "bash", "-c", fetch), bucket, shard),
						command("status", etcdImage, "scratch", "/usr/local/bin/etcdutl", "snapshot", "status", "/scratch/snapshot.db", "-w", "json"),
						command("restore", etcdImage, "scratch", "/usr/local/bin/etcdutl", "snapshot", "restore", "/scratch/snapshot.db",
							"--data-dir=/scratch/restored", "--name=drill",
							"--initial-cluster=drill="+local+":2380", "--initial-advertise-peer-urls="+local+":2380"),
						sidecar,
					},
					Containers: corev1.ContainerArray{command("verify", gcloudImage, "scratch", "bash", "-c", verify)},
				},
			},
		}},
	}
}

func emptyDir(name string) *corev1.VolumeArgs {
	return &corev1.VolumeArgs{Name: pulumi.String(name), EmptyDir: &corev1.EmptyDirVolumeSourceArgs{}}
}

// command is a container running one exec-form command with the shared volume mounted
// at /<volume>.
func command(name, image, volume string, argv ...string) *corev1.ContainerArgs {
	return &corev1.ContainerArgs{
		Name:         pulumi.String(name),
		Image:        pulumi.String(image),
		Command:      pulumi.ToStringArray(argv),
		VolumeMounts: corev1.VolumeMountArray{&corev1.VolumeMountArgs{Name: pulumi.String(volume), MountPath: pulumi.String("/" + volume)}},
	}
}

func withEnv(c *corev1.ContainerArgs, bucket pulumi.StringOutput, shard string) *corev1.ContainerArgs {
	c.Env = corev1.EnvVarArray{
		&corev1.EnvVarArgs{Name: pulumi.String("BUCKET"), Value: bucket},
		&corev1.EnvVarArgs{Name: pulumi.String("SHARD"), Value: pulumi.String(shard)},
	}
	return c
}
