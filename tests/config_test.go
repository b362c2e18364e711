package tests

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
)

// Each rule of the config is shown refused with an error that names the key, the value
// and the rule, before any resource is declared.
func TestBadConfigIsRefusedNamingKeyValueAndRule(t *testing.T) {
	cases := []struct {
		name      string
		stack     string
		edit      func(v map[string]any)
		key       string
		value     string
		rule      string
		gkeRange  string
		extraKeys []string
	}{
		{name: "kcp version latest", stack: "kind", edit: func(v map[string]any) { setIn(v, "versions", "kcp", "latest") },
			key: "versions.kcp", value: "latest", rule: "pinned release"},
		{name: "kcp version empty string stays default but v-less tag refused", stack: "kind", edit: func(v map[string]any) { setIn(v, "versions", "kcp", "0.33") },
			key: "versions.kcp", value: "0.33", rule: "pinned release"},
		{name: "etcd floating tag", stack: "gke", edit: func(v map[string]any) { setIn(v, "versions", "etcd", "v3.6") },
			key: "versions.etcd", value: "v3.6", rule: "pinned release"},
		{name: "operator pair unknown", stack: "kind", edit: func(v map[string]any) { setIn(v, "versions", "operatorImage", "v0.9.0") },
			key: "versions.operatorImage", value: "v0.9.0", rule: "not a known pair"},
		{name: "operator chart unknown", stack: "kind", edit: func(v map[string]any) { setIn(v, "versions", "operatorChart", "0.7.9") },
			key: "versions.operatorImage", value: "v0.10.0", rule: "not a known pair with kcp-operator chart 0.7.9"},
		{name: "invalid hostname", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "rootShard.hostname", "Root_Shard") },
			key: "kcp.rootShard.hostname", value: "Root_Shard", rule: "valid DNS name"},
		{name: "duplicate hostname", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].hostname", "root.kcp.localhost") },
			key: "kcp.shards[0].hostname", value: "root.kcp.localhost", rule: "distinct"},
		{name: "shard named root", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].name", "root") },
			key: "kcp.shards[0].name", value: "root", rule: "reserved for the root shard"},
		{name: "shard base URL", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].shardBaseURL", "https://alpha.kcp.localhost") },
			key: "kcp.shards[0].shardBaseURL", value: "https://alpha.kcp.localhost", rule: "every request arrives as an empty user"},
		{name: "root shard base URL", stack: "gke", edit: func(v map[string]any) {
			setIn(v, "kcp", "rootShard.shardBaseURL", "https://kcp-root.railgrid.example.com")
		},
			key: "kcp.rootShard.shardBaseURL", value: "https://kcp-root.railgrid.example.com", rule: "only the virtual-workspace URL"},
		{name: "OIDC username claim", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "usernameClaim", "sub") },
			key: "oidc.usernameClaim", value: "sub", rule: "railgrid:<email>"},
		{name: "OIDC groups prefix", stack: "gke", edit: func(v map[string]any) { setIn(v, "oidc", "groupsPrefix", "oidc:") },
			key: "oidc.groupsPrefix", value: "oidc:", rule: "fixed by the hub"},
		{name: "OIDC issuer not https", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "issuerURL", "http://dex.kcp.localhost") },
			key: "oidc.issuerURL", value: "http://dex.kcp.localhost", rule: "https://"},
		{name: "OIDC client ID missing", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "clientID", "") },
			key: "oidc.clientID", value: "", rule: "hub's client ID"},
		{name: "etcd two members", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "members", 2) },
			key: "etcd.members", value: "2", rule: "1, 3 or 5"},
		{name: "etcd volume size", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "volumeSize", "20GB") },
			key: "etcd.volumeSize", value: "20GB", rule: "size"},
		{name: "cluster IP outside range", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "rootShard.clusterIP", "10.97.0.10") },
			key: "kcp.rootShard.clusterIP", value: "10.97.0.10", rule: "inside the Service range 10.96.0.0/16"},
		{name: "cluster IP reserved", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "rootShard.clusterIP", "10.96.0.10") },
			key: "kcp.rootShard.clusterIP", value: "10.96.0.10", rule: "reserves"},
		{name: "cluster IP dynamic band", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].clusterIP", "10.96.200.7") },
			key: "kcp.shards[0].clusterIP", value: "10.96.200.7", rule: "static band"},
		{name: "cluster IP duplicate", stack: "gke", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].clusterIP", "34.118.224.101") },
			key: "kcp.shards[0].clusterIP", value: "34.118.224.101", rule: "distinct"},
		{name: "cluster IP not an address", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "frontProxy.clusterIP", "kcp") },
			key: "kcp.frontProxy.clusterIP", value: "kcp", rule: "IPv4 address"},
		{name: "service range invalid", stack: "kind", edit: func(v map[string]any) { setIn(v, "network", "serviceCIDR", "10.96.0.1/16") },
			key: "network.serviceCIDR", value: "10.96.0.1/16", rule: "CIDR"},
		{name: "load balancer timeout too short", stack: "gke", edit: func(v map[string]any) { setIn(v, "loadBalancer", "timeout", "30s") },
			key: "loadBalancer.timeout", value: "30s", rule: "at least 60s"},
		{name: "hub key", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "secretKey", "kubeconfig") },
			key: "hub.secretKey", value: "kubeconfig", rule: "admin.kubeconfig"},
		{name: "hub validity", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "kubeconfigValidity", "365d") },
			key: "hub.kubeconfigValidity", value: "365d", rule: "duration"},
		{name: "request timeout", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "requestTimeout", "10s") },
			key: "kcp.requestTimeout", value: "10s", rule: "at least 60s"},
		{name: "platform", stack: "kind", edit: func(v map[string]any) { v[key("platform")] = "k3s" },
			key: "platform", value: "k3s", rule: "kind or gke"},
		{name: "gke zones fewer than members", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "zones", []any{"europe-west1-b", "europe-west1-c"}) },
			key: "gke.zones", value: "europe-west1-b,europe-west1-c", rule: "at least 3 distinct zones"},
		{name: "gke zone of another region", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "zones[2]", "us-east1-b") },
			key: "gke.zones[2]", value: "us-east1-b", rule: "zone of europe-west1"},
		{name: "gke snapshot schedule", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.schedule", "hourly") },
			key: "gke.snapshots.schedule", value: "hourly", rule: "cron"},
		{name: "gke retention", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.retentionDays", -1) },
			key: "gke.snapshots.retentionDays", value: "-1", rule: "between 1 and 3650"},
		{name: "gke etcd pool size", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "nodePools.etcd.maxPerZone", -1) },
			key: "gke.nodePools.etcd.maxPerZone", value: "-1", rule: "at least 1"},
		{name: "gke dns ttl", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "dns.ttl", 3600) },
			key: "gke.dns.ttl", value: "3600", rule: "between 1 and 300"},
		{name: "gke gateway certificate", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "gateway.certificateSecret", "kcp-tls") },
			key: "gke.gateway", value: `certificateSecret="kcp-tls" certManagerClusterIssuer="letsencrypt"`, rule: "exactly one"},
		{name: "kind section on gke", stack: "gke", edit: func(v map[string]any) { v[key("kind")] = map[string]any{"context": "x"} },
			key: "kind", value: "(set)", rule: "belongs to the kind platform"},
		{name: "unknown field", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "member", 3) },
			key: "etcd", value: `{"member":3,"members":1,"volumeSize":"2Gi"}`, rule: `unknown field "member"`},
		// The GKE lookup reports a Service range that does not hold the fixed addresses.
		{name: "gke cluster range", stack: "gke", edit: func(map[string]any) {}, gkeRange: "10.8.0.0/20",
			key: "kcp.frontProxy.clusterIP", value: "34.118.224.100", rule: "Service range of GKE cluster railgrid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			values := stackValues(t, tc.stack)
			tc.edit(values)
			requireRefused(t, tc.stack, values, mockstack.Options{GKEServiceCIDR: tc.gkeRange}, tc.key, tc.value, tc.rule)
		})
	}
}

func setIn(values map[string]any, top, path string, value any) {
	node, ok := values[key(top)].(map[string]any)
	if !ok {
		node = map[string]any{}
		values[key(top)] = node
	}
	setPath(node, splitPath(path), value)
}

func setPath(node any, parts []string, value any) {
	switch n := node.(type) {
	case map[string]any:
		if len(parts) == 1 {
			n[parts[0]] = value
			return
		}
		next, ok := n[parts[0]]
		if !ok {
			next = map[string]any{}
			n[parts[0]] = next
		}
		setPath(next, parts[1:], value)
	case []any:
		var idx int
		for _, c := range parts[0] {
			idx = idx*10 + int(c-'0')
		}
		if len(parts) == 1 {
			n[idx] = value
			return
		}
		setPath(n[idx], parts[1:], value)
	}
}

// All problems are reported together, not one per run.
func TestEveryProblemIsReportedAtOnce(t *testing.T) {
	values := stackValues(t, "kind")
	setIn(values, "versions", "kcp", "latest")
	setIn(values, "etcd", "members", 4)
	setIn(values, "oidc", "usernamePrefix", "")
	_, err := runValues(t, "kind", values, mockstack.Options{})
	var invalid config.Errors
	require.ErrorAs(t, err, &invalid)
	keys := map[string]bool{}
	for _, fe := range invalid {
		keys[fe.Key] = true
	}
	require.True(t, keys["versions.kcp"] && keys["etcd.members"] && keys["oidc.usernamePrefix"], "got %v", err)
}

// A key of this project that the program does not know is refused (a typo would
// otherwise be silently ignored).
func TestUnknownTopLevelKeyIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "Pulumi.kind.yaml")
	data, err := os.ReadFile(stackFile("kind"))
	require.NoError(t, err)
	var doc map[string]map[string]any
	require.NoError(t, yaml.Unmarshal(data, &doc))
	doc["config"][key("etdc")] = map[string]any{"members": 3}
	out, err := yaml.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, out, 0o600))
	_, err = config.ParseStackFile(path)
	var invalid config.Errors
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "etdc", invalid[0].Key)
	require.Contains(t, invalid[0].Rule, "not a railgrid-kcp config key")
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
	for _, k := range []string{"platform", "versions", "operator", "kcp", "oidc", "etcd", "network", "loadBalancer", "hub"} {
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

// Every key Pulumi.yaml declares without a default is set by both stacks: the CLI
// refuses a stack that lacks one. The other platform's empty default is accepted.
func TestEveryRequiredProjectKeyIsSetByBothStacks(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "Pulumi.yaml"))
	require.NoError(t, err)
	var project struct {
		Config map[string]map[string]any `yaml:"config"`
	}
	require.NoError(t, yaml.Unmarshal(data, &project))
	for _, stack := range []string{"kind", "gke"} {
		values := stackValues(t, stack)
		for k, decl := range project.Config {
			if _, hasDefault := decl["default"]; hasDefault {
				if _, set := values[key(k)]; !set {
					values[key(k)] = decl["default"]
				}
				continue
			}
			_, set := values[key(k)]
			require.True(t, set, "stack %s does not set %s, which Pulumi.yaml declares without a default", stack, k)
		}
		_, err := runValues(t, stack, values, mockstack.Options{})
		require.NoError(t, err, "stack %s with Pulumi.yaml's defaults filled in", stack)
	}
}

// The shipped stacks have the shapes the design document describes.
func TestShippedStacksHaveTheDesignedShape(t *testing.T) {
	kind, gke := shippedConfig(t, "kind"), shippedConfig(t, "gke")
	require.Equal(t, 1, kind.Etcd.Members)
	require.Equal(t, 3, gke.Etcd.Members)
	require.Len(t, gke.GKE.Zones, 3)
	for _, cfg := range []*config.Config{kind, gke} {
		require.Len(t, cfg.Kcp.Shards, 1)
		require.Equal(t, "alpha", cfg.Kcp.Shards[0].Name)
		require.Equal(t, config.DefaultKcpVersion, cfg.Versions.Kcp)
		require.Equal(t, "1h0m0s", cfg.LoadBalancerTimeout().String())
		require.Equal(t, "8766h0m0s", cfg.KubeconfigValidity().String())
	}
}
