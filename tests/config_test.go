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

// The config's rules are tested beside them, in package config: a refusal of every rule
// and the acceptances at their edges (config/*_test.go, TestEveryRuleHasARefusalTest).
// Here is what only the whole program shows.

// ranWithBeta is the previous state of a kind stack whose last up ran the shard beta.
var ranWithBeta = map[string]config.ShardEndpoint{
	"root":  {Hostname: "root.kcp.localhost", ClusterIP: "10.96.0.101"},
	"alpha": {Hostname: "alpha.kcp.localhost", ClusterIP: "10.96.0.102"},
	"beta":  {Hostname: "beta.kcp.localhost", ClusterIP: "10.96.0.103"},
}

// refusal is one config that the program refuses: a shipped stack with one edit, and the
// key path, value and rule the error must name.
type refusal struct {
	name     string
	rule     string // config.Rule ID
	stack    string
	edit     func(v map[string]any)
	key      string
	value    string
	says     string // part of the error's wording
	gkeRange string // Service range the mocked GKE cluster lookup reports
	// previous is what the stack's last up recorded, as its stack reference to itself
	// returns it (rules that need the previous state).
	previous map[string]config.ShardEndpoint
}

// programRefusals come from each part of the program that refuses a config: the config's
// own checks (the key set, the types, the rules, the generated names, several problems at
// once), the checks against the previous state, which the program reads from the stack's
// own outputs, and the check of the fixed ClusterIPs against the Service range that the
// GKE cluster's lookup reports, which the components make.
var programRefusals = []refusal{
	{name: "misspelled top-level key", rule: "unknown-key", stack: "kind",
		edit: func(v map[string]any) { v[key("etdc")] = map[string]any{"members": 1} },
		key:  "etdc", value: `{"members":1}`, says: "is not a railgrid-kcp config key"},
	{name: "members as a word", rule: "type", stack: "kind",
		edit: func(v map[string]any) { setIn(v, "etcd", "members", "three") },
		key:  "etcd.members", value: "three", says: "must be a whole number"},
	{name: "cluster IP outside range", rule: "cluster-ip-range", stack: "kind",
		edit: func(v map[string]any) { setIn(v, "kcp", "rootShard.clusterIP", "10.97.0.10") },
		key:  "kcp.rootShard.clusterIP", value: "10.97.0.10", says: "inside the Service range 10.96.0.0/16"},
	{name: "gke zones fewer than members", rule: "gke-zones-for-members", stack: "gke",
		edit: func(v map[string]any) { setIn(v, "gke", "zones", []any{"europe-west1-b", "europe-west1-c"}) },
		key:  "gke.zones", value: "europe-west1-b,europe-west1-c", says: "at least 3 distinct zones"},
	{name: "shard named frontproxy", rule: "name-collision", stack: "kind",
		edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].name", "frontproxy") },
		key:  "kcp.shards[0].name", value: "frontproxy", says: "which kcp.frontProxy already gives"},
	{name: "every problem at once", rule: "pinned-version", stack: "kind",
		edit: func(v map[string]any) {
			setIn(v, "versions", "kcp", "latest")
			setIn(v, "etcd", "members", "three")
			setIn(v, "oidc", "usernamePrefix", "")
			setIn(v, "kcp", "rootShard.replicas", 0)
			v[key("etdc")] = map[string]any{"members": 1}
		},
		key: "versions.kcp", value: "latest", says: "pinned release"},
	{name: "shard removed without retiring it", rule: "shard-vanished", stack: "kind", previous: ranWithBeta,
		edit: func(map[string]any) {},
		key:  "kcp.shards", value: "beta", says: "list it in kcp.retiredShards"},
	{name: "shard ClusterIP moved", rule: "shard-moved", stack: "kind", previous: ranWithBeta,
		edit: func(v map[string]any) { addShard(v, "beta", "beta.kcp.localhost", "10.96.0.104") },
		key:  "kcp.shards[1].clusterIP", value: "10.96.0.104", says: "cannot change in place"},
	// The GKE lookup reports a Service range that does not hold the fixed addresses.
	{name: "gke cluster range", rule: "cluster-ip-range", stack: "gke", gkeRange: "10.8.0.0/20",
		edit: func(map[string]any) {},
		key:  "kcp.frontProxy.clusterIP", value: "34.118.224.100", says: "Service range of GKE cluster railgrid"},
}

// A refused config is refused before any resource is declared, with an error that names
// its rule, key and value, whichever part of the program refuses it.
func TestRefusedConfigDeclaresNothing(t *testing.T) {
	for _, tc := range programRefusals {
		t.Run(tc.rule+"/"+tc.name, func(t *testing.T) {
			values := stackValues(t, tc.stack)
			tc.edit(values)
			opts := mockstack.Options{GKEServiceCIDR: tc.gkeRange, Previous: tc.previous}
			requireRefused(t, tc.stack, values, opts, tc.rule, tc.key, tc.value, tc.says)
		})
	}
}

// The program declares a stack that gives zeros where the defaults are not zero (that
// the config keeps them is config's TestExplicitZeroIsKeptNotDefaulted).
func TestExplicitZeroIsDeclared(t *testing.T) {
	values := stackValues(t, "gke")
	setIn(values, "gke", "nodePools.kcp.minPerZone", 0)
	setIn(values, "hub", "remintGeneration", 0)
	rec, err := runValues(t, "gke", values, mockstack.Options{})
	require.NoError(t, err)
	require.NotEmpty(t, rec.Resources)
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
