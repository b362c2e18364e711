package components

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/naming"
)

// RetiredShardVolumesArgs names the shards taken out of kcp.shards whose etcd volumes
// are kept (kcp.retiredShards), and the member count their StatefulSets had.
type RetiredShardVolumesArgs struct {
	Shards  []string
	Members int
}

// RetiredShardVolumes reads the volume claims a retired shard's etcd left behind, so
// the stack can say where its data is. Retiring a shard deletes its StatefulSet, whose
// claims stay (persistentVolumeClaimRetentionPolicy Retain) in the retained etcd
// namespace; nothing here declares or changes an object.
type RetiredShardVolumes struct {
	pulumi.ResourceState

	// Volumes maps each retired shard to {namespace, claims: claim name -> volume name}.
	Volumes pulumi.MapOutput `pulumi:"volumes"`
}

// NewRetiredShardVolumes reads the claims of every retired shard. A claim that is gone
// fails the read: a shard whose data was removed for good is no longer retired, and
// leaves kcp.retiredShards.
func NewRetiredShardVolumes(ctx *pulumi.Context, name string, args *RetiredShardVolumesArgs, opts ...pulumi.ResourceOption) (*RetiredShardVolumes, error) {
	r := &RetiredShardVolumes{}
	if err := ctx.RegisterComponentResource("railgrid:kcp:RetiredShardVolumes", name, r, opts...); err != nil {
		return nil, err
	}
	volumes := pulumi.Map{}
	for _, shard := range args.Shards {
		claims := pulumi.StringMap{}
		for i := 0; i < args.Members; i++ {
			claim := naming.EtcdClaimName(shard, i)
			pvc, err := readPersistentVolumeClaim(ctx, name+"-"+claim, naming.NamespaceEtcd, claim, pulumi.Parent(r))
			if err != nil {
				return nil, err
			}
			// The bound PersistentVolume; on GKE the PD CSI driver names the disk after it.
			claims[claim] = pvc.Spec.VolumeName().Elem()
		}
		volumes[shard] = pulumi.Map{"namespace": pulumi.String(naming.NamespaceEtcd), "claims": claims}
	}
	r.Volumes = volumes.ToMapOutput()
	if err := ctx.RegisterResourceOutputs(r, pulumi.Map{"volumes": r.Volumes}); err != nil {
		return nil, err
	}
	return r, nil
}
