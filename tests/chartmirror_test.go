package tests

import (
	"maps"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
)

// The Helm releases of the stacks, by logical name, on each platform.
const (
	operatorRelease     = "railgrid-kcp-operator-release"
	certManagerRelease  = "railgrid-kcp-kind-cert-manager"
	envoyGatewayRelease = "railgrid-kcp-kind-envoy-gateway"
	helmReleaseType     = "kubernetes:helm.sh/v3:Release"
)

// chartInputs is where a release's chart comes from, as its inputs say: chart and
// repositoryOpts (nil when the inputs have none).
type chartInputs struct {
	chart          string
	repositoryOpts map[string]any
}

// releaseInputs are the inputs of the Helm release name, as plain values.
func releaseInputs(t *testing.T, rec *mockstack.Recording, name string) map[string]any {
	t.Helper()
	return inputs(find(t, rec, helmReleaseType, name))
}

// requireChartFrom checks each release's chart and repositoryOpts, and that nothing else
// of its inputs differs from the shipped stack's release: a chart's source changes only
// where Helm fetches the chart.
func requireChartFrom(t *testing.T, shipped, rec *mockstack.Recording, want map[string]chartInputs) {
	t.Helper()
	require.Len(t, rec.ByType(helmReleaseType), len(want), "stack %s: releases", rec.Stack)
	for name, w := range want {
		got := releaseInputs(t, rec, name)
		require.Equal(t, w.chart, got["chart"], "%s: chart", name)
		if w.repositoryOpts == nil {
			require.NotContains(t, got, "repositoryOpts", "%s: an OCI chart has no repositoryOpts", name)
		} else {
			require.Equal(t, w.repositoryOpts, got["repositoryOpts"], "%s: repositoryOpts", name)
		}
		rest, shippedRest := maps.Clone(got), maps.Clone(releaseInputs(t, shipped, name))
		for _, m := range []map[string]any{rest, shippedRest} {
			delete(m, "chart")
			delete(m, "repositoryOpts")
		}
		require.Equal(t, shippedRest, rest, "%s: inputs other than the chart's source", name)
	}
}

// requireSameURNs checks that rec declares exactly the URNs of the shipped stack: a
// chart's source is an input, never part of a resource's identity.
func requireSameURNs(t *testing.T, shipped, rec *mockstack.Recording) {
	t.Helper()
	urns := func(r *mockstack.Recording) []string {
		var out []string
		for _, res := range r.Resources {
			out = append(out, res.URN)
		}
		sort.Strings(out)
		return out
	}
	require.Equal(t, urns(shipped), urns(rec))
}

// With the default chart sources, each release's chart and repositoryOpts are exactly
// what the stacks have always declared (so existing stacks see no diff): no caFile, not
// even an empty one, and Envoy Gateway as an OCI reference without repositoryOpts.
func TestChartReleasesKeepTheUpstreamSourcesByDefault(t *testing.T) {
	operator := chartInputs{"kcp-operator", map[string]any{"repo": "https://kcp-dev.github.io/helm-charts"}}
	kind := runStack(t, "kind")
	requireChartFrom(t, kind, kind, map[string]chartInputs{
		operatorRelease:     operator,
		certManagerRelease:  {"cert-manager", map[string]any{"repo": "https://charts.jetstack.io"}},
		envoyGatewayRelease: {"oci://docker.io/envoyproxy/gateway-helm", nil},
	})
	gke := runStack(t, "gke")
	requireChartFrom(t, gke, gke, map[string]chartInputs{operatorRelease: operator})
}

// Every chart from an https mirror behind a private CA: each release takes its chart by
// name from the mirror, with the CA file as the config gives it, relative path included.
func TestHTTPSChartMirrorWithACAFileIsAccepted(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "mirror-ca.pem")
	writeCACertificate(t, caFile)
	// A relative path is read from the program's working directory (the tests' here).
	relCAFile, err := filepath.Rel(mustGetwd(t), caFile)
	require.NoError(t, err)

	values := stackValues(t, "kind")
	setIn(values, "operator", "chartRepository", "https://charts.mirror.example.com/kcp-dev")
	setIn(values, "operator", "chartCAFile", caFile)
	setIn(values, "kind", "certManagerChart", map[string]any{"repository": "https://charts.mirror.example.com/jetstack", "caFile": relCAFile})
	setIn(values, "kind", "envoyGatewayChart", map[string]any{"repository": "https://charts.mirror.example.com/envoyproxy/", "caFile": caFile})
	rec, err := runValues(t, "kind", values, mockstack.Options{})
	require.NoError(t, err)

	shipped := runStack(t, "kind")
	requireChartFrom(t, shipped, rec, map[string]chartInputs{
		operatorRelease:     {"kcp-operator", map[string]any{"repo": "https://charts.mirror.example.com/kcp-dev", "caFile": caFile}},
		certManagerRelease:  {"cert-manager", map[string]any{"repo": "https://charts.mirror.example.com/jetstack", "caFile": relCAFile}},
		envoyGatewayRelease: {"gateway-helm", map[string]any{"repo": "https://charts.mirror.example.com/envoyproxy/", "caFile": caFile}},
	})
	requireSameURNs(t, shipped, rec)
}

// Every chart from an OCI mirror, without a CA file: each release's chart is the
// reference <repository>/<name>, with no repositoryOpts.
func TestOCIChartMirrorIsAccepted(t *testing.T) {
	values := stackValues(t, "kind")
	setIn(values, "operator", "chartRepository", "oci://registry.mirror.example.com/kcp-dev")
	setIn(values, "kind", "certManagerChart.repository", "oci://registry.mirror.example.com/jetstack/")
	setIn(values, "kind", "envoyGatewayChart.repository", "oci://registry.mirror.example.com/envoyproxy")
	rec, err := runValues(t, "kind", values, mockstack.Options{})
	require.NoError(t, err)
	shipped := runStack(t, "kind")
	requireChartFrom(t, shipped, rec, map[string]chartInputs{
		operatorRelease:     {"oci://registry.mirror.example.com/kcp-dev/kcp-operator", nil},
		certManagerRelease:  {"oci://registry.mirror.example.com/jetstack/cert-manager", nil},
		envoyGatewayRelease: {"oci://registry.mirror.example.com/envoyproxy/gateway-helm", nil},
	})
	requireSameURNs(t, shipped, rec)

	gkeValues := stackValues(t, "gke")
	setIn(gkeValues, "operator", "chartRepository", "oci://registry.mirror.example.com/kcp-dev")
	gke, err := runValues(t, "gke", gkeValues, mockstack.Options{})
	require.NoError(t, err)
	requireChartFrom(t, runStack(t, "gke"), gke, map[string]chartInputs{
		operatorRelease: {"oci://registry.mirror.example.com/kcp-dev/kcp-operator", nil},
	})
}

// writeCACertificate writes a self-signed CA certificate, PEM-encoded, to path.
func writeCACertificate(t *testing.T, path string) {
	t.Helper()
	ca, err := pki.NewCA("chart mirror test CA")
	require.NoError(t, err)
	require.NoError(t, ca.WriteCA(path))
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	return wd
}

// A password in a chart repository's URL is refused and never shown: the error, which CI
// logs print, masks it, whether the URL parses or not.
func TestChartRepositoryPasswordIsNotShown(t *testing.T) {
	for _, repository := range []string{
		"oci://robot:s3cret@registry.mirror.example.com/envoyproxy",
		"https://robot:s3cret@charts mirror.example.com/envoyproxy",
	} {
		values := stackValues(t, "kind")
		// With a CA file, which is refused for an oci:// repository and names it.
		setIn(values, "kind", "envoyGatewayChart", map[string]any{"repository": repository, "caFile": "../config/testdata/chart-ca/not-pem.txt"})
		_, err := runValues(t, "kind", values, mockstack.Options{})
		require.Error(t, err, repository)
		require.Contains(t, err.Error(), "kind.envoyGatewayChart.repository", repository)
		require.Contains(t, err.Error(), "robot:xxxxx@", repository)
		require.NotContains(t, err.Error(), "s3cret", repository)
	}
}
