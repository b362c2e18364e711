package config

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
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

// Load reads the stack configuration of the running program, applies the defaults of
// the keys it leaves out and validates it. Nothing is declared when it returns an error.
//
// The Go SDK looks config up only by key (ctx.GetConfig), so it cannot tell which keys
// a stack sets. The Go language host, which `pulumi up` and `pulumi preview` use to run
// main.go, hands the program the whole stack config as JSON in PULUMI_CONFIG (pulumi
// sdk go/pulumi/run.go, getEnvInfo); the key set is read there, so that a key this
// program does not know is refused, exactly as cmd/plan refuses it.
//
// An inline Automation API program gets no PULUMI_CONFIG. Then only the known keys can
// be looked up, and Load says so in a warning: an unknown key would go unseen.
func Load(ctx *pulumi.Context) (*Config, error) {
	raw, ok := os.LookupEnv(pulumi.EnvConfig)
	if !ok {
		_ = ctx.Log.Warn("railgrid-kcp: the stack config did not arrive in "+pulumi.EnvConfig+
			" (an inline program?), so keys the program does not know cannot be refused; run it with `pulumi preview`/`pulumi up`", nil)
		values := map[string]string{}
		for _, key := range topLevelKeys {
			if v, ok := ctx.GetConfig(Project + ":" + key); ok {
				values[Project+":"+key] = v
			}
		}
		cfg, err := FromValues(values)
		if err != nil {
			return nil, err
		}
		return cfg, checkPrevious(ctx, cfg)
	}
	var values map[string]string
	if err := json.Unmarshal([]byte(raw), &values); err != nil {
		return nil, fmt.Errorf("%s is not the JSON object of config keys the Go language host writes: %w", pulumi.EnvConfig, err)
	}
	return LoadFrom(ctx, values)
}

// LoadFrom is Load with the stack's whole config given: "<namespace>:<key>" to the value
// the engine passes (a string, objects and lists as JSON). The program's context must
// hold the same values for this project's keys.
func LoadFrom(ctx *pulumi.Context, values map[string]string) (*Config, error) {
	for _, key := range topLevelKeys {
		full := Project + ":" + key
		inContext, inCtx := ctx.GetConfig(full)
		given, inValues := values[full]
		if inCtx != inValues || inContext != given {
			return nil, fmt.Errorf("config key %s differs between the program's context and the key set it was loaded from", full)
		}
	}
	cfg, err := FromValues(values)
	if err != nil {
		return nil, err
	}
	return cfg, checkPrevious(ctx, cfg)
}

// checkPrevious reads the stack's previous state (ReadPreviousShards) and refuses what
// would break the running platform. It runs after the config checks and before the
// program declares anything: the stack reference is a read of the stack's own outputs.
func checkPrevious(ctx *pulumi.Context, cfg *Config) error {
	prev, err := ReadPreviousShards(ctx)
	if err != nil {
		return err
	}
	return cfg.CheckAgainstPrevious(prev)
}

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
