package config_test

import (
	"testing"

	"github.com/railgrid/railgrid-kcp/config"
)

// What the previous state shows would break a running platform (previous.go): each
// refusal below is refused naming its rule, key and value.
func TestPreviousStateRefusals(t *testing.T) { requireRefused(t, previousStateRefusals) }

var previousStateRefusals = []refusal{
	{name: "shard removed without retiring it", rule: "shard-vanished", stack: "kind", previous: ranWithBeta,
		key: "kcp.shards", value: "beta",
		says: "list it in kcp.retiredShards"},
	{name: "shard renamed in place", rule: "shard-vanished", stack: "kind", previous: ranWithBeta,
		edit: addShard("gamma", "beta.kcp.localhost", "10.96.0.103"),
		key:  "kcp.shards", value: "beta",
		says: "a rename is a retire plus an add"},
	{name: "shard hostname moved", rule: "shard-moved", stack: "kind", previous: ranWithBeta,
		edit: addShard("beta", "b.kcp.localhost", "10.96.0.103"),
		key:  "kcp.shards[1].hostname", value: "b.kcp.localhost",
		says: "was beta.kcp.localhost at the last up"},
	{name: "shard ClusterIP moved", rule: "shard-moved", stack: "kind", previous: ranWithBeta,
		edit: addShard("beta", "beta.kcp.localhost", "10.96.0.104"),
		key:  "kcp.shards[1].clusterIP", value: "10.96.0.104",
		says: "cannot change in place"},
	{name: "root shard ClusterIP moved", rule: "shard-moved", stack: "kind", previous: ranWithBeta,
		edit: edits(
			set("kcp.rootShard.clusterIP", "10.96.0.111"),
			addShard("beta", "beta.kcp.localhost", "10.96.0.103"),
		),
		key: "kcp.rootShard.clusterIP", value: "10.96.0.111",
		says: "was 10.96.0.101"},
}

// ranWithBeta is the previous state of a kind stack whose last up ran the shard beta.
var ranWithBeta = map[string]config.ShardEndpoint{
	"root":  {Hostname: "root.kcp.localhost", ClusterIP: "10.96.0.101"},
	"alpha": {Hostname: "alpha.kcp.localhost", ClusterIP: "10.96.0.102"},
	"beta":  {Hostname: "beta.kcp.localhost", ClusterIP: "10.96.0.103"},
}
