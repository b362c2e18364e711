package config

import (
	"fmt"
	"sort"

	"github.com/railgrid/railgrid-kcp/naming"
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
	now[naming.RootShardName] = "kcp.rootShard"
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
