package config_test

import (
	"testing"

	"github.com/railgrid/railgrid-kcp/config"
)

// Where each chart comes from (validate_charts.go): each refusal below is refused
// naming its rule, key and value, and each acceptance, at the edge of a rule, is taken.
func TestChartsRefusals(t *testing.T) { requireRefused(t, chartsRefusals) }

func TestChartsAcceptances(t *testing.T) { requireAccepted(t, chartsAcceptances) }

var chartsRefusals = []refusal{
	{name: "chart repository not https", rule: "chart-repository", stack: "kind",
		edit: set("operator.chartRepository", "http://charts.example.com"),
		key:  "operator.chartRepository", value: "http://charts.example.com",
		says: "https://"},
	{name: "chart repository and path", rule: "chart-source", stack: "kind",
		edit: set("operator", map[string]any{
			"chartRepository": config.OperatorChartRepository, "chartPath": "charts/kcp-operator",
		}),
		key: "operator.chartPath", value: "charts/kcp-operator",
		says: "both set"},
	{name: "chart path empty", rule: "chart-source", stack: "kind",
		edit: set("operator", map[string]any{"chartPath": ""}),
		key:  "operator.chartPath", value: "",
		says: "local chart directory"},
	{name: "chart CA file with a chart path", rule: "chart-source", stack: "kind",
		edit: set("operator", map[string]any{"chartPath": "charts/kcp-operator", "chartCAFile": "mirror-ca.pem"}),
		key:  "operator.chartCAFile", value: "mirror-ca.pem",
		says: "needs no CA"},
	{name: "cert-manager chart while cert-manager is present", rule: "chart-source", stack: "kind",
		edit: edits(
			set("kind.certManagerPresent", true),
			set("kind.certManagerChart.repository", "https://charts.mirror.example.com/jetstack"),
		),
		key: "kind.certManagerChart.repository", value: "https://charts.mirror.example.com/jetstack",
		says: "while kind.certManagerPresent is true"},
	{name: "Envoy Gateway chart CA while Envoy Gateway is present", rule: "chart-source", stack: "kind",
		edit: edits(
			set("kind.envoyGatewayPresent", true),
			set("kind.envoyGatewayChart.caFile", "testdata/chart-ca/not-pem.txt"),
		),
		key: "kind.envoyGatewayChart.caFile", value: "testdata/chart-ca/not-pem.txt",
		says: "does not install that chart"},
	{name: "cert-manager chart over http", rule: "chart-repository", stack: "kind",
		edit: set("kind.certManagerChart.repository", "http://charts.mirror.example.com/jetstack"),
		key:  "kind.certManagerChart.repository", value: "http://charts.mirror.example.com/jetstack",
		says: "does not start with https:// or oci://"},
	{name: "chart repository with a query", rule: "chart-repository", stack: "gke",
		edit: set("operator.chartRepository", "https://charts.mirror.example.com/kcp?token=abc"),
		key:  "operator.chartRepository", value: "https://charts.mirror.example.com/kcp?token=abc",
		says: "it has a query"},
	{name: "chart repository with a fragment", rule: "chart-repository", stack: "kind",
		edit: set("kind.envoyGatewayChart.repository", "oci://registry.mirror.example.com/envoyproxy#v1"),
		key:  "kind.envoyGatewayChart.repository", value: "oci://registry.mirror.example.com/envoyproxy#v1",
		says: "it has a fragment"},
	{name: "chart repository without a host", rule: "chart-repository", stack: "kind",
		edit: set("kind.envoyGatewayChart.repository", "oci:///envoyproxy"),
		key:  "kind.envoyGatewayChart.repository", value: "oci:///envoyproxy",
		says: "it has no host"},
	// The password is masked in the error, which CI logs show.
	{name: "chart repository with a password", rule: "chart-repository", stack: "kind",
		edit: set("kind.envoyGatewayChart.repository", "oci://robot:s3cret@registry.mirror.example.com/envoyproxy"),
		key:  "kind.envoyGatewayChart.repository", value: "oci://robot:xxxxx@registry.mirror.example.com/envoyproxy",
		says: "it has a user name"},
	{name: "chart repository that does not parse, with a password", rule: "chart-repository", stack: "kind",
		edit: set("kind.certManagerChart.repository", "https://robot:s3cret@charts mirror.example.com/jetstack"),
		key:  "kind.certManagerChart.repository", value: "https://robot:xxxxx@charts mirror.example.com/jetstack",
		says: "invalid character"},
	{name: "OCI scheme in capitals", rule: "chart-repository", stack: "kind",
		edit: set("operator.chartRepository", "OCI://registry.mirror.example.com/kcp-dev"),
		key:  "operator.chartRepository", value: "OCI://registry.mirror.example.com/kcp-dev",
		says: "(in lower case)"},
	{name: "CA file with an OCI repository", rule: "chart-ca-file", stack: "kind",
		edit: set("kind.envoyGatewayChart.caFile", "testdata/chart-ca/not-pem.txt"),
		key:  "kind.envoyGatewayChart.caFile", value: "testdata/chart-ca/not-pem.txt",
		says: "trust store of the machine that runs pulumi (SSL_CERT_FILE or SSL_CERT_DIR"},
	{name: "chart CA file with an OCI operator repository", rule: "chart-ca-file", stack: "gke",
		edit: set("operator", map[string]any{
			"chartRepository": "oci://registry.mirror.example.com/kcp-dev", "chartCAFile": "/etc/ssl/mirror-ca.pem",
		}),
		key: "operator.chartCAFile", value: "/etc/ssl/mirror-ca.pem",
		says: "would be silently ignored"},
	{name: "CA file missing", rule: "chart-ca-file", stack: "kind",
		edit: set("kind.certManagerChart", map[string]any{
			"repository": "https://charts.mirror.example.com/jetstack", "caFile": "/nonexistent/mirror-ca.pem",
		}),
		key: "kind.certManagerChart.caFile", value: "/nonexistent/mirror-ca.pem",
		says: "no such file or directory"},
	{name: "CA file a directory", rule: "chart-ca-file", stack: "kind",
		edit: set("operator.chartCAFile", "testdata/chart-ca"),
		key:  "operator.chartCAFile", value: "testdata/chart-ca",
		says: "is a directory"},
	{name: "CA file not PEM", rule: "chart-ca-file", stack: "kind",
		edit: set("operator.chartCAFile", "testdata/chart-ca/not-pem.txt"),
		key:  "operator.chartCAFile", value: "testdata/chart-ca/not-pem.txt",
		says: "holds no PEM certificate"},
	{name: "CA file with a certificate that is not X.509", rule: "chart-ca-file", stack: "kind",
		edit: set("kind.certManagerChart.caFile", "testdata/chart-ca/not-x509.pem"),
		key:  "kind.certManagerChart.caFile", value: "testdata/chart-ca/not-x509.pem",
		says: "its certificate 1 does not parse as X.509"},
	{name: "CA file empty", rule: "chart-ca-file", stack: "kind",
		edit: set("operator.chartCAFile", ""),
		key:  "operator.chartCAFile", value: "",
		says: "leave the key out"},
}

// chartsAcceptances are values next to the refusals above that Kubernetes takes, so the
// config takes them too.
var chartsAcceptances = []acceptance{
	{name: "chart repositories on an OCI mirror, with a port", stack: "kind",
		edit: edits(
			set("operator.chartRepository", "oci://registry.mirror.example.com:5000/kcp-dev"),
			set("kind.certManagerChart.repository", "oci://registry.mirror.example.com:5000/jetstack/"),
			set("kind.envoyGatewayChart.repository", "oci://registry.mirror.example.com:5000/envoyproxy"),
		)},
	{name: "Envoy Gateway chart from an https mirror", stack: "kind",
		edit: set("kind.envoyGatewayChart.repository", "https://charts.mirror.example.com/envoyproxy")},
	{name: "chart settings of an add-on left at their defaults while it is present", stack: "kind",
		edit: edits(
			set("kind.certManagerPresent", true),
			set("kind.certManagerChart", map[string]any{}),
		)},
}
