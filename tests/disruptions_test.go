package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// kcpServerPods are the Deployments the operator runs for the shipped stacks' kcp
// servers: where the object's spec holds their deployment template, and the operator's
// labels on their pods (kcp-operator 406169b, internal/resources/resources.go,
// getResourceLabels).
type kcpServerPods struct {
	kind, object, templatePath string
	component, instance        string
	deployment                 string
}

func shippedKcpServerPods(t *testing.T, stack string) []kcpServerPods {
	t.Helper()
	pods := []kcpServerPods{
		{"RootShard", naming.RootShardName, "spec.deploymentTemplate", naming.ComponentRootShard, naming.RootShardName, naming.RootShardDeployment(naming.RootShardName)},
		{"RootShard", naming.RootShardName, "spec.proxy.deploymentTemplate", naming.ComponentRootShardProxy, naming.RootShardName, naming.RootShardProxyDeployment(naming.RootShardName)},
		{"FrontProxy", naming.FrontProxyName, "spec.deploymentTemplate", naming.ComponentFrontProxy, naming.FrontProxyName, naming.FrontProxyDeployment(naming.FrontProxyName)},
	}
	for _, s := range shippedConfig(t, stack).Kcp.Shards {
		pods = append(pods, kcpServerPods{"Shard", s.Name, "spec.deploymentTemplate", naming.ComponentShard, s.Name, naming.ShardDeployment(s.Name)})
	}
	return pods
}

func (p kcpServerPods) labels() map[string]any {
	return map[string]any{naming.LabelComponent: p.component, naming.LabelInstance: p.instance}
}

// On gke, every kcp server's pods go to the kcp pool, spread over the stack's zones with
// DoNotSchedule and minDomains (a zone without nodes counts as empty, so nothing packs
// into the zones that have some), one per node; the selectors are the operator's labels
// of that Deployment's pods alone.
func TestGKEKcpServersSpreadOverZonesAndNodes(t *testing.T) {
	rec := runStack(t, "gke")
	cfg := shippedConfig(t, "gke")
	require.GreaterOrEqual(t, len(cfg.GKE.Zones), 2, "the shipped gke stack spans zones")
	replicas := map[string]int{"RootShard": cfg.Kcp.RootShard.Replicas, "FrontProxy": cfg.Kcp.FrontProxy.Replicas}
	for _, s := range cfg.Kcp.Shards {
		replicas["Shard/"+s.Name] = s.Replicas
	}
	for _, p := range shippedKcpServerPods(t, "gke") {
		t.Run(p.deployment, func(t *testing.T) {
			n := replicas[p.kind]
			if p.kind == "Shard" {
				n = replicas["Shard/"+p.object]
			}
			pod := get(t, inputs(object(t, rec, p.kind, p.object)), p.templatePath+".spec.template.spec")
			require.Equal(t, map[string]any{naming.PoolLabel: "kcp"}, get(t, pod, "nodeSelector"))
			require.Equal(t, []any{map[string]any{
				"maxSkew":           float64(1),
				"topologyKey":       "topology.kubernetes.io/zone",
				"whenUnsatisfiable": "DoNotSchedule",
				"minDomains":        float64(min(n, len(cfg.GKE.Zones))),
				"labelSelector":     map[string]any{"matchLabels": p.labels()},
			}}, get(t, pod, "topologySpreadConstraints"))
			require.Equal(t, []any{map[string]any{
				"topologyKey":   "kubernetes.io/hostname",
				"labelSelector": map[string]any{"matchLabels": p.labels()},
			}}, get(t, pod, "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"))
		})
	}
}

// On kind (one node), the operator's placement stays: no template at all.
func TestKindKcpServersKeepTheOperatorsPlacement(t *testing.T) {
	rec := runStack(t, "kind")
	for _, p := range shippedKcpServerPods(t, "kind") {
		spec := inputs(object(t, rec, p.kind, p.object))
		parent, field, _ := strings.Cut(strings.TrimPrefix(p.templatePath, "spec."), ".")
		node := get(t, spec, "spec").(map[string]any)
		if field != "" {
			node = get(t, node, parent).(map[string]any)
		} else {
			field = parent
		}
		require.NotContains(t, node, field, "%s on kind", p.deployment)
	}
}

// Each Deployment the operator runs for a kcp server has a budget of its own, on both
// stacks: one pod at a time, selected by the operator's labels, a pod that is not Ready
// always evictable.
func TestEveryKcpServerHasADisruptionBudget(t *testing.T) {
	for _, stack := range []string{"kind", "gke"} {
		t.Run(stack, func(t *testing.T) {
			rec := runStack(t, stack)
			pods := shippedKcpServerPods(t, stack)
			var budgets []string
			for _, res := range declared(t, rec, "kubernetes:policy/v1:PodDisruptionBudget") {
				if ns := getString(t, inputs(res), "metadata.namespace"); ns == naming.NamespaceKcp {
					budgets = append(budgets, getString(t, inputs(res), "metadata.name"))
				}
			}
			var want []string
			for _, p := range pods {
				want = append(want, p.deployment)
				pdb := inputs(object(t, rec, "PodDisruptionBudget", p.deployment))
				require.Equal(t, naming.NamespaceKcp, getString(t, pdb, "metadata.namespace"))
				require.Equal(t, float64(1), get(t, pdb, "spec.maxUnavailable"), p.deployment)
				require.NotContains(t, get(t, pdb, "spec"), "minAvailable", p.deployment)
				require.Equal(t, map[string]any{"matchLabels": p.labels()}, get(t, pdb, "spec.selector"), p.deployment)
				require.Equal(t, "AlwaysAllow", getString(t, pdb, "spec.unhealthyPodEvictionPolicy"), p.deployment)
			}
			require.ElementsMatch(t, want, budgets, "the budgets in %s", naming.NamespaceKcp)
		})
	}
}

// Each shard's etcd has a defragmentation CronJob on both stacks: on the configured
// schedule, through every member's client URL, in the pinned busybox image, with the
// label etcd's NetworkPolicy admits and no Kubernetes credentials.
func TestEveryEtcdIsDefragmentedOnSchedule(t *testing.T) {
	for _, stack := range []string{"kind", "gke"} {
		t.Run(stack, func(t *testing.T) {
			rec := runStack(t, stack)
			cfg := shippedConfig(t, stack)
			require.Equal(t, config.DefaultDefragSchedule, cfg.Etcd.DefragSchedule)
			shards := []string{naming.RootShardName}
			for _, s := range cfg.Kcp.Shards {
				shards = append(shards, s.Name)
			}
			for _, shard := range shards {
				cj := inputs(object(t, rec, "CronJob", naming.EtcdDefragCronJob(shard)))
				require.Equal(t, cfg.Etcd.DefragSchedule, getString(t, cj, "spec.schedule"))
				require.Equal(t, "Forbid", getString(t, cj, "spec.concurrencyPolicy"))
				pod := get(t, cj, "spec.jobTemplate.spec.template")
				require.Equal(t, map[string]any{naming.EtcdClientLabel: shard, naming.EtcdJobLabel: "defrag"}, get(t, pod, "metadata.labels"))
				require.Equal(t, false, get(t, pod, "spec.automountServiceAccountToken"))
				require.NotContains(t, get(t, pod, "spec"), "serviceAccountName")
				c := containersOf(get(t, pod, "spec").(map[string]any))
				require.Len(t, c, 1)
				require.Equal(t, config.EtcdDefragImage, getString(t, c[0], "image"))
				env := map[string]string{}
				for _, e := range get(t, c[0], "env").([]any) {
					env[e.(map[string]any)["name"].(string)] = e.(map[string]any)["value"].(string)
				}
				var members []string
				for i := 0; i < cfg.Etcd.Members; i++ {
					members = append(members, fmt.Sprintf("http://%s-%d.%s-headless.%s.svc.cluster.local:2379", naming.EtcdName(shard), i, naming.EtcdName(shard), naming.NamespaceEtcd))
				}
				require.Equal(t, map[string]string{"SHARD": shard, "ENDPOINTS": strings.Join(members, " ")}, env)
			}
		})
	}
}
