package components

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	policyv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/policy/v1"
	corev1 "k8s.io/api/core/v1"
	apimetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// What keeps each of kcp's servers serving through what a cluster does on its own (node
// upgrades, drains, a lost zone): where its pods may run and how they spread (a
// deployment template the operator copies into its Deployment), and a disruption budget
// over them. The operator creates no budget (kcp-dev/kcp-operator#176).

// kcpPods is one Deployment the operator runs for a server, named by the operator's
// labels on its pods.
type kcpPods struct {
	component, instance string
	deployment          string // its name: the budget's too
}

// template is the deployment template of one server's pods: on the platform's pool and,
// where the pool spans zones, replicas spread over the zones and one per node. The
// spread refuses to pack (DoNotSchedule), and minDomains makes a zone without nodes
// count as empty rather than absent: otherwise, with nodes in one zone only (a new pool,
// a lost zone), the scheduler sees one zone and puts every replica in it. nil where the
// platform sets nothing (kind): the operator's defaults then stay.
func (p KcpPlacement) template(pods kcpPods, replicas int) *kcpapi.DeploymentTemplate {
	if len(p.NodeSelector) == 0 && p.Zones < 2 {
		return nil
	}
	spec := &kcpapi.PodSpecTemplate{NodeSelector: p.NodeSelector}
	if p.Zones >= 2 {
		selector := &apimetav1.LabelSelector{MatchLabels: pods.labels()}
		minDomains := int32(min(replicas, p.Zones))
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule,
			MinDomains:        &minDomains,
			LabelSelector:     selector,
		}}
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: selector,
			}},
		}}
	}
	return &kcpapi.DeploymentTemplate{Spec: &kcpapi.DeploymentSpecTemplate{Template: &kcpapi.PodTemplateSpec{Spec: spec}}}
}

func (k kcpPods) labels() map[string]string {
	return map[string]string{naming.LabelComponent: k.component, naming.LabelInstance: k.instance}
}

// newKcpDisruptionBudget lets a voluntary disruption (a drain, a node upgrade) take one
// of the server's pods at a time: with two replicas or more one keeps serving; with one
// (kind) the drain goes on, as a one-node cluster has nowhere else to keep it. A pod that
// is not Ready may always be evicted: it serves nothing, and a budget that waits for it
// would block the drain that could fix it.
func newKcpDisruptionBudget(ctx *pulumi.Context, name string, pods kcpPods, opts ...pulumi.ResourceOption) (*policyv1.PodDisruptionBudget, error) {
	return policyv1.NewPodDisruptionBudget(ctx, name, &policyv1.PodDisruptionBudgetArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:      pulumi.String(pods.deployment),
			Namespace: pulumi.String(naming.NamespaceKcp),
			Labels:    pulumi.StringMap{"app.kubernetes.io/part-of": pulumi.String(config.Project), naming.LabelInstance: pulumi.String(pods.instance)},
		},
		Spec: &policyv1.PodDisruptionBudgetSpecArgs{
			MaxUnavailable:             pulumi.Int(1),
			Selector:                   &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(pods.labels())},
			UnhealthyPodEvictionPolicy: pulumi.String("AlwaysAllow"),
		},
	}, opts...)
}
