package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
)

// The platform and the other platform's section (validate.go): each refusal below is
// refused naming its rule, key and value.
func TestPlatformRefusals(t *testing.T) { requireRefused(t, platformRefusals) }

var platformRefusals = []refusal{
	{name: "platform", rule: "platform", stack: "kind",
		edit: set("platform", "k3s"),
		key:  "platform", value: "k3s",
		says: "kind or gke"},
	{name: "platform missing", rule: "platform", stack: "kind",
		edit: unset("platform"),
		key:  "platform", value: "",
		says: "kind or gke"},
	{name: "kind section on gke", rule: "other-platform-section", stack: "gke",
		edit: set("kind", map[string]any{"context": "x"}),
		key:  "kind", value: "(set)",
		says: "belongs to the kind platform"},
	{name: "issuer ClusterIP on gke", rule: "issuer-cluster-ip-gke", stack: "gke",
		edit: set("kind.issuerClusterIP", "34.118.224.110"),
		key:  "kind.issuerClusterIP", value: "34.118.224.110",
		says: "on GKE the issuer is public"},
}

// On GKE the issuer is public: kind.issuerClusterIP is refused with that reason alone,
// not as one more key of the kind section.
func TestIssuerClusterIPOnGKEIsRefusedWithItsOwnReason(t *testing.T) {
	issuerIP := set("kind.issuerClusterIP", "34.118.224.110")
	_, err := load(t, "gke", issuerIP, nil)
	var invalid config.Errors
	require.ErrorAs(t, err, &invalid)
	require.Len(t, invalid, 1, "%v", err)
	require.Equal(t, "issuer-cluster-ip-gke", invalid[0].RuleID)

	_, err = load(t, "gke", edits(issuerIP, set("kind.context", "kind-railgrid-kcp")), nil)
	require.ErrorAs(t, err, &invalid)
	rules := map[string]string{}
	for _, fe := range invalid {
		rules[fe.Key] = fe.RuleID
	}
	want := map[string]string{"kind.issuerClusterIP": "issuer-cluster-ip-gke", "kind": "other-platform-section"}
	require.Equal(t, want, rules, "%v", err)
}
