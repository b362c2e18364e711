package config_test

import "testing"

// The generated names' collisions (collisions.go): each refusal below is refused naming
// its rule, key and value.
func TestCollisionRefusals(t *testing.T) { requireRefused(t, collisionRefusals) }

var collisionRefusals = []refusal{
	{name: "shard named frontproxy", rule: "name-collision", stack: "kind",
		edit: set("kcp.shards[0].name", "frontproxy"),
		key:  "kcp.shards[0].name", value: "frontproxy",
		says: "gives Service kcp-system/kcp-frontproxy, which kcp.frontProxy already gives"},
	{name: "shard named root-headless", rule: "name-collision", stack: "gke",
		edit: set("kcp.shards[0].name", "root-headless"),
		key:  "kcp.shards[0].name", value: "root-headless",
		says: "gives Service etcd/etcd-root-headless, which kcp.rootShard already gives"},
	{name: "shards whose Services collide", rule: "name-collision", stack: "kind",
		edit: edits(set("kcp.shards[0].name", "kcp-x"), addShard("x-shard-kcp", "x.kcp.localhost", "10.96.0.103")),
		key:  "kcp.shards[1].name", value: "x-shard-kcp",
		says: "kcp.shards[0].name already gives (the kcp-operator creates it)"},
	{name: "hub namespace kcp-system", rule: "name-collision", stack: "kind",
		edit: set("hub.namespace", "kcp-system"),
		key:  "hub.namespace", value: "kcp-system",
		says: "gives Namespace kcp-system, which the program already gives"},
	{name: "hub namespace etcd", rule: "name-collision", stack: "gke",
		edit: set("hub.namespace", "etcd"),
		key:  "hub.namespace", value: "etcd",
		says: "Namespace etcd"},
	{name: "hub namespace kcp-operator", rule: "name-collision", stack: "kind",
		edit: set("hub.namespace", "kcp-operator"),
		key:  "hub.namespace", value: "kcp-operator",
		says: "Namespace kcp-operator"},
	{name: "hub namespace of cert-manager on kind", rule: "name-collision", stack: "kind",
		edit: set("hub.namespace", "cert-manager"),
		key:  "hub.namespace", value: "cert-manager",
		says: "a Helm release of the kind stack creates it"},
}
