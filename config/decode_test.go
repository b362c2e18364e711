package config_test

import "testing"

// The keys and types inside the sections (decode.go), a key unknown or given twice and a
// value of the wrong type: each refusal below is refused naming its rule, key and value.
func TestDecodeRefusals(t *testing.T) { requireRefused(t, decodeRefusals) }

var decodeRefusals = []refusal{
	{name: "misspelled key in a section", rule: "unknown-key", stack: "kind",
		edit: set("etcd.member", 3),
		key:  "etcd.member", value: "3",
		says: "is not a key of etcd; known keys: members, volumeSize, storageClass"},
	{name: "a second spelling in other capitals", rule: "unknown-key", stack: "kind",
		edit: set("etcd.Members", 3),
		key:  "etcd.Members", value: "3",
		says: "capitals included: did you mean members?"},
	{name: "key in other capitals deep down", rule: "unknown-key", stack: "gke",
		edit: set("kcp.frontProxy.clusterIp", "34.118.224.100"),
		key:  "kcp.frontProxy.clusterIp", value: "34.118.224.100",
		says: "did you mean clusterIP?"},
	{name: "key given twice", rule: "duplicate-key", stack: "kind",
		edit: set("etcd", `{"members":1,"volumeSize":"2Gi","members":3}`),
		key:  "etcd.members", value: "3",
		says: "more than once"},
	{name: "members as a word", rule: "type", stack: "kind",
		edit: set("etcd.members", "three"),
		key:  "etcd.members", value: "three",
		says: "must be a whole number"},
	{name: "replicas null", rule: "type", stack: "gke",
		edit: set("kcp.rootShard.replicas", nil),
		key:  "kcp.rootShard.replicas", value: "null",
		says: "not null"},
	{name: "shards not a list", rule: "type", stack: "kind",
		edit: set("kcp.shards", map[string]any{"name": "alpha"}),
		key:  "kcp.shards", value: `{"name":"alpha"}`,
		says: "must be a list"},
	{name: "flag as a string", rule: "type", stack: "kind",
		edit: set("kind.certManagerPresent", "yes"),
		key:  "kind.certManagerPresent", value: "yes",
		says: "must be true or false"},
}
