package stackconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/config"
)

type noResources struct{}

func (noResources) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	return args.Name, args.Inputs, nil
}

func (noResources) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

// loadWithEnv runs Load in a program that receives config as a local program does: the
// SDK reads PULUMI_CONFIG into the context, and Load reads the key set from it.
func loadWithEnv(t *testing.T, values map[string]string) (*config.Config, error) {
	t.Helper()
	encoded, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(pulumi.EnvConfig, string(encoded))
	var cfg *config.Config
	var loadErr error
	_ = pulumi.RunErr(func(ctx *pulumi.Context) error {
		cfg, loadErr = Load(ctx)
		return nil
	}, pulumi.WithMocks(config.Project, "kind", noResources{}))
	return cfg, loadErr
}

func shippedValues(t *testing.T) map[string]string {
	t.Helper()
	values, err := config.ReadStackFile(filepath.Join("..", "..", "Pulumi.kind.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return values
}

func TestLoadReadsTheKeySetFromPulumiConfig(t *testing.T) {
	values := shippedValues(t)
	cfg, err := loadWithEnv(t, values)
	if err != nil {
		t.Fatalf("the shipped kind stack: %v", err)
	}
	if cfg.Platform != config.PlatformKind || cfg.Kcp.Shards[0].Name != "alpha" {
		t.Fatalf("loaded %+v", cfg)
	}

	values[config.Project+":etdc"] = `{"members":3}`
	values["kubernetes:context"] = "kind-railgrid-kcp" // another package's key is not ours to refuse
	_, err = loadWithEnv(t, values)
	invalid, ok := err.(config.Errors)
	if !ok || len(invalid) != 1 || invalid[0].Key != "etdc" || invalid[0].RuleID != "unknown-key" {
		t.Fatalf("want only etdc refused as unknown, got %v", err)
	}
}

func TestLoadRefusesAKeySetThatDisagreesWithTheContext(t *testing.T) {
	values := shippedValues(t)
	encoded, _ := json.Marshal(values)
	t.Setenv(pulumi.EnvConfig, string(encoded))
	var loadErr error
	_ = pulumi.RunErr(func(ctx *pulumi.Context) error {
		delete(values, config.Project+":oidc")
		_, loadErr = LoadFrom(ctx, values)
		return nil
	}, pulumi.WithMocks(config.Project, "kind", noResources{}))
	if loadErr == nil {
		t.Fatal("a key set without oidc, which the context has, was accepted")
	}
}

// Without PULUMI_CONFIG (an inline program) the known keys are still read from the
// context; unknown ones cannot be seen there.
func TestLoadWithoutPulumiConfigReadsTheKnownKeys(t *testing.T) {
	values := shippedValues(t)
	t.Setenv(pulumi.EnvConfig, "")
	os.Unsetenv(pulumi.EnvConfig)
	var cfg *config.Config
	var loadErr error
	_ = pulumi.RunErr(func(ctx *pulumi.Context) error {
		cfg, loadErr = Load(ctx)
		return nil
	}, pulumi.WithMocks(config.Project, "kind", noResources{}), func(info *pulumi.RunInfo) { info.Config = values })
	if loadErr != nil || cfg.Etcd.Members != 1 {
		t.Fatalf("got %+v, %v", cfg, loadErr)
	}
}
