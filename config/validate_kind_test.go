package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The kind platform (validate_kind.go): each refusal below is refused naming its rule,
// key and value, and each acceptance, at the edge of a rule, is taken.
func TestKindRefusals(t *testing.T) { requireRefused(t, kindRefusals) }

func TestKindAcceptances(t *testing.T) { requireAccepted(t, kindAcceptances) }

var kindRefusals = []refusal{
	{name: "three members on one kind node", rule: "kind-schedulable", stack: "kind",
		edit: set("etcd.members", 3),
		key:  "etcd.members", value: "3",
		says: "must be at most kind.nodeZones (1)"},
	{name: "members left to the default on kind", rule: "kind-schedulable", stack: "kind",
		edit: set("etcd", map[string]any{"volumeSize": "2Gi"}),
		key:  "etcd.members", value: "3",
		says: "2 of 3 members would stay Pending"},
	{name: "kind node zones zero", rule: "kind-node-zones", stack: "kind",
		edit: set("kind.nodeZones", 0),
		key:  "kind.nodeZones", value: "0",
		says: "at least 1"},
	{name: "kind context empty", rule: "kind-context", stack: "kind",
		edit: set("kind.context", ""),
		key:  "kind.context", value: "",
		says: "kubeconfig context"},
	{name: "kind kubeconfig missing", rule: "kind-kubeconfig", stack: "kind",
		edit: set("kind.kubeconfig", "/nonexistent/kubeconfig"),
		key:  "kind.kubeconfig", value: "/nonexistent/kubeconfig",
		says: "a kubeconfig file that exists"},
	{name: "kind node port zero", rule: "kind-node-port", stack: "kind",
		edit: set("kind.gatewayNodePort", 0),
		key:  "kind.gatewayNodePort", value: "0",
		says: "between 30000 and 32767"},
	{name: "issuer ClusterIP for an issuer at an address", rule: "issuer-cluster-ip-host", stack: "kind",
		edit: set("oidc.issuerURL", "https://10.96.0.110/dex"),
		key:  "kind.issuerClusterIP", value: "10.96.0.110",
		says: `the issuer's host "10.96.0.110" (oidc.issuerURL) is an IP address`},
	{name: "issuer ClusterIP for an issuer on a shard's hostname", rule: "issuer-cluster-ip-host", stack: "kind",
		edit: set("oidc.issuerURL", "https://alpha.kcp.localhost:5556/dex"),
		key:  "kind.issuerClusterIP", value: "10.96.0.110",
		says: "is kcp.shards[0].hostname too"},
	{name: "issuer ClusterIP for an issuer on the front proxy's hostname",
		rule: "issuer-cluster-ip-host", stack: "kind",
		edit: set("oidc.issuerURL", "https://kcp.localhost/dex"),
		key:  "kind.issuerClusterIP", value: "10.96.0.110",
		says: "is kcp.frontProxy.hostname too"},
	{name: "issuer ClusterIP for an issuer host with an underscore", rule: "issuer-cluster-ip-host", stack: "kind",
		edit: set("oidc.issuerURL", "https://dex_1.kcp.localhost"),
		key:  "kind.issuerClusterIP", value: "10.96.0.110",
		says: "lower-case RFC 1123 subdomain"},
}

// kindAcceptances are values next to the refusals above that Kubernetes takes, so the
// config takes them too.
var kindAcceptances = []acceptance{
	// One replica is refused on gke only (replicas-gke): a one-node dev cluster has no
	// other node or zone to keep a second one on.
	{name: "one root shard replica on kind", stack: "kind",
		edit: set("kcp.rootShard.replicas", 1)},
	{name: "no issuer ClusterIP on kind", stack: "kind",
		edit: unset("kind.issuerClusterIP")},
	{name: "issuer ClusterIP with an issuer URL that has a port and a path", stack: "kind",
		edit: set("oidc.issuerURL", "https://login.railgrid.test:5556/dex")},
}

// A kind cluster with nodes in three zones may run three etcd members per shard.
func TestKindNodeZonesAllowMoreMembers(t *testing.T) {
	cfg, err := load(t, "kind", edits(set("etcd.members", 3), set("kind.nodeZones", 3)), nil)
	require.NoError(t, err)
	require.Equal(t, 3, cfg.Etcd.Members)
}
