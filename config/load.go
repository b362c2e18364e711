package config

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Top-level stack config keys, in the order Pulumi.yaml documents them.
var topLevelKeys = []string{
	"platform", "versions", "operator", "kcp", "oidc", "etcd", "network",
	"loadBalancer", "hub", "kind", "gke",
}

// TopLevelKeys are the top-level stack config keys, in the order Pulumi.yaml documents
// them (package stackconfig looks each up in a program's context).
func TopLevelKeys() []string { return slices.Clone(topLevelKeys) }

// FromValues builds the Config from a stack's whole config, "<namespace>:<key>" to the
// value the engine passes (a string; objects and lists as JSON). Keys of other
// namespaces (gcp:, kubernetes:) are not this program's. Every problem is reported at
// once, each naming its key path, the value and the rule (see Rules).
func FromValues(values map[string]string) (*Config, error) {
	var errs Errors
	top := map[string]string{}
	for _, full := range sortedKeys(values) {
		namespace, name, ok := strings.Cut(full, ":")
		switch {
		case !ok:
			continue
		case namespace != Project && strings.EqualFold(namespace, Project):
			errs.addf(ruleUnknownKey, full, values[full], "is not a railgrid-kcp config key: the namespace is %s (keys are matched exactly, capitals included)", Project)
		case namespace != Project:
			continue
		case !slices.Contains(topLevelKeys, name):
			errs.addf(ruleUnknownKey, name, values[full], "%s", unknownKeyRule(name, "", topLevelKeys))
		default:
			top[name] = values[full]
		}
	}

	platform, platformGiven := top["platform"]
	c := withDefaults(Platform(platform))
	d := newDecoder()
	if platformGiven {
		d.given["platform"] = true
	}
	for _, key := range topLevelKeys[1:] {
		raw, ok := top[key]
		if !ok {
			continue
		}
		v, err := parseJSON(raw)
		if err != nil {
			d.errs.addf(ruleType, key, raw, "must be a mapping (%s)", err)
			d.failed[key] = true
			continue
		}
		// A section of the other platform that sets nothing is as good as absent.
		other := key == "kind" && c.Platform != PlatformKind || key == "gke" && c.Platform != PlatformGKE
		if other && v.kind == jsonObject && len(v.keys) == 0 && len(v.twice) == 0 {
			continue
		}
		d.decode(key, v, fieldFor(c, key))
	}
	c.given = d.given
	errs = append(errs, d.errs...)
	for _, fe := range c.validate() {
		if !d.failed[fe.Key] {
			errs = append(errs, fe)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// fieldFor is the field of top-level key in c.
func fieldFor(c *Config, key string) reflect.Value {
	index, ok := jsonFields(reflect.TypeOf(*c))[key]
	if !ok {
		panic("config: no field for key " + key)
	}
	return reflect.ValueOf(c).Elem().FieldByIndex(index)
}

// ReadStackFile reads a Pulumi.<stack>.yaml file and returns its config the way the
// Pulumi engine hands it to a program: "<namespace>:<key>" to a string, with object
// and array values as JSON. Secure (encrypted) values are kept as their ciphertext.
// Nothing is checked here: FromValues checks the keys and values, as under `pulumi up`.
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
	for key, value := range file.Config {
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
	return out, nil
}

// ParseStackFile reads and validates a stack file in one step (tools and tests).
func ParseStackFile(path string) (*Config, error) {
	values, err := ReadStackFile(path)
	if err != nil {
		return nil, err
	}
	return FromValues(values)
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
