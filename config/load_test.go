package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/config"
)

// The top-level keys of a stack config (load.go), a key the program does not know and a
// section that is not a mapping: each refusal below is refused naming its rule, key and
// value.
func TestLoadRefusals(t *testing.T) { requireRefused(t, loadRefusals) }

var loadRefusals = []refusal{
	{name: "misspelled top-level key", rule: "unknown-key", stack: "kind",
		edit: set("etdc", map[string]any{"members": 1}),
		key:  "etdc", value: `{"members":1}`,
		says: "is not a railgrid-kcp config key"},
	{name: "top-level key in other capitals", rule: "unknown-key", stack: "kind",
		edit: set("Etcd", map[string]any{"members": 1}),
		key:  "Etcd", value: `{"members":1}`,
		says: "did you mean etcd?"},
	{name: "section not a mapping", rule: "type", stack: "kind",
		edit: set("network", "10.96.0.0/16"),
		key:  "network", value: "10.96.0.0/16",
		says: "must be a mapping"},
}

// All problems are reported together, a type error and an unknown key included, each at
// its own key path.
func TestEveryProblemIsReportedAtOnce(t *testing.T) {
	_, err := load(t, "kind", edits(
		set("versions.kcp", "latest"),
		set("etcd.members", "three"),
		set("oidc.usernamePrefix", ""),
		set("kcp.rootShard.replicas", 0),
		set("etdc", map[string]any{"members": 1}),
	), nil)
	var invalid config.Errors
	require.ErrorAs(t, err, &invalid)
	got := map[string]string{}
	for _, fe := range invalid {
		got[fe.Key] = fe.RuleID
		line := fmt.Sprintf("%s:%s = %q: %s", config.Project, fe.Key, fe.Value, fe.Rule)
		require.Contains(t, err.Error(), line, "one message style")
	}
	require.Equal(t, map[string]string{
		"versions.kcp":           "pinned-version",
		"etcd.members":           "type",
		"oidc.usernamePrefix":    "oidc-fixed",
		"kcp.rootShard.replicas": "replicas",
		"etdc":                   "unknown-key",
	}, got, "%v", err)
}

// The plan tool reads a stack file through the same check: a misspelled top-level key
// is refused, not ignored.
func TestUnknownTopLevelKeyIsRefusedInAStackFile(t *testing.T) {
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
	require.Len(t, invalid, 1, "%v", err)
	require.Equal(t, "etdc", invalid[0].Key)
	require.Equal(t, "unknown-key", invalid[0].RuleID)
	require.Contains(t, invalid[0].Rule, "is not a railgrid-kcp config key")
}
