// Package tests asserts the design document's rules on what the program declares, by
// running the real composition of the shipped stacks (and of variants of them) under
// Pulumi mocks.
package tests

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
)

// The shipped stacks are run once per test binary: the composition is deterministic.
var (
	stackMu     sync.Mutex
	stackResult = map[string]*mockstack.Recording{}
)

// stackFile is the path of a shipped Pulumi.<stack>.yaml.
func stackFile(stack string) string { return filepath.Join("..", "Pulumi."+stack+".yaml") }

// runStack runs the real composition of a shipped stack under mocks.
func runStack(t *testing.T, stack string) *mockstack.Recording {
	t.Helper()
	stackMu.Lock()
	defer stackMu.Unlock()
	if rec, ok := stackResult[stack]; ok {
		return rec
	}
	rec, err := mockstack.RunStackFile(stack, stackFile(stack), mockstack.Options{})
	require.NoError(t, err)
	stackResult[stack] = rec
	return rec
}

// shippedConfig is the validated config of a shipped stack.
func shippedConfig(t *testing.T, stack string) *config.Config {
	t.Helper()
	cfg, err := config.ParseStackFile(stackFile(stack))
	require.NoError(t, err)
	return cfg
}

// stackValues is a shipped stack's config as editable trees, keyed without the project
// prefix, for tests that run a variant of it.
func stackValues(t *testing.T, stack string) map[string]any {
	t.Helper()
	raw, err := config.ReadStackFile(stackFile(stack))
	require.NoError(t, err)
	out := map[string]any{}
	for key, value := range raw {
		var decoded any
		if json.Unmarshal([]byte(value), &decoded) != nil || !strings.HasPrefix(strings.TrimSpace(value), "{") && !strings.HasPrefix(strings.TrimSpace(value), "[") {
			decoded = value
		}
		out[key] = decoded
	}
	return out
}

// set changes one value of a stackValues tree: key is "<project>:<top>" or a
// provider key, path is dotted with [i] indexes inside it.
func set(t *testing.T, values map[string]any, key, path string, value any) {
	t.Helper()
	if path == "" {
		values[key] = value
		return
	}
	node, ok := values[key]
	if !ok {
		node = map[string]any{}
		values[key] = node
	}
	parts := splitPath(path)
	for i, part := range parts {
		last := i == len(parts)-1
		switch n := node.(type) {
		case map[string]any:
			if last {
				n[part] = value
				return
			}
			next, ok := n[part]
			if !ok {
				next = map[string]any{}
				n[part] = next
			}
			node = next
		case []any:
			idx, err := strconv.Atoi(part)
			require.NoError(t, err, "index %q in %s", part, path)
			if last {
				n[idx] = value
				return
			}
			node = n[idx]
		default:
			t.Fatalf("cannot set %s in %s: %T", path, key, node)
		}
	}
}

// splitPath splits a dotted path; "\." is a dot inside a key (label names).
func splitPath(path string) []string {
	path = strings.ReplaceAll(path, "[", ".")
	path = strings.ReplaceAll(path, "]", "")
	const escapedDot = "\x00"
	path = strings.ReplaceAll(path, `\.`, escapedDot)
	parts := strings.Split(path, ".")
	for i := range parts {
		parts[i] = strings.ReplaceAll(parts[i], escapedDot, ".")
	}
	return parts
}

// setIn changes one value of a stackValues tree: top is a top-level key of the project,
// path is dotted with [i] indexes inside it. A missing mapping on the way is created.
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

// addShard appends a shard to the kcp section.
func addShard(values map[string]any, name, hostname, clusterIP string) {
	kcp := values[key("kcp")].(map[string]any)
	shard := map[string]any{"name": name, "hostname": hostname, "clusterIP": clusterIP}
	// As many replicas as the stack's root shard (kind sets 1; gke keeps the default 2).
	if root, ok := kcp["rootShard"].(map[string]any); ok && root["replicas"] != nil {
		shard["replicas"] = root["replicas"]
	}
	kcp["shards"] = append(kcp["shards"].([]any), shard)
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

// runValues runs the composition for edited stack values.
func runValues(t *testing.T, stack string, values map[string]any, opts mockstack.Options) (*mockstack.Recording, error) {
	t.Helper()
	encoded := map[string]string{}
	for key, value := range values {
		if s, ok := value.(string); ok {
			encoded[key] = s
			continue
		}
		b, err := json.Marshal(value)
		require.NoError(t, err)
		encoded[key] = string(b)
	}
	return mockstack.RunConfig(stack, encoded, opts)
}

// key is a project config key.
func key(name string) string { return config.Project + ":" + name }

// declared returns the resources of a type, and fails when there are none: a loop over
// them must not pass by checking nothing.
func declared(t *testing.T, rec *mockstack.Recording, typ string) []mockstack.Resource {
	t.Helper()
	res := rec.ByType(typ)
	require.NotEmpty(t, res, "stack %s declares no %s", rec.Stack, typ)
	return res
}

// find returns the resource of a type and logical name, and fails when there is none.
func find(t *testing.T, rec *mockstack.Recording, typ, name string) mockstack.Resource {
	t.Helper()
	res, ok := rec.Find(typ, name)
	require.True(t, ok, "stack %s declares no %s %q", rec.Stack, typ, name)
	return res
}

// object returns the declared Kubernetes object of a kind and metadata name.
func object(t *testing.T, rec *mockstack.Recording, kind, name string) mockstack.Resource {
	t.Helper()
	res, ok := rec.KubernetesObject(kind, name)
	require.True(t, ok, "stack %s declares no %s %q", rec.Stack, kind, name)
	return res
}

// inputs is a resource's inputs as plain values (secrets replaced by a placeholder).
func inputs(res mockstack.Resource) map[string]any { return plan.Redact(res.Inputs) }

// get walks a dotted path (with [i] indexes) through plain values.
func get(t *testing.T, tree any, path string) any {
	t.Helper()
	node := tree
	for _, part := range splitPath(path) {
		switch n := node.(type) {
		case map[string]any:
			next, ok := n[part]
			require.True(t, ok, "no %q on the way to %s", part, path)
			node = next
		case []any:
			idx, err := strconv.Atoi(part)
			require.NoError(t, err, "expected an index at %q in %s", part, path)
			require.Less(t, idx, len(n), "index %d out of range in %s", idx, path)
			node = n[idx]
		default:
			t.Fatalf("cannot walk %q into %T in %s", part, node, path)
		}
	}
	return node
}

// getString is get for a string value.
func getString(t *testing.T, tree any, path string) string {
	t.Helper()
	v := get(t, tree, path)
	s, ok := v.(string)
	require.True(t, ok, "%s is %T (%v), not a string", path, v, v)
	return s
}

// strings of a list value.
func stringList(t *testing.T, tree any, path string) []string {
	t.Helper()
	items, ok := get(t, tree, path).([]any)
	require.True(t, ok, "%s is not a list", path)
	out := make([]string, 0, len(items))
	for _, item := range items {
		out = append(out, fmt.Sprint(item))
	}
	return out
}

// number of a numeric value.
func number(t *testing.T, tree any, path string) int {
	t.Helper()
	v, ok := get(t, tree, path).(float64)
	require.True(t, ok, "%s is not a number", path)
	return int(v)
}

// requireRefused asserts that a config is refused before any resource is declared, with
// an error that names the rule, the key and the value.
func requireRefused(t *testing.T, stack string, values map[string]any, opts mockstack.Options, wantRule, wantKey, wantValue, wantWords string) {
	t.Helper()
	rec, err := runValues(t, stack, values, opts)
	require.Error(t, err)
	var invalid config.Errors
	require.ErrorAs(t, err, &invalid, "want config.Errors, got %v", err)
	var found bool
	for _, fe := range invalid {
		if fe.Key == wantKey && fe.RuleID == wantRule {
			found = true
			require.Equal(t, wantValue, fe.Value, "value named by %s", wantKey)
			require.Contains(t, fe.Rule, wantWords)
			require.Contains(t, err.Error(), fmt.Sprintf("%s:%s = %q: ", config.Project, wantKey, wantValue))
		}
	}
	require.True(t, found, "no error of rule %s names %s; got:\n%v", wantRule, wantKey, err)
	require.NotNil(t, rec)
	// Only the read of the stack's own previous outputs may precede a refusal that
	// needs the previous state (stackconfig.ReadPreviousShards).
	for _, res := range rec.Resources {
		require.True(t, res.Read && res.Type == "pulumi:pulumi:StackReference", "a refused config must declare nothing, but declared %s", res)
	}
}
