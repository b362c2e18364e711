package config

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// PreviousShardsOutput is the stack output that records, at every `up`, each shard's
// hostname and ClusterIP (the root shard under its name). The next `up` reads it back
// through a stack reference to the stack itself: the rules that compare a config with
// what runs (a shard that vanished, a move) need the previous state, which config
// checks alone cannot see.
const PreviousShardsOutput = "shardEndpoints"

// ShardEndpoint is where a shard was reachable at the last `up`.
type ShardEndpoint struct {
	Hostname  string `json:"hostname"`
	ClusterIP string `json:"clusterIP"`
}

// Endpoints is the value of PreviousShardsOutput for this config.
func (c *Config) Endpoints() map[string]ShardEndpoint {
	out := map[string]ShardEndpoint{}
	for _, s := range c.Kcp.AllShards() {
		out[s.Name] = ShardEndpoint{Hostname: s.Hostname, ClusterIP: s.ClusterIP}
	}
	return out
}

// previousStateWait bounds the wait for the stack reference's outputs, which the engine
// reads in preview and up alike.
const previousStateWait = 5 * time.Minute

// ReadPreviousShards reads PreviousShardsOutput of the stack's own last update through a
// stack reference to itself (organization/project/stack). A stack that has never run an
// `up` (or ran one before this output existed) has no previous shards.
func ReadPreviousShards(ctx *pulumi.Context) (map[string]ShardEndpoint, error) {
	self := fmt.Sprintf("%s/%s/%s", ctx.Organization(), ctx.Project(), ctx.Stack())
	ref, err := pulumi.NewStackReference(ctx, Project+"-previous-state", &pulumi.StackReferenceArgs{Name: pulumi.String(self)})
	if err != nil {
		return nil, fmt.Errorf("reading the previous state of stack %s: %w", self, err)
	}
	got := make(chan any, 1)
	ref.Outputs.ApplyT(func(outputs map[string]any) error {
		got <- outputs[PreviousShardsOutput]
		return nil
	})
	var raw any
	select {
	case raw = <-got:
	case <-time.After(previousStateWait):
		return nil, fmt.Errorf("the previous state of stack %s (its output %s) did not arrive within %s", self, PreviousShardsOutput, previousStateWait)
	}
	if raw == nil {
		return nil, nil
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var prev map[string]ShardEndpoint
	if err := json.Unmarshal(data, &prev); err != nil {
		return nil, fmt.Errorf("the output %s of stack %s is not the map of shard endpoints this program writes: %w", PreviousShardsOutput, self, err)
	}
	return prev, nil
}

// CheckAgainstPrevious refuses what the previous state shows would break a running
// platform: a shard that ran at the last `up` and is neither in kcp.shards nor in
// kcp.retiredShards (removed by accident, or renamed in place), and a shard whose
// hostname or ClusterIP changed (a move).
func (c *Config) CheckAgainstPrevious(prev map[string]ShardEndpoint) error {
	var errs Errors
	now := map[string]string{}
	for i, s := range c.Kcp.Shards {
		now[s.Name] = fmt.Sprintf("kcp.shards[%d]", i)
	}
	now[RootShardName] = "kcp.rootShard"
	retired := map[string]bool{}
	for _, name := range c.Kcp.RetiredShards {
		retired[name] = true
	}
	names := make([]string, 0, len(prev))
	for name := range prev {
		names = append(names, name)
	}
	sort.Strings(names)
	var added []string
	for _, s := range c.Kcp.Shards {
		if _, ran := prev[s.Name]; !ran {
			added = append(added, s.Name)
		}
	}
	for _, name := range names {
		was := prev[name]
		key, running := now[name]
		switch {
		case !running && !retired[name]:
			rename := ""
			if len(added) > 0 {
				rename = fmt.Sprintf(" If it was renamed to %v: a rename is a retire plus an add, the new shard starts on a new, empty etcd and the old data stays orphaned; say so by listing %s in kcp.retiredShards.", added, name)
			}
			errs.addf(ruleShardVanished, "kcp.shards", name,
				"ran at the last up (%s, %s) and is missing from kcp.shards: removing it deletes its Shard, Service, route and DNS answer. To retire it (its etcd volumes are kept) list it in kcp.retiredShards; otherwise put it back.%s",
				was.Hostname, was.ClusterIP, rename)
		case running && c.endpointOf(name).Hostname != was.Hostname:
			errs.addf(ruleShardMoved, key+".hostname", c.endpointOf(name).Hostname,
				"was %s at the last up: moving a running shard's hostname is refused, as the hostname is in its serving certificate, its virtual-workspace URL and the hub's and providers' kubeconfigs, which the program cannot move in one up; retire the shard and add one under the new hostname",
				was.Hostname)
		case running && c.endpointOf(name).ClusterIP != was.ClusterIP:
			errs.addf(ruleShardMoved, key+".clusterIP", c.endpointOf(name).ClusterIP,
				"was %s at the last up: a Service's ClusterIP cannot change in place, so the owned Service would be deleted and created again and the shard cut off in between, while resolvers still cache the old answer; moving a running shard's ClusterIP is refused",
				was.ClusterIP)
		}
	}
	return errs.orNil()
}

func (c *Config) endpointOf(name string) Endpoint {
	for _, s := range c.Kcp.AllShards() {
		if s.Name == name {
			return s.Endpoint
		}
	}
	return Endpoint{}
}
