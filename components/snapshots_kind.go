package components

import "github.com/pulumi/pulumi/sdk/v3/go/pulumi"

// noSnapshots is the kind stack's snapshot backend: the stack is disposable and has no
// object storage outside the cluster, so it declares nothing; scheduled snapshots and
// the restore drill are the gke stack's (snapshots_gke.go).
type noSnapshots struct{}

func (noSnapshots) DeclareSnapshots(*pulumi.Context, string, []*EtcdCluster, ...pulumi.ResourceOption) (pulumi.Map, error) {
	return pulumi.Map{}, nil
}
