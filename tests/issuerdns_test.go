package tests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The kind split horizon answers the issuer's hostname with kind.issuerClusterIP, as it
// answers the shard hostnames, so kcp's pods reach the issuer (the hub's Dex, whose
// Service takes that ClusterIP) by its public name without going out through the edge.
func TestKindSplitHorizonAnswersTheIssuerWithItsClusterIP(t *testing.T) {
	cfg := shippedConfig(t, "kind")
	require.Equal(t, "10.96.0.110", cfg.Kind.IssuerClusterIP, "Pulumi.kind.yaml")
	require.Equal(t, "dex.kcp.localhost", cfg.IssuerHostname())
	require.Contains(t, hostsLines(t, runStack(t, "kind")), "10.96.0.110 dex.kcp.localhost")

	values := stackValues(t, "kind")
	setIn(values, "oidc", "issuerURL", "https://login.railgrid.test:5556/dex")
	setIn(values, "kind", "issuerClusterIP", "10.96.0.120")
	rec, err := runValues(t, "kind", values, mockstack.Options{})
	require.NoError(t, err)
	require.Contains(t, hostsLines(t, rec), "10.96.0.120 login.railgrid.test", "the issuer URL's host, without port or path")

	delete(values[key("kind")].(map[string]any), "issuerClusterIP")
	rec, err = runValues(t, "kind", values, mockstack.Options{})
	require.NoError(t, err)
	lines := hostsLines(t, rec)
	require.Len(t, lines, 2, "the root shard's and alpha's answers: %v", lines)
	for _, line := range lines {
		require.NotContains(t, line, "login.railgrid.test", "no issuerClusterIP, no answer")
	}
}

// hostsLines are the lines of the kind split horizon's hosts file.
func hostsLines(t *testing.T, rec *mockstack.Recording) []string {
	t.Helper()
	hosts := getString(t, inputs(object(t, rec, "ConfigMap", naming.SplitHorizonHostsConfigMap)), "data.hosts")
	return strings.Split(strings.TrimSpace(hosts), "\n")
}
