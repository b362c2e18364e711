package components

import (
	"errors"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/naming"
)

// MonitoringArgs are the kcp servers whose /metrics the scrapers read.
type MonitoringArgs struct {
	RootShard *KcpRootShard
	Shards    []*KcpShard
	// Validity is the lifetime of the scrapers' client certificates.
	Validity string
}

// Monitoring is the scrapers' identity on kcp: the user naming.MetricsUsername, bound to
// system:kcp:metrics-reader (get /metrics, nothing else) on every kcp server.
//
// One binding in root is not enough. kcp evaluates a shard's /metrics against the root
// workspace, and a shard other than the root shard sees root's ClusterRoleBindings only
// through the cache server, which copies a binding only when its ClusterRole grants
// access to the workspace (kcp's replicateclusterrolebinding controller): the metrics
// reader does not. So on every other shard the user is bound in that shard's own
// system:admin cluster, which kcp's bootstrap policy authorizer reads for every request
// to the shard, through a Kubeconfig object aimed at the shard. The front proxy asks the
// root shard (a SubjectAccessReview in root), so root's binding covers it.
type Monitoring struct {
	pulumi.ResourceState

	// Kubeconfigs are the Kubeconfig objects, by kcp server ("root", then the shards).
	Kubeconfigs map[string]*apiextensions.CustomResource
}

// NewMonitoring declares the scrapers' Kubeconfig objects, each after its server.
func NewMonitoring(ctx *pulumi.Context, name string, args *MonitoringArgs, opts ...pulumi.ResourceOption) (*Monitoring, error) {
	if args == nil || args.RootShard == nil || args.Validity == "" {
		return nil, errors.New("Monitoring: RootShard and Validity are required")
	}
	m := &Monitoring{Kubeconfigs: map[string]*apiextensions.CustomResource{}}
	if err := ctx.RegisterComponentResource("railgrid:kcp:Monitoring", name, m, opts...); err != nil {
		return nil, err
	}
	type binding struct {
		server  string
		target  kcpapi.KubeconfigTarget
		cluster string
		after   pulumi.Resource
	}
	bindings := []binding{{server: args.RootShard.Name, cluster: naming.RootShardName, after: args.RootShard.Object,
		target: kcpapi.KubeconfigTarget{RootShardRef: &kcpapi.LocalObjectReference{Name: args.RootShard.Name}}}}
	for _, s := range args.Shards {
		bindings = append(bindings, binding{server: s.Name, cluster: kcpSystemAdminCluster, after: s.Object,
			target: kcpapi.KubeconfigTarget{ShardRef: &kcpapi.LocalObjectReference{Name: s.Name}}})
	}
	for _, b := range bindings {
		objectName := naming.MetricsKubeconfigName(b.server)
		kubeconfig, err := newKcpObject(ctx, name+"-"+b.server, kcpapi.KindKubeconfig, objectName, kcpapi.KubeconfigSpec{
			Username:  naming.MetricsUsername,
			Validity:  args.Validity,
			SecretRef: kcpapi.LocalObjectReference{Name: objectName},
			Target:    b.target,
			Authorization: &kcpapi.KubeconfigAuthorization{ClusterRoleBindings: kcpapi.KubeconfigClusterRoleBindings{
				Cluster: b.cluster, ClusterRoles: []string{naming.MetricsReaderClusterRole},
			}},
		}, nil, pulumi.Parent(m), pulumi.DependsOn([]pulumi.Resource{b.after}))
		if err != nil {
			return nil, err
		}
		m.Kubeconfigs[b.server] = kubeconfig
	}
	return m, ctx.RegisterResourceOutputs(m, pulumi.Map{})
}

// kcpSystemAdminCluster is the logical cluster of a shard's bootstrap policy.
const kcpSystemAdminCluster = "system:admin"
