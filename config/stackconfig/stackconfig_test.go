package stackconfig

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// checkpointReads answers the stack's read of its own outputs with the file backend's
// error failures times, then with no outputs.
type checkpointReads struct {
	noResources
	failures, calls int
	err             string
}

func (c *checkpointReads) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	if args.Token != ReadStackOutputsToken {
		return resource.PropertyMap{}, nil
	}
	c.calls++
	if c.calls <= c.failures {
		return nil, errors.New(c.err)
	}
	return resource.PropertyMap{"outputs": resource.NewObjectProperty(resource.PropertyMap{})}, nil
}

func readPrevious(t *testing.T, mocks *checkpointReads) error {
	t.Helper()
	var readErr error
	_ = pulumi.RunErr(func(ctx *pulumi.Context) error {
		_, readErr = ReadPreviousShards(ctx)
		return nil
	}, pulumi.WithMocks(config.Project, "kind", mocks))
	return readErr
}

// The file backend's checkpoint, met while the engine rewrites it, is read again; it
// refuses the update when it stays unreadable, and any other error refuses it at once.
func TestThePreviousStateIsReadAgainWhileTheCheckpointIsBeingWritten(t *testing.T) {
	racing := &checkpointReads{failures: 3, err: "invocation of pulumi:pulumi:readStackOutputs returned an error: " + checkpointBeingWritten}
	if err := readPrevious(t, racing); err != nil || racing.calls != 4 {
		t.Fatalf("after 3 reads of a checkpoint being written: %v, %d reads", err, racing.calls)
	}
	stuck := &checkpointReads{failures: checkpointReadAttempts, err: racing.err}
	if err := readPrevious(t, stuck); err == nil || !strings.Contains(err.Error(), checkpointBeingWritten) || stuck.calls != checkpointReadAttempts {
		t.Fatalf("a checkpoint that stays unreadable: %v, %d reads", err, stuck.calls)
	}
	other := &checkpointReads{failures: 1, err: "failed to load checkpoint: permission denied"}
	if err := readPrevious(t, other); err == nil || other.calls != 1 {
		t.Fatalf("another error: %v, %d reads", err, other.calls)
	}
}
