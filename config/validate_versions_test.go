package config_test

import "testing"

// The pinned versions (validate_versions.go): each refusal below is refused naming its
// rule, key and value, and each acceptance, at the edge of a rule, is taken.
func TestVersionsRefusals(t *testing.T) { requireRefused(t, versionsRefusals) }

func TestVersionsAcceptances(t *testing.T) { requireAccepted(t, versionsAcceptances) }

var versionsRefusals = []refusal{
	{name: "kcp version latest", rule: "pinned-version", stack: "kind",
		edit: set("versions.kcp", "latest"),
		key:  "versions.kcp", value: "latest",
		says: "pinned release"},
	{name: "kcp version empty", rule: "pinned-version", stack: "kind",
		edit: set("versions.kcp", ""),
		key:  "versions.kcp", value: "",
		says: "not empty"},
	{name: "kcp version without v", rule: "pinned-version", stack: "kind",
		edit: set("versions.kcp", "0.33"),
		key:  "versions.kcp", value: "0.33",
		says: "pinned release"},
	{name: "etcd floating tag", rule: "pinned-version", stack: "gke",
		edit: set("versions.etcd", "v3.6"),
		key:  "versions.etcd", value: "v3.6",
		says: "pinned release"},
	{name: "etcd tag with build metadata", rule: "pinned-version", stack: "gke",
		edit: set("versions.etcd", "v3.6.14+gke.1"),
		key:  "versions.etcd", value: "v3.6.14+gke.1",
		says: "no +build suffix"},
	{name: "kcp version a major shorthand", rule: "pinned-version", stack: "kind",
		edit: set("versions.kcp", "v0"),
		key:  "versions.kcp", value: "v0",
		says: "floating tag"},
	{name: "cert-manager version with a leading zero", rule: "pinned-version", stack: "kind",
		edit: set("versions.certManager", "v1.020.2"),
		key:  "versions.certManager", value: "v1.020.2",
		says: "pinned release"},
	{name: "operator chart with a leading v", rule: "pinned-version", stack: "kind",
		edit: set("versions.operatorChart", "v0.7.10"),
		key:  "versions.operatorChart", value: "v0.7.10",
		says: "without a leading v"},
	{name: "operator pair unknown", rule: "operator-pair", stack: "kind",
		edit: set("versions.operatorImage", "v0.9.0"),
		key:  "versions.operatorImage", value: "v0.9.0",
		says: "not a known pair"},
	{name: "operator chart unknown", rule: "operator-pair", stack: "kind",
		edit: set("versions.operatorChart", "0.7.9"),
		key:  "versions.operatorImage", value: "v0.10.0",
		says: "not a known pair with kcp-operator chart 0.7.9"},
}

// versionsAcceptances are values next to the refusals above that Kubernetes takes, so the
// config takes them too.
var versionsAcceptances = []acceptance{
	{name: "kcp pre-release", stack: "kind", edit: set("versions.kcp", "v0.34.0-rc.1")},
	{name: "etcd pre-release", stack: "gke", edit: set("versions.etcd", "v3.7.0-alpha.0")},
}
