package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/config"
)

// A value the stack gives is kept, zero and false included, where it makes sense: it is
// never replaced by the default (each default below differs from the value given).
func TestExplicitZeroIsKeptNotDefaulted(t *testing.T) {
	cfg, err := load(t, "gke", edits(set("gke.nodePools.kcp.minPerZone", 0), set("hub.remintGeneration", 0)), nil)
	require.NoError(t, err)
	require.NotEqual(t, 0, config.DefaultKcpPoolMinPerZone)
	require.Equal(t, 0, cfg.GKE.NodePools.Kcp.MinPerZone)
	require.Equal(t, 0, cfg.Hub.RemintGeneration)

	cfg, err = load(t, "kind", edits(set("kind.gatewayNodePort", 30444), set("kind.certManagerPresent", false)), nil)
	require.NoError(t, err)
	require.Equal(t, 30444, cfg.Kind.GatewayNodePort)
	require.False(t, cfg.Kind.CertManagerPresent)
}

// Defaults documented in Pulumi.yaml are the defaults the program applies.
func TestPulumiYAMLDocumentsTheProgramDefaults(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "Pulumi.yaml"))
	require.NoError(t, err)
	var project struct {
		Name   string `yaml:"name"`
		Config map[string]struct {
			Type        string         `yaml:"type"`
			Description string         `yaml:"description"`
			Default     map[string]any `yaml:"default"`
		} `yaml:"config"`
	}
	require.NoError(t, yaml.Unmarshal(data, &project))
	require.Equal(t, config.Project, project.Name)
	declared := []string{"platform", "versions", "operator", "kcp", "oidc", "etcd", "network", "loadBalancer", "hub"}
	for _, k := range declared {
		decl, ok := project.Config[k]
		require.True(t, ok, "Pulumi.yaml does not declare %s", k)
		require.NotEmpty(t, decl.Type, k)
		require.NotEmpty(t, decl.Description, k)
	}
	cfg := shippedConfig(t, "kind")
	v := project.Config["versions"].Default
	require.Equal(t, config.DefaultKcpVersion, v["kcp"])
	require.Equal(t, config.DefaultOperatorChartVersion, v["operatorChart"])
	require.Equal(t, config.DefaultOperatorImageTag, v["operatorImage"])
	require.Equal(t, config.DefaultEtcdVersion, v["etcd"])
	require.Equal(t, config.DefaultCertManagerVersion, v["certManager"])
	require.Equal(t, config.DefaultEnvoyGatewayVersion, v["envoyGateway"])
	require.Equal(t, cfg.LoadBalancer.Timeout, project.Config["loadBalancer"].Default["timeout"])
	hub := project.Config["hub"].Default
	require.Equal(t, cfg.Hub.Namespace, hub["namespace"])
	require.Equal(t, cfg.Hub.SecretName, hub["secretName"])
	require.Equal(t, cfg.Hub.SecretKey, hub["secretKey"])
	require.Equal(t, cfg.Hub.KubeconfigValidity, hub["kubeconfigValidity"])
	require.Equal(t, config.OperatorChartRepository, project.Config["operator"].Default["chartRepository"])
}

// The shipped stacks have the shapes the design document describes; each value checked
// here is set by the stack file or the Pulumi.yaml default, not by the program.
func TestShippedStacksHaveTheDesignedShape(t *testing.T) {
	kind, gke := shippedConfig(t, "kind"), shippedConfig(t, "gke")
	require.Equal(t, 1, kind.Etcd.Members, "kind: one member on its one node")
	require.Equal(t, 1, kind.Kind.NodeZones, "kind/cluster.yaml has one node")
	require.Equal(t, 3, gke.Etcd.Members)
	require.Equal(t, []string{"europe-west1-b", "europe-west1-c", "europe-west1-d"}, gke.GKE.Zones)
	for _, cfg := range []*config.Config{kind, gke} {
		require.Len(t, cfg.Kcp.Shards, 1)
		require.Equal(t, "alpha", cfg.Kcp.Shards[0].Name)
		require.Equal(t, "v0.33.0", cfg.Versions.Kcp)
		require.Equal(t, "1h0m0s", cfg.LoadBalancerTimeout().String())
		require.Equal(t, "8766h0m0s", cfg.KubeconfigValidity().String())
	}
}

// kind/cluster.yaml, which the kind stack documents, has the one node that the kind
// stack's default kind.nodeZones assumes.
func TestKindClusterHasTheNodesTheKindStackAssumes(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "kind", "cluster.yaml"))
	require.NoError(t, err)
	var cluster struct {
		Nodes []map[string]any `yaml:"nodes"`
	}
	require.NoError(t, yaml.Unmarshal(data, &cluster))
	require.Len(t, cluster.Nodes, config.DefaultKindNodeZones)
	require.GreaterOrEqual(t, config.DefaultKindNodeZones, shippedConfig(t, "kind").Etcd.Members)
}
