package components

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	batchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"

	"github.com/railgrid/railgrid-kcp/components/etcdjobs"
	"github.com/railgrid/railgrid-kcp/naming"
)

// EtcdDefrag schedules the defragmentation of a shard's etcd.
type EtcdDefrag struct {
	// Schedule is the CronJob's schedule (etcd.defragSchedule).
	Schedule string
	// Image runs the script (config.EtcdDefragImage).
	Image string
}

// newEtcdDefragCronJob declares the CronJob that defragments the members of one shard's
// etcd, one at a time and the leader last (etcdjobs.DefragScript). Compaction frees space
// inside the database every hour, but the file keeps its size until a defragmentation:
// without one it grows to the 8 GiB quota, etcd raises NOSPACE and refuses writes. A run
// that finds a member unhealthy fails, so a skipped run shows as a failed Job.
func newEtcdDefragCronJob(ctx *pulumi.Context, name string, args *EtcdClusterArgs, m etcdMeta, opts ...pulumi.ResourceOption) (*batchv1.CronJob, error) {
	images := jobImages{shell: args.Defrag.Image}
	spec := etcdJob{
		// No retry: the next scheduled run is the retry, and a failure stays visible.
		schedule: args.Defrag.Schedule, backoffLimit: 0, activeDeadlineSeconds: 3600,
		// The client label lets the pod through the etcd NetworkPolicy.
		labels: pulumi.StringMap{naming.EtcdClientLabel: pulumi.String(args.Shard), naming.EtcdJobLabel: pulumi.String("defrag")},
		// No step calls gcloud, so no bucket.
		containers: images.containers(etcdjobs.DefragSteps(args.Shard, args.Members), pulumi.StringOutput{}),
	}.cronJobSpec()
	return batchv1.NewCronJob(ctx, name+"-defrag", &batchv1.CronJobArgs{
		Metadata: m.objectMeta(naming.EtcdDefragCronJob(args.Shard)),
		Spec:     spec,
	}, opts...)
}
