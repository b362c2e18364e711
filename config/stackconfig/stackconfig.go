// Package stackconfig loads the Config inside a running Pulumi program: the stack's
// config keys from the program's context, and the stack's previous state through a
// stack reference to itself. It is the only part of the config that needs the Pulumi
// SDK; package config itself does not import it, so a tool that reads a stack file
// (cmd/verify) does not link Pulumi.
package stackconfig

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/config"
)

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
func Load(ctx *pulumi.Context) (*config.Config, error) {
	raw, ok := os.LookupEnv(pulumi.EnvConfig)
	if !ok {
		_ = ctx.Log.Warn("railgrid-kcp: the stack config did not arrive in "+pulumi.EnvConfig+
			" (an inline program?), so keys the program does not know cannot be refused; run it with `pulumi preview`/`pulumi up`", nil)
		values := map[string]string{}
		for _, key := range config.TopLevelKeys() {
			if v, ok := ctx.GetConfig(config.Project + ":" + key); ok {
				values[config.Project+":"+key] = v
			}
		}
		cfg, err := config.FromValues(values)
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
func LoadFrom(ctx *pulumi.Context, values map[string]string) (*config.Config, error) {
	for _, key := range config.TopLevelKeys() {
		full := config.Project + ":" + key
		inContext, inCtx := ctx.GetConfig(full)
		given, inValues := values[full]
		if inCtx != inValues || inContext != given {
			return nil, fmt.Errorf("config key %s differs between the program's context and the key set it was loaded from", full)
		}
	}
	cfg, err := config.FromValues(values)
	if err != nil {
		return nil, err
	}
	return cfg, checkPrevious(ctx, cfg)
}

// checkPrevious reads the stack's previous state (ReadPreviousShards) and refuses what
// would break the running platform. It runs after the config checks and before the
// program declares anything: it reads the stack's own outputs, and declares nothing.
func checkPrevious(ctx *pulumi.Context, cfg *config.Config) error {
	prev, err := ReadPreviousShards(ctx)
	if err != nil {
		return err
	}
	return cfg.CheckAgainstPrevious(prev)
}

// ReadPreviousShards reads config.PreviousShardsOutput of the stack's own last update
// (organization/project/stack). A stack that has never run an `up` (or ran one before
// this output existed) has no previous shards. It reads with the engine's builtin
// readStackOutputs, the call behind a stack reference, rather than a StackReference
// resource: a stack reference to itself is read at the start of each update, before the
// update changes the outputs, so a refresh afterwards always found it changed.
func ReadPreviousShards(ctx *pulumi.Context) (map[string]config.ShardEndpoint, error) {
	self := fmt.Sprintf("%s/%s/%s", ctx.Organization(), ctx.Project(), ctx.Stack())
	var read struct {
		Outputs map[string]any `pulumi:"outputs"`
	}
	err := ctx.Invoke(ReadStackOutputsToken, readStackOutputsArgs{Name: self}, &read)
	for attempt := 1; err != nil && strings.HasSuffix(err.Error(), checkpointBeingWritten) && attempt < checkpointReadAttempts; attempt++ {
		time.Sleep(checkpointReadPause)
		err = ctx.Invoke(ReadStackOutputsToken, readStackOutputsArgs{Name: self}, &read)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the previous state of stack %s: %w", self, err)
	}
	raw := read.Outputs[config.PreviousShardsOutput]
	if raw == nil {
		return nil, nil
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var prev map[string]config.ShardEndpoint
	if err := json.Unmarshal(data, &prev); err != nil {
		return nil, fmt.Errorf("the output %s of stack %s is not the map of shard endpoints this program writes: %w", config.PreviousShardsOutput, self, err)
	}
	return prev, nil
}

// The file (diy) backend's read of the checkpoint fails with checkpointBeingWritten when
// it meets the checkpoint's attributes file while the engine rewrites it, which the
// engine does as the update starts, just when this read runs (gocloud.dev's fileblob
// truncates that file in place, then writes it). The read is made again, a bounded
// number of times; any other error, or this one that persists, refuses the update.
const (
	checkpointBeingWritten = "failed to load checkpoint: EOF"
	checkpointReadAttempts = 20
	checkpointReadPause    = 100 * time.Millisecond
)

// ReadStackOutputsToken is the engine's builtin call that reads a stack's outputs.
const ReadStackOutputsToken = "pulumi:pulumi:readStackOutputs"

type readStackOutputsArgs struct {
	Name string `pulumi:"name"`
}
