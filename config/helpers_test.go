package config_test

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
)

// The tests of package config load variants of the shipped stacks (Pulumi.kind.yaml and
// Pulumi.gke.yaml at the repository's root): a stack's config with an edit, loaded as
// stackconfig.Load loads it under `pulumi up`.

// stackFile is the path of a shipped Pulumi.<stack>.yaml.
func stackFile(stack string) string { return filepath.Join("..", "Pulumi."+stack+".yaml") }

// key is a project config key.
func key(name string) string { return config.Project + ":" + name }

// shippedConfig is the validated config of a shipped stack.
func shippedConfig(t *testing.T, stack string) *config.Config {
	t.Helper()
	cfg, err := config.ParseStackFile(stackFile(stack))
	require.NoError(t, err)
	return cfg
}

// stackValues is a shipped stack's config as editable trees, keyed as the engine passes
// them ("railgrid-kcp:kcp"); objects and lists are decoded, other values kept as strings.
func stackValues(t *testing.T, stack string) map[string]any {
	t.Helper()
	raw, err := config.ReadStackFile(stackFile(stack))
	require.NoError(t, err)
	out := map[string]any{}
	for k, value := range raw {
		trimmed := strings.TrimSpace(value)
		tree := strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[")
		var decoded any
		if !tree || json.Unmarshal([]byte(value), &decoded) != nil {
			decoded = value
		}
		out[k] = decoded
	}
	return out
}

// encode turns stackValues trees into the strings the engine passes.
func encode(t *testing.T, values map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range values {
		if s, ok := v.(string); ok {
			out[k] = s
			continue
		}
		b, err := json.Marshal(v)
		require.NoError(t, err)
		out[k] = string(b)
	}
	return out
}

// load loads a shipped stack with an edit (nil: none) as stackconfig.Load does: the
// config's own checks, then the checks against what the stack's last up recorded
// (previous; nil for a stack that never ran).
func load(t *testing.T, stack string, e edit, previous map[string]config.ShardEndpoint) (*config.Config, error) {
	t.Helper()
	values := stackValues(t, stack)
	if e != nil {
		e(values)
	}
	cfg, err := config.FromValues(encode(t, values))
	if err != nil {
		return nil, err
	}
	if err := cfg.CheckAgainstPrevious(previous); err != nil {
		return nil, err
	}
	return cfg, nil
}

// edit changes a stackValues tree.
type edit func(values map[string]any)

// set sets the value at a key path written as an error names it: "platform",
// "kcp.rootShard.hostname", "gke.zones[2]". A missing mapping on the way is created.
func set(path string, value any) edit {
	return func(values map[string]any) {
		top, rest, nested := strings.Cut(path, ".")
		if !nested {
			values[key(top)] = value
			return
		}
		node, ok := values[key(top)].(map[string]any)
		if !ok {
			node = map[string]any{}
			values[key(top)] = node
		}
		setPath(node, splitPath(rest), value)
	}
}

// unset removes the key at a key path, as set writes it.
func unset(path string) edit {
	return func(values map[string]any) {
		top, rest, nested := strings.Cut(path, ".")
		if !nested {
			delete(values, key(top))
			return
		}
		parts := splitPath(rest)
		var node any = values[key(top)]
		for _, part := range parts[:len(parts)-1] {
			node = node.(map[string]any)[part]
		}
		delete(node.(map[string]any), parts[len(parts)-1])
	}
}

// edits makes one edit of several, applied in order.
func edits(all ...edit) edit {
	return func(values map[string]any) {
		for _, e := range all {
			e(values)
		}
	}
}

// addShard appends a shard to kcp.shards.
func addShard(name, hostname, clusterIP string) edit {
	return func(values map[string]any) {
		kcp := values[key("kcp")].(map[string]any)
		shard := map[string]any{"name": name, "hostname": hostname, "clusterIP": clusterIP, "replicas": 1}
		kcp["shards"] = append(kcp["shards"].([]any), shard)
	}
}

// useCertificateSecret makes the gke stack's listeners take their certificate from a
// Secret instead of cert-manager.
func useCertificateSecret(name string) edit {
	return edits(set("gke.gateway.certificateSecret", name), unset("gke.gateway.certManagerClusterIssuer"))
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
		idx, err := strconv.Atoi(parts[0])
		if err != nil {
			panic("not a list index: " + parts[0])
		}
		if len(parts) == 1 {
			n[idx] = value
			return
		}
		setPath(n[idx], parts[1:], value)
	default:
		panic("cannot set " + strings.Join(parts, ".") + " inside a value that is neither a mapping nor a list")
	}
}

// splitPath splits a dotted key path with [i] indexes into its parts.
func splitPath(path string) []string {
	path = strings.ReplaceAll(path, "[", ".")
	path = strings.ReplaceAll(path, "]", "")
	return strings.Split(path, ".")
}

// longName is a DNS name of labels labels of 63 characters each.
func longName(labels int) string {
	parts := make([]string, labels)
	for i := range parts {
		parts[i] = strings.Repeat(string(rune('a'+i)), 63)
	}
	return strings.Join(parts, ".")
}
