package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"gopkg.in/yaml.v3"
)

// Top-level stack config keys, in the order Pulumi.yaml documents them.
var topLevelKeys = []string{
	"platform", "versions", "operator", "kcp", "oidc", "etcd", "network",
	"loadBalancer", "hub", "kind", "gke",
}

// Load reads the stack configuration of a running Pulumi program, applies defaults and
// validates it. Nothing is declared when it returns an error.
func Load(ctx *pulumi.Context) (*Config, error) {
	return Parse(func(key string) (string, bool) {
		return ctx.GetConfig(Project + ":" + key)
	})
}

// Parse builds a Config from raw stack config values (a string, or JSON for objects),
// looked up by key without the project prefix. Unknown fields inside an object are
// refused so that a typo is not silently ignored. All problems are reported together.
func Parse(get func(key string) (string, bool)) (*Config, error) {
	c := &Config{}
	var errs Errors
	for _, key := range topLevelKeys {
		raw, ok := get(key)
		if !ok {
			continue
		}
		if key == "platform" {
			c.Platform = Platform(strings.TrimSpace(raw))
			continue
		}
		if err := decodeStrict(raw, fieldFor(c, key)); err != nil {
			errs.add(key, raw, "must be an object with known fields: "+err.Error())
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	// Pulumi.yaml gives both platform sections an empty default (a declared key without
	// one is required on every stack); an empty section of the other platform is absent.
	if c.Kind != nil && c.Platform != PlatformKind && reflect.ValueOf(*c.Kind).IsZero() {
		c.Kind = nil
	}
	if c.GKE != nil && c.Platform != PlatformGKE && reflect.ValueOf(*c.GKE).IsZero() {
		c.GKE = nil
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func fieldFor(c *Config, key string) any {
	switch key {
	case "versions":
		return &c.Versions
	case "operator":
		return &c.Operator
	case "kcp":
		return &c.Kcp
	case "oidc":
		return &c.OIDC
	case "etcd":
		return &c.Etcd
	case "network":
		return &c.Network
	case "loadBalancer":
		return &c.LoadBalancer
	case "hub":
		return &c.Hub
	case "kind":
		c.Kind = &Kind{}
		return c.Kind
	case "gke":
		c.GKE = &GKE{}
		return c.GKE
	}
	panic("config: no field for key " + key)
}

func decodeStrict(raw string, into any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

// ReadStackFile reads a Pulumi.<stack>.yaml file and returns its config the way the
// Pulumi engine hands it to a program: "<namespace>:<key>" to a string, with object
// and array values as JSON. Keys of this project that the program does not know are
// refused. Secure (encrypted) values are kept as their ciphertext.
func ReadStackFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file struct {
		Config map[string]any `yaml:"config"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]string{}
	var errs Errors
	for key, value := range file.Config {
		if name, ok := strings.CutPrefix(key, Project+":"); ok && !isTopLevelKey(name) {
			errs.add(name, fmt.Sprint(value), "is not a railgrid-kcp config key; known keys: "+strings.Join(topLevelKeys, ", "))
			continue
		}
		if s, ok := value.(string); ok {
			out[key] = s
			continue
		}
		encoded, err := json.Marshal(normalizeYAML(value))
		if err != nil {
			return nil, fmt.Errorf("%s: key %s: %w", path, key, err)
		}
		out[key] = string(encoded)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// ParseStackFile reads and validates a stack file in one step (tools and tests).
func ParseStackFile(path string) (*Config, error) {
	values, err := ReadStackFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(func(key string) (string, bool) {
		v, ok := values[Project+":"+key]
		return v, ok
	})
}

func isTopLevelKey(name string) bool {
	for _, k := range topLevelKeys {
		if k == name {
			return true
		}
	}
	return false
}

// normalizeYAML turns yaml.v3's map[string]any trees into JSON-encodable values with
// sorted keys, and Pulumi's `secure:` wrappers into their ciphertext.
func normalizeYAML(v any) any {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		m := make(map[string]any, len(t))
		for _, k := range keys {
			m[k] = normalizeYAML(t[k])
		}
		return m
	case []any:
		for i := range t {
			t[i] = normalizeYAML(t[i])
		}
		return t
	default:
		return v
	}
}
