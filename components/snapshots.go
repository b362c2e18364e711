package components

import (
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// EtcdSnapshotsArgs lists the etcd clusters to snapshot.
type EtcdSnapshotsArgs struct {
	Clusters []*EtcdCluster
	// Backend is the platform's snapshot store: GCS with Workload Identity on GKE; none
	// on the disposable kind stack.
	Backend SnapshotBackend
}

// EtcdSnapshots takes each shard's etcd to object storage outside the cluster on a
// schedule and proves on a schedule that the newest snapshot restores.
type EtcdSnapshots struct {
	pulumi.ResourceState

	Outputs pulumi.Map
}

// NewEtcdSnapshots declares the snapshots through the platform's backend.
func NewEtcdSnapshots(ctx *pulumi.Context, name string, args *EtcdSnapshotsArgs, opts ...pulumi.ResourceOption) (*EtcdSnapshots, error) {
	if args == nil || args.Backend == nil {
		return nil, errors.New("EtcdSnapshots: Backend is required")
	}
	s := &EtcdSnapshots{}
	if err := ctx.RegisterComponentResource("railgrid:kcp:EtcdSnapshots", name, s, opts...); err != nil {
		return nil, err
	}
	outputs, err := args.Backend.DeclareSnapshots(ctx, name, args.Clusters, pulumi.Parent(s))
	if err != nil {
		return nil, err
	}
	s.Outputs = outputs
	if err := ctx.RegisterResourceOutputs(s, outputs); err != nil {
		return nil, err
	}
	return s, nil
}
