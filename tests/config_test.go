package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
)

// refusal is one config that a rule refuses: a shipped stack with one edit, and the key
// path, value and rule the error must name.
type refusal struct {
	name     string
	rule     string // config.Rule ID
	stack    string
	edit     func(v map[string]any)
	key      string
	value    string
	says     string // part of the error's wording
	gkeRange string // Service range the mocked GKE cluster lookup reports
	// previous is what the stack's last up recorded, as its stack reference to itself
	// returns it (rules that need the previous state).
	previous map[string]config.ShardEndpoint
}

// ranWithBeta is the previous state of a kind stack whose last up ran the shard beta.
var ranWithBeta = map[string]config.ShardEndpoint{
	"root":  {Hostname: "root.kcp.localhost", ClusterIP: "10.96.0.101"},
	"alpha": {Hostname: "alpha.kcp.localhost", ClusterIP: "10.96.0.102"},
	"beta":  {Hostname: "beta.kcp.localhost", ClusterIP: "10.96.0.103"},
}

// refusals holds at least one refusal per rule of config.Rules;
// TestEveryRuleHasARefusalTest fails for a rule without one.
var refusals = []refusal{
	{name: "misspelled top-level key", rule: "unknown-key", stack: "kind", edit: func(v map[string]any) { v[key("etdc")] = map[string]any{"members": 1} },
		key: "etdc", value: `{"members":1}`, says: "is not a railgrid-kcp config key"},
	{name: "top-level key in other capitals", rule: "unknown-key", stack: "kind", edit: func(v map[string]any) { v[key("Etcd")] = map[string]any{"members": 1} },
		key: "Etcd", value: `{"members":1}`, says: "did you mean etcd?"},
	{name: "misspelled key in a section", rule: "unknown-key", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "member", 3) },
		key: "etcd.member", value: "3", says: "is not a key of etcd; known keys: members, volumeSize, storageClass"},
	{name: "a second spelling in other capitals", rule: "unknown-key", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "Members", 3) },
		key: "etcd.Members", value: "3", says: "capitals included: did you mean members?"},
	{name: "key in other capitals deep down", rule: "unknown-key", stack: "gke", edit: func(v map[string]any) { setIn(v, "kcp", "frontProxy.clusterIp", "34.118.224.100") },
		key: "kcp.frontProxy.clusterIp", value: "34.118.224.100", says: "did you mean clusterIP?"},
	{name: "key given twice", rule: "duplicate-key", stack: "kind", edit: func(v map[string]any) { v[key("etcd")] = `{"members":1,"volumeSize":"2Gi","members":3}` },
		key: "etcd.members", value: "3", says: "more than once"},
	{name: "members as a word", rule: "type", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "members", "three") },
		key: "etcd.members", value: "three", says: "must be a whole number"},
	{name: "replicas null", rule: "type", stack: "gke", edit: func(v map[string]any) { setIn(v, "kcp", "rootShard.replicas", nil) },
		key: "kcp.rootShard.replicas", value: "null", says: "not null"},
	{name: "section not a mapping", rule: "type", stack: "kind", edit: func(v map[string]any) { v[key("network")] = "10.96.0.0/16" },
		key: "network", value: "10.96.0.0/16", says: "must be a mapping"},
	{name: "shards not a list", rule: "type", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards", map[string]any{"name": "alpha"}) },
		key: "kcp.shards", value: `{"name":"alpha"}`, says: "must be a list"},
	{name: "flag as a string", rule: "type", stack: "kind", edit: func(v map[string]any) { setIn(v, "kind", "certManagerPresent", "yes") },
		key: "kind.certManagerPresent", value: "yes", says: "must be true or false"},
	{name: "platform", rule: "platform", stack: "kind", edit: func(v map[string]any) { v[key("platform")] = "k3s" },
		key: "platform", value: "k3s", says: "kind or gke"},
	{name: "platform missing", rule: "platform", stack: "kind", edit: func(v map[string]any) { delete(v, key("platform")) },
		key: "platform", value: "", says: "kind or gke"},
	{name: "kind section on gke", rule: "other-platform-section", stack: "gke", edit: func(v map[string]any) { v[key("kind")] = map[string]any{"context": "x"} },
		key: "kind", value: "(set)", says: "belongs to the kind platform"},
	{name: "kcp version latest", rule: "pinned-version", stack: "kind", edit: func(v map[string]any) { setIn(v, "versions", "kcp", "latest") },
		key: "versions.kcp", value: "latest", says: "pinned release"},
	{name: "kcp version empty", rule: "pinned-version", stack: "kind", edit: func(v map[string]any) { setIn(v, "versions", "kcp", "") },
		key: "versions.kcp", value: "", says: "not empty"},
	{name: "kcp version without v", rule: "pinned-version", stack: "kind", edit: func(v map[string]any) { setIn(v, "versions", "kcp", "0.33") },
		key: "versions.kcp", value: "0.33", says: "pinned release"},
	{name: "etcd floating tag", rule: "pinned-version", stack: "gke", edit: func(v map[string]any) { setIn(v, "versions", "etcd", "v3.6") },
		key: "versions.etcd", value: "v3.6", says: "pinned release"},
	{name: "etcd tag with build metadata", rule: "pinned-version", stack: "gke", edit: func(v map[string]any) { setIn(v, "versions", "etcd", "v3.6.14+gke.1") },
		key: "versions.etcd", value: "v3.6.14+gke.1", says: "no +build suffix"},
	{name: "kcp version a major shorthand", rule: "pinned-version", stack: "kind", edit: func(v map[string]any) { setIn(v, "versions", "kcp", "v0") },
		key: "versions.kcp", value: "v0", says: "floating tag"},
	{name: "cert-manager version with a leading zero", rule: "pinned-version", stack: "kind", edit: func(v map[string]any) { setIn(v, "versions", "certManager", "v1.020.2") },
		key: "versions.certManager", value: "v1.020.2", says: "pinned release"},
	{name: "operator chart with a leading v", rule: "pinned-version", stack: "kind", edit: func(v map[string]any) { setIn(v, "versions", "operatorChart", "v0.7.10") },
		key: "versions.operatorChart", value: "v0.7.10", says: "without a leading v"},
	{name: "operator pair unknown", rule: "operator-pair", stack: "kind", edit: func(v map[string]any) { setIn(v, "versions", "operatorImage", "v0.9.0") },
		key: "versions.operatorImage", value: "v0.9.0", says: "not a known pair"},
	{name: "operator chart unknown", rule: "operator-pair", stack: "kind", edit: func(v map[string]any) { setIn(v, "versions", "operatorChart", "0.7.9") },
		key: "versions.operatorImage", value: "v0.10.0", says: "not a known pair with kcp-operator chart 0.7.9"},
	{name: "chart repository not https", rule: "chart-repository", stack: "kind", edit: func(v map[string]any) { setIn(v, "operator", "chartRepository", "http://charts.example.com") },
		key: "operator.chartRepository", value: "http://charts.example.com", says: "https://"},
	{name: "chart repository and path", rule: "chart-source", stack: "kind", edit: func(v map[string]any) {
		v[key("operator")] = map[string]any{"chartRepository": config.OperatorChartRepository, "chartPath": "charts/kcp-operator"}
	},
		key: "operator.chartPath", value: "charts/kcp-operator", says: "both set"},
	{name: "chart path empty", rule: "chart-source", stack: "kind", edit: func(v map[string]any) { v[key("operator")] = map[string]any{"chartPath": ""} },
		key: "operator.chartPath", value: "", says: "local chart directory"},
	{name: "chart CA file with a chart path", rule: "chart-source", stack: "kind", edit: func(v map[string]any) {
		v[key("operator")] = map[string]any{"chartPath": "charts/kcp-operator", "chartCAFile": "mirror-ca.pem"}
	},
		key: "operator.chartCAFile", value: "mirror-ca.pem", says: "needs no CA"},
	{name: "cert-manager chart while cert-manager is present", rule: "chart-source", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kind", "certManagerPresent", true)
		setIn(v, "kind", "certManagerChart.repository", "https://charts.mirror.example.com/jetstack")
	},
		key: "kind.certManagerChart.repository", value: "https://charts.mirror.example.com/jetstack", says: "while kind.certManagerPresent is true"},
	{name: "Envoy Gateway chart CA while Envoy Gateway is present", rule: "chart-source", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kind", "envoyGatewayPresent", true)
		setIn(v, "kind", "envoyGatewayChart.caFile", "testdata/chart-ca/not-pem.txt")
	},
		key: "kind.envoyGatewayChart.caFile", value: "testdata/chart-ca/not-pem.txt", says: "does not install that chart"},
	{name: "cert-manager chart over http", rule: "chart-repository", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kind", "certManagerChart.repository", "http://charts.mirror.example.com/jetstack")
	},
		key: "kind.certManagerChart.repository", value: "http://charts.mirror.example.com/jetstack", says: "does not start with https:// or oci://"},
	{name: "chart repository with a query", rule: "chart-repository", stack: "gke", edit: func(v map[string]any) {
		setIn(v, "operator", "chartRepository", "https://charts.mirror.example.com/kcp?token=abc")
	},
		key: "operator.chartRepository", value: "https://charts.mirror.example.com/kcp?token=abc", says: "it has a query"},
	{name: "chart repository with a fragment", rule: "chart-repository", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kind", "envoyGatewayChart.repository", "oci://registry.mirror.example.com/envoyproxy#v1")
	},
		key: "kind.envoyGatewayChart.repository", value: "oci://registry.mirror.example.com/envoyproxy#v1", says: "it has a fragment"},
	{name: "chart repository without a host", rule: "chart-repository", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kind", "envoyGatewayChart.repository", "oci:///envoyproxy")
	},
		key: "kind.envoyGatewayChart.repository", value: "oci:///envoyproxy", says: "it has no host"},
	// The password is masked in the error, which CI logs show.
	{name: "chart repository with a password", rule: "chart-repository", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kind", "envoyGatewayChart.repository", "oci://robot:s3cret@registry.mirror.example.com/envoyproxy")
	},
		key: "kind.envoyGatewayChart.repository", value: "oci://robot:xxxxx@registry.mirror.example.com/envoyproxy", says: "it has a user name"},
	{name: "chart repository that does not parse, with a password", rule: "chart-repository", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kind", "certManagerChart.repository", "https://robot:s3cret@charts mirror.example.com/jetstack")
	},
		key: "kind.certManagerChart.repository", value: "https://robot:xxxxx@charts mirror.example.com/jetstack", says: "invalid character"},
	{name: "OCI scheme in capitals", rule: "chart-repository", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "operator", "chartRepository", "OCI://registry.mirror.example.com/kcp-dev")
	},
		key: "operator.chartRepository", value: "OCI://registry.mirror.example.com/kcp-dev", says: "(in lower case)"},
	{name: "CA file with an OCI repository", rule: "chart-ca-file", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kind", "envoyGatewayChart.caFile", "testdata/chart-ca/not-pem.txt")
	},
		key: "kind.envoyGatewayChart.caFile", value: "testdata/chart-ca/not-pem.txt", says: "trust store of the machine that runs pulumi (SSL_CERT_FILE or SSL_CERT_DIR"},
	{name: "chart CA file with an OCI operator repository", rule: "chart-ca-file", stack: "gke", edit: func(v map[string]any) {
		v[key("operator")] = map[string]any{"chartRepository": "oci://registry.mirror.example.com/kcp-dev", "chartCAFile": "/etc/ssl/mirror-ca.pem"}
	},
		key: "operator.chartCAFile", value: "/etc/ssl/mirror-ca.pem", says: "would be silently ignored"},
	{name: "CA file missing", rule: "chart-ca-file", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kind", "certManagerChart", map[string]any{"repository": "https://charts.mirror.example.com/jetstack", "caFile": "/nonexistent/mirror-ca.pem"})
	},
		key: "kind.certManagerChart.caFile", value: "/nonexistent/mirror-ca.pem", says: "no such file or directory"},
	{name: "CA file a directory", rule: "chart-ca-file", stack: "kind", edit: func(v map[string]any) { setIn(v, "operator", "chartCAFile", "testdata/chart-ca") },
		key: "operator.chartCAFile", value: "testdata/chart-ca", says: "is a directory"},
	{name: "CA file not PEM", rule: "chart-ca-file", stack: "kind", edit: func(v map[string]any) { setIn(v, "operator", "chartCAFile", "testdata/chart-ca/not-pem.txt") },
		key: "operator.chartCAFile", value: "testdata/chart-ca/not-pem.txt", says: "holds no PEM certificate"},
	{name: "CA file with a certificate that is not X.509", rule: "chart-ca-file", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kind", "certManagerChart.caFile", "testdata/chart-ca/not-x509.pem")
	},
		key: "kind.certManagerChart.caFile", value: "testdata/chart-ca/not-x509.pem", says: "its certificate 1 does not parse as X.509"},
	{name: "CA file empty", rule: "chart-ca-file", stack: "kind", edit: func(v map[string]any) { setIn(v, "operator", "chartCAFile", "") },
		key: "operator.chartCAFile", value: "", says: "leave the key out"},
	{name: "shard base URL", rule: "shard-base-url", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].shardBaseURL", "https://alpha.kcp.localhost") },
		key: "kcp.shards[0].shardBaseURL", value: "https://alpha.kcp.localhost", says: "every request arrives as an empty user"},
	{name: "root shard base URL", rule: "shard-base-url", stack: "gke", edit: func(v map[string]any) {
		setIn(v, "kcp", "rootShard.shardBaseURL", "https://kcp-root.railgrid.example.com")
	},
		key: "kcp.rootShard.shardBaseURL", value: "https://kcp-root.railgrid.example.com", says: "only the virtual-workspace URL"},
	{name: "invalid hostname", rule: "hostname", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "rootShard.hostname", "Root_Shard") },
		key: "kcp.rootShard.hostname", value: "Root_Shard", says: "valid DNS name"},
	{name: "numeric top-level domain", rule: "hostname", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "rootShard.hostname", "kcp.10") },
		key: "kcp.rootShard.hostname", value: "kcp.10", says: "valid DNS name"},
	{name: "hostname label of 64 characters", rule: "hostname", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kcp", "rootShard.hostname", strings.Repeat("r", 64)+".kcp.localhost")
	},
		key: "kcp.rootShard.hostname", value: strings.Repeat("r", 64) + ".kcp.localhost", says: "must be no more than 63 characters"},
	{name: "hostname of 255 characters", rule: "hostname", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "rootShard.hostname", longName(4)) },
		key: "kcp.rootShard.hostname", value: longName(4), says: "must be no more than 253 characters"},
	{name: "wildcard hostname", rule: "hostname", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "frontProxy.hostname", "*.kcp.localhost") },
		key: "kcp.frontProxy.hostname", value: "*.kcp.localhost", says: "RFC 1123 subdomain"},
	{name: "hostname with a trailing dot", rule: "hostname", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "frontProxy.hostname", "kcp.localhost.") },
		key: "kcp.frontProxy.hostname", value: "kcp.localhost.", says: "RFC 1123 subdomain"},
	{name: "single-label hostname", rule: "hostname", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "frontProxy.hostname", "kcp") },
		key: "kcp.frontProxy.hostname", value: "kcp", says: "single label"},
	{name: "hostname an IP address", rule: "hostname-ip", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "frontProxy.hostname", "192.168.1.10") },
		key: "kcp.frontProxy.hostname", value: "192.168.1.10", says: "Gateway API hostnames are names"},
	{name: "duplicate hostname", rule: "hostname-distinct", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].hostname", "root.kcp.localhost") },
		key: "kcp.shards[0].hostname", value: "root.kcp.localhost", says: "kcp.rootShard.hostname has the same name"},
	{name: "replicas zero", rule: "replicas", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "frontProxy.replicas", 0) },
		key: "kcp.frontProxy.replicas", value: "0", says: "at least 1"},
	{name: "shard name not a label", rule: "shard-name", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].name", "Alpha") },
		key: "kcp.shards[0].name", value: "Alpha", says: "DNS label"},
	{name: "shard name starting with a digit", rule: "shard-name", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].name", "1alpha") },
		key: "kcp.shards[0].name", value: "1alpha", says: "start with an alphabetic character"},
	{name: "shard name of 31 characters", rule: "shard-name", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].name", strings.Repeat("s", 31)) },
		key: "kcp.shards[0].name", value: strings.Repeat("s", 31), says: "it has 31 characters"},
	{name: "shard named root", rule: "shard-name-root", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].name", "root") },
		key: "kcp.shards[0].name", value: "root", says: "reserved for the root shard"},
	{name: "two shards one name", rule: "shard-name-distinct", stack: "kind", edit: func(v map[string]any) { addShard(v, "alpha", "beta.kcp.localhost", "10.96.0.103") },
		key: "kcp.shards[1].name", value: "alpha", says: "another shard has the same name"},
	{name: "request timeout", rule: "request-timeout", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "requestTimeout", "1h") },
		key: "kcp.requestTimeout", value: "1h", says: "loadBalancer.timeout"},
	{name: "shard named frontproxy", rule: "name-collision", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].name", "frontproxy") },
		key: "kcp.shards[0].name", value: "frontproxy", says: "gives Service kcp-system/kcp-frontproxy, which kcp.frontProxy already gives"},
	{name: "shard named root-headless", rule: "name-collision", stack: "gke", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].name", "root-headless") },
		key: "kcp.shards[0].name", value: "root-headless", says: "gives Service etcd/etcd-root-headless, which kcp.rootShard already gives"},
	{name: "shards whose Services collide", rule: "name-collision", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kcp", "shards[0].name", "kcp-x")
		addShard(v, "x-shard-kcp", "x.kcp.localhost", "10.96.0.103")
	},
		key: "kcp.shards[1].name", value: "x-shard-kcp", says: "kcp.shards[0].name already gives (the kcp-operator creates it)"},
	{name: "hub namespace kcp-system", rule: "name-collision", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "namespace", "kcp-system") },
		key: "hub.namespace", value: "kcp-system", says: "gives Namespace kcp-system, which the program already gives"},
	{name: "hub namespace etcd", rule: "name-collision", stack: "gke", edit: func(v map[string]any) { setIn(v, "hub", "namespace", "etcd") },
		key: "hub.namespace", value: "etcd", says: "Namespace etcd"},
	{name: "hub namespace kcp-operator", rule: "name-collision", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "namespace", "kcp-operator") },
		key: "hub.namespace", value: "kcp-operator", says: "Namespace kcp-operator"},
	{name: "hub namespace of cert-manager on kind", rule: "name-collision", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "namespace", "cert-manager") },
		key: "hub.namespace", value: "cert-manager", says: "a Helm release of the kind stack creates it"},
	{name: "OIDC issuer not https", rule: "issuer-url", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "issuerURL", "http://dex.kcp.localhost") },
		key: "oidc.issuerURL", value: "http://dex.kcp.localhost", says: "https://"},
	{name: "OIDC client ID empty", rule: "client-id", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "clientID", "") },
		key: "oidc.clientID", value: "", says: "hub's client ID"},
	{name: "OIDC username claim", rule: "oidc-fixed", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "usernameClaim", "sub") },
		key: "oidc.usernameClaim", value: "sub", says: "railgrid:<email>"},
	{name: "OIDC groups prefix", rule: "oidc-fixed", stack: "gke", edit: func(v map[string]any) { setIn(v, "oidc", "groupsPrefix", "oidc:") },
		key: "oidc.groupsPrefix", value: "oidc:", says: "fixed by the hub"},
	{name: "OIDC CA secret name", rule: "ca-secret-name", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "caSecret", map[string]any{"name": "Issuer CA"}) },
		key: "oidc.caSecret.name", value: "Issuer CA", says: "Secret in kcp-system"},
	{name: "OIDC CA secret name with an underscore", rule: "ca-secret-name", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "oidc", "caSecret", map[string]any{"name": "issuer_ca", "key": "ca.crt"})
	},
		key: "oidc.caSecret.name", value: "issuer_ca", says: "RFC 1123 subdomain"},
	{name: "OIDC CA secret key empty", rule: "ca-secret-key", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "oidc", "caSecret", map[string]any{"name": "issuer-ca", "key": ""})
	},
		key: "oidc.caSecret.key", value: "", says: "Secret key"},
	{name: "OIDC CA secret key a path", rule: "ca-secret-key", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "oidc", "caSecret", map[string]any{"name": "issuer-ca", "key": "ca/ca.crt"})
	},
		key: "oidc.caSecret.key", value: "ca/ca.crt", says: "must consist of alphanumeric characters, '-', '_' or '.'"},
	{name: "OIDC CA secret key with a space", rule: "ca-secret-key", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "oidc", "caSecret", map[string]any{"name": "issuer-ca", "key": "ca crt"})
	},
		key: "oidc.caSecret.key", value: "ca crt", says: "must consist of alphanumeric characters"},
	{name: "OIDC CA secret key ..", rule: "ca-secret-key", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "caSecret", map[string]any{"name": "issuer-ca", "key": ".."}) },
		key: "oidc.caSecret.key", value: "..", says: "must not be '..'"},
	{name: "OIDC CA as PEM text and as a Secret", rule: "ca-certificates-and-secret", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "oidc", "caCertificates", issuerCAs.root)
		setIn(v, "oidc", "caSecret", map[string]any{"name": "issuer-ca"})
	},
		key: "oidc.caCertificates", value: pemShown(issuerCAs.root, "CERTIFICATE"), says: "and oidc.caSecret (Secret issuer-ca) are both set"},
	{name: "OIDC CA not PEM", rule: "ca-certificates-pem", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "caCertificates", "ca.pem") },
		key: "oidc.caCertificates", value: pemShown("ca.pem"), says: "it is not PEM"},
	{name: "OIDC CA empty", rule: "ca-certificates-pem", stack: "gke", edit: func(v map[string]any) { setIn(v, "oidc", "caCertificates", "") },
		key: "oidc.caCertificates", value: pemShown(""), says: "it is empty"},
	{name: "OIDC CA with a private key", rule: "ca-certificates-pem", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "caCertificates", issuerCAs.withKey) },
		key: "oidc.caCertificates", value: pemShown(issuerCAs.withKey, "CERTIFICATE", "PRIVATE KEY"), says: "its PEM block 2 is PRIVATE KEY, not a CERTIFICATE: a private key does not belong in stack config"},
	{name: "OIDC CA certificate that does not parse", rule: "ca-certificates-pem", stack: "gke", edit: func(v map[string]any) {
		setIn(v, "oidc", "caCertificates", issuerCAs.root+badCertificatePEM)
	},
		key: "oidc.caCertificates", value: pemShown(issuerCAs.root+badCertificatePEM, "CERTIFICATE", "CERTIFICATE"), says: "its certificate 2 does not parse as X.509"},
	{name: "OIDC CA with text after it", rule: "ca-certificates-pem", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "caCertificates", issuerCAs.root+"ca.crt\n") },
		key: "oidc.caCertificates", value: pemShown(issuerCAs.root+"ca.crt\n", "CERTIFICATE"), says: "it has text after its PEM block 1"},
	{name: "OIDC CA a block without its end", rule: "ca-certificates-pem", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "oidc", "caCertificates", "-----BEGIN CERTIFICATE-----\nMIIB\n"+issuerCAs.root)
	},
		key: "oidc.caCertificates", value: pemShown("-----BEGIN CERTIFICATE-----\nMIIB\n"+issuerCAs.root, "CERTIFICATE"), says: "its PEM block 1 does not decode"},
	{name: "OIDC CA a serving certificate", rule: "ca-certificates-ca", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "caCertificates", issuerCAs.notACA) },
		key: "oidc.caCertificates", value: pemShown(issuerCAs.notACA, "CERTIFICATE"), says: `certificate 1 of 1 (subject "CN=dex.kcp.localhost", valid`},
	{name: "OIDC CA chain with a serving certificate", rule: "ca-certificates-ca", stack: "gke", edit: func(v map[string]any) {
		setIn(v, "oidc", "caCertificates", issuerCAs.chain+issuerCAs.notACA)
	},
		key: "oidc.caCertificates", value: pemShown(issuerCAs.chain+issuerCAs.notACA, "CERTIFICATE", "CERTIFICATE", "CERTIFICATE"), says: "certificate 3 of 3 (subject \"CN=dex.kcp.localhost\""},
	{name: "OIDC CA expired", rule: "ca-certificates-validity", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "caCertificates", issuerCAs.expired) },
		key: "oidc.caCertificates", value: pemShown(issuerCAs.expired, "CERTIFICATE"), says: "expired at"},
	{name: "OIDC CA not valid yet", rule: "ca-certificates-validity", stack: "gke", edit: func(v map[string]any) { setIn(v, "oidc", "caCertificates", issuerCAs.notYetValid) },
		key: "oidc.caCertificates", value: pemShown(issuerCAs.notYetValid, "CERTIFICATE"), says: "is not valid before"},
	{name: "etcd two members", rule: "etcd-members", stack: "gke", edit: func(v map[string]any) { setIn(v, "etcd", "members", 2) },
		key: "etcd.members", value: "2", says: "1, 3 or 5"},
	{name: "etcd zero members", rule: "etcd-members", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "members", 0) },
		key: "etcd.members", value: "0", says: "1, 3 or 5"},
	{name: "kcp cpu not a quantity", rule: "kcp-resources", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "resources.cpu", "one") },
		key: "kcp.resources.cpu", value: "one", says: "quantities must match the regular expression"},
	{name: "kcp cpu zero", rule: "kcp-resources", stack: "gke", edit: func(v map[string]any) { setIn(v, "kcp", "resources.cpu", "0") },
		key: "kcp.resources.cpu", value: "0", says: "greater than zero"},
	{name: "kcp memory above its limit", rule: "kcp-resources", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kcp", "resources.memory", "3Gi")
		setIn(v, "kcp", "resources.memoryLimit", "2Gi")
	}, key: "kcp.resources.memory", value: "3Gi", says: "above kcp.resources.memoryLimit 2Gi"},
	{name: "kcp memory limit negative", rule: "kcp-resources", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "resources.memoryLimit", "-2Gi") },
		key: "kcp.resources.memoryLimit", value: "-2Gi", says: "greater than zero"},
	{name: "etcd volume size", rule: "etcd-volume-size", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "volumeSize", "20GB") },
		key: "etcd.volumeSize", value: "20GB", says: "size"},
	{name: "etcd volume size zero", rule: "etcd-volume-size", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "volumeSize", "0Gi") },
		key: "etcd.volumeSize", value: "0Gi", says: "greater than zero"},
	{name: "etcd volume size negative", rule: "etcd-volume-size", stack: "gke", edit: func(v map[string]any) { setIn(v, "etcd", "volumeSize", "-20Gi") },
		key: "etcd.volumeSize", value: "-20Gi", says: "greater than zero"},
	{name: "etcd volume size in lower case", rule: "etcd-volume-size", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "volumeSize", "2gi") },
		key: "etcd.volumeSize", value: "2gi", says: "quantities must match the regular expression"},
	{name: "etcd volume size with a space", rule: "etcd-volume-size", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "volumeSize", "2 Gi") },
		key: "etcd.volumeSize", value: "2 Gi", says: "quantities must match the regular expression"},
	{name: "storage class empty", rule: "storage-class", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "storageClass", "") },
		key: "etcd.storageClass", value: "", says: "StorageClass"},
	{name: "storage class in capitals", rule: "storage-class", stack: "gke", edit: func(v map[string]any) { setIn(v, "etcd", "storageClass", "Etcd-SSD") },
		key: "etcd.storageClass", value: "Etcd-SSD", says: "RFC 1123 subdomain"},
	{name: "three members on one kind node", rule: "kind-schedulable", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "members", 3) },
		key: "etcd.members", value: "3", says: "must be at most kind.nodeZones (1)"},
	{name: "members left to the default on kind", rule: "kind-schedulable", stack: "kind", edit: func(v map[string]any) { v[key("etcd")] = map[string]any{"volumeSize": "2Gi"} },
		key: "etcd.members", value: "3", says: "2 of 3 members would stay Pending"},
	{name: "kind node zones zero", rule: "kind-node-zones", stack: "kind", edit: func(v map[string]any) { setIn(v, "kind", "nodeZones", 0) },
		key: "kind.nodeZones", value: "0", says: "at least 1"},
	{name: "gke zones fewer than members", rule: "gke-zones-for-members", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "zones", []any{"europe-west1-b", "europe-west1-c"}) },
		key: "gke.zones", value: "europe-west1-b,europe-west1-c", says: "at least 3 distinct zones"},
	{name: "service range invalid", rule: "service-cidr", stack: "kind", edit: func(v map[string]any) { setIn(v, "network", "serviceCIDR", "10.96.0.1/16") },
		key: "network.serviceCIDR", value: "10.96.0.1/16", says: "CIDR"},
	{name: "cluster IP not an address", rule: "cluster-ip-address", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "frontProxy.clusterIP", "kcp") },
		key: "kcp.frontProxy.clusterIP", value: "kcp", says: "IPv4 address"},
	{name: "cluster IP outside range", rule: "cluster-ip-range", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "rootShard.clusterIP", "10.97.0.10") },
		key: "kcp.rootShard.clusterIP", value: "10.97.0.10", says: "inside the Service range 10.96.0.0/16"},
	// The GKE lookup reports a Service range that does not hold the fixed addresses.
	{name: "gke cluster range", rule: "cluster-ip-range", stack: "gke", edit: func(map[string]any) {}, gkeRange: "10.8.0.0/20",
		key: "kcp.frontProxy.clusterIP", value: "34.118.224.100", says: "Service range of GKE cluster railgrid"},
	{name: "cluster IP reserved", rule: "cluster-ip-reserved", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "rootShard.clusterIP", "10.96.0.10") },
		key: "kcp.rootShard.clusterIP", value: "10.96.0.10", says: "reserves"},
	{name: "cluster IP dynamic band", rule: "cluster-ip-band", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].clusterIP", "10.96.200.7") },
		key: "kcp.shards[0].clusterIP", value: "10.96.200.7", says: "static band"},
	{name: "cluster IP duplicate", rule: "cluster-ip-distinct", stack: "gke", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].clusterIP", "34.118.224.101") },
		key: "kcp.shards[0].clusterIP", value: "34.118.224.101", says: "distinct"},
	{name: "issuer ClusterIP not an address", rule: "cluster-ip-address", stack: "kind", edit: func(v map[string]any) { setIn(v, "kind", "issuerClusterIP", "dex") },
		key: "kind.issuerClusterIP", value: "dex", says: "IPv4 address"},
	{name: "issuer ClusterIP empty", rule: "cluster-ip-address", stack: "kind", edit: func(v map[string]any) { setIn(v, "kind", "issuerClusterIP", "") },
		key: "kind.issuerClusterIP", value: "", says: "IPv4 address"},
	{name: "issuer ClusterIP outside the Service range", rule: "cluster-ip-range", stack: "kind", edit: func(v map[string]any) { setIn(v, "kind", "issuerClusterIP", "10.97.0.110") },
		key: "kind.issuerClusterIP", value: "10.97.0.110", says: "inside the Service range 10.96.0.0/16 (network.serviceCIDR)"},
	{name: "issuer ClusterIP reserved", rule: "cluster-ip-reserved", stack: "kind", edit: func(v map[string]any) { setIn(v, "kind", "issuerClusterIP", "10.96.0.10") },
		key: "kind.issuerClusterIP", value: "10.96.0.10", says: "reserves"},
	{name: "issuer ClusterIP in the dynamic band", rule: "cluster-ip-band", stack: "kind", edit: func(v map[string]any) { setIn(v, "kind", "issuerClusterIP", "10.96.1.110") },
		key: "kind.issuerClusterIP", value: "10.96.1.110", says: "static band"},
	{name: "issuer ClusterIP a shard's", rule: "cluster-ip-distinct", stack: "kind", edit: func(v map[string]any) { setIn(v, "kind", "issuerClusterIP", "10.96.0.102") },
		key: "kind.issuerClusterIP", value: "10.96.0.102", says: "must be distinct; kcp.shards[0].clusterIP has the same address"},
	{name: "issuer ClusterIP the front proxy's", rule: "cluster-ip-distinct", stack: "kind", edit: func(v map[string]any) { setIn(v, "kind", "issuerClusterIP", "10.96.0.100") },
		key: "kind.issuerClusterIP", value: "10.96.0.100", says: "kcp.frontProxy.clusterIP has the same address"},
	{name: "load balancer timeout too short", rule: "lb-timeout", stack: "gke", edit: func(v map[string]any) { setIn(v, "loadBalancer", "timeout", "30s") },
		key: "loadBalancer.timeout", value: "30s", says: "at least 60s"},
	{name: "hub namespace kube-system", rule: "hub-namespace", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "namespace", "kube-system") },
		key: "hub.namespace", value: "kube-system", says: "kube-*"},
	{name: "hub namespace default", rule: "hub-namespace", stack: "gke", edit: func(v map[string]any) { setIn(v, "hub", "namespace", "default") },
		key: "hub.namespace", value: "default", says: "other than default"},
	{name: "hub namespace with a dot", rule: "hub-namespace", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "namespace", "railgrid.system") },
		key: "hub.namespace", value: "railgrid.system", says: "RFC 1123 label"},
	{name: "hub namespace of 64 characters", rule: "hub-namespace", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "namespace", strings.Repeat("n", 64)) },
		key: "hub.namespace", value: strings.Repeat("n", 64), says: "must be no more than 63 characters"},
	{name: "hub secret name", rule: "hub-secret-name", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "secretName", "") },
		key: "hub.secretName", value: "", says: "Secret name"},
	{name: "hub secret name with an underscore", rule: "hub-secret-name", stack: "gke", edit: func(v map[string]any) { setIn(v, "hub", "secretName", "railgrid_kcp") },
		key: "hub.secretName", value: "railgrid_kcp", says: "RFC 1123 subdomain"},
	{name: "hub key", rule: "hub-secret-key", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "secretKey", "kubeconfig") },
		key: "hub.secretKey", value: "kubeconfig", says: "admin.kubeconfig"},
	{name: "hub validity", rule: "hub-validity", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "kubeconfigValidity", "365d") },
		key: "hub.kubeconfigValidity", value: "365d", says: "duration"},
	{name: "remint generation negative", rule: "remint-generation", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "remintGeneration", -1) },
		key: "hub.remintGeneration", value: "-1", says: "0 or more"},
	{name: "kind context empty", rule: "kind-context", stack: "kind", edit: func(v map[string]any) { setIn(v, "kind", "context", "") },
		key: "kind.context", value: "", says: "kubeconfig context"},
	{name: "kind kubeconfig missing", rule: "kind-kubeconfig", stack: "kind", edit: func(v map[string]any) { setIn(v, "kind", "kubeconfig", "/nonexistent/kubeconfig") },
		key: "kind.kubeconfig", value: "/nonexistent/kubeconfig", says: "a kubeconfig file that exists"},
	{name: "kind node port zero", rule: "kind-node-port", stack: "kind", edit: func(v map[string]any) { setIn(v, "kind", "gatewayNodePort", 0) },
		key: "kind.gatewayNodePort", value: "0", says: "between 30000 and 32767"},
	{name: "issuer ClusterIP for an issuer at an address", rule: "issuer-cluster-ip-host", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "issuerURL", "https://10.96.0.110/dex") },
		key: "kind.issuerClusterIP", value: "10.96.0.110", says: `the issuer's host "10.96.0.110" (oidc.issuerURL) is an IP address`},
	{name: "issuer ClusterIP for an issuer on a shard's hostname", rule: "issuer-cluster-ip-host", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "oidc", "issuerURL", "https://alpha.kcp.localhost:5556/dex")
	},
		key: "kind.issuerClusterIP", value: "10.96.0.110", says: "is kcp.shards[0].hostname too"},
	{name: "issuer ClusterIP for an issuer on the front proxy's hostname", rule: "issuer-cluster-ip-host", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "issuerURL", "https://kcp.localhost/dex") },
		key: "kind.issuerClusterIP", value: "10.96.0.110", says: "is kcp.frontProxy.hostname too"},
	{name: "issuer ClusterIP for an issuer host with an underscore", rule: "issuer-cluster-ip-host", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "issuerURL", "https://dex_1.kcp.localhost") },
		key: "kind.issuerClusterIP", value: "10.96.0.110", says: "lower-case RFC 1123 subdomain"},
	{name: "issuer ClusterIP on gke", rule: "issuer-cluster-ip-gke", stack: "gke", edit: func(v map[string]any) { setIn(v, "kind", "issuerClusterIP", "34.118.224.110") },
		key: "kind.issuerClusterIP", value: "34.118.224.110", says: "on GKE the issuer is public"},
	{name: "gke project", rule: "gke-project", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "project", "Railgrid") },
		key: "gke.project", value: "Railgrid", says: "project ID"},
	{name: "gke location a zone", rule: "gke-location", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "location", "europe-west1-b") },
		key: "gke.location", value: "europe-west1-b", says: "regional cluster"},
	{name: "gke cluster empty", rule: "gke-cluster", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "cluster", "") },
		key: "gke.cluster", value: "", says: "existing GKE cluster"},
	{name: "gke zone of another region", rule: "gke-zone", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "zones[2]", "us-east1-b") },
		key: "gke.zones[2]", value: "us-east1-b", says: "zone of europe-west1"},
	{name: "gke zone twice", rule: "gke-zone-distinct", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "zones[2]", "europe-west1-b") },
		key: "gke.zones[2]", value: "europe-west1-b", says: "distinct"},
	{name: "gke machine type empty", rule: "machine-type", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "nodePools.kcp.machineType", "") },
		key: "gke.nodePools.kcp.machineType", value: "", says: "machine type"},
	{name: "gke pool min negative", rule: "pool-min", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "nodePools.kcp.minPerZone", -1) },
		key: "gke.nodePools.kcp.minPerZone", value: "-1", says: "0 or more"},
	{name: "gke etcd pool size", rule: "pool-max", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "nodePools.etcd.maxPerZone", 0) },
		key: "gke.nodePools.etcd.maxPerZone", value: "0", says: "at least 1"},
	{name: "gke disk size zero", rule: "disk-size", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "nodePools.etcd.diskSizeGb", 0) },
		key: "gke.nodePools.etcd.diskSizeGb", value: "0", says: "at least 10"},
	{name: "gke snapshot schedule", rule: "cron", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.schedule", "hourly") },
		key: "gke.snapshots.schedule", value: "hourly", says: "cron"},
	{name: "gke schedule minute out of range", rule: "cron", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.schedule", "99 * * * *") },
		key: "gke.snapshots.schedule", value: "99 * * * *", says: "above maximum (59)"},
	{name: "gke schedule Sunday as 7", rule: "cron", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.drillSchedule", "30 3 * * 7") },
		key: "gke.snapshots.drillSchedule", value: "30 3 * * 7", says: "above maximum (6)"},
	{name: "gke schedule with seconds", rule: "cron", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.schedule", "0 0 * * * *") },
		key: "gke.snapshots.schedule", value: "0 0 * * * *", says: "expected exactly 5 fields"},
	{name: "gke schedule empty", rule: "cron", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.schedule", "") },
		key: "gke.snapshots.schedule", value: "", says: "empty spec string"},
	{name: "gke schedule at reboot", rule: "cron", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.schedule", "@reboot") },
		key: "gke.snapshots.schedule", value: "@reboot", says: "unrecognized descriptor"},
	{name: "gke schedule with CRON_TZ", rule: "cron", stack: "gke", edit: func(v map[string]any) {
		setIn(v, "gke", "snapshots.drillSchedule", "CRON_TZ=Europe/Brussels 30 3 * * *")
	},
		key: "gke.snapshots.drillSchedule", value: "CRON_TZ=Europe/Brussels 30 3 * * *", says: "spec.timeZone"},
	{name: "gke schedule with TZ", rule: "cron", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.schedule", "TZ=UTC 0 * * * *") },
		key: "gke.snapshots.schedule", value: "TZ=UTC 0 * * * *", says: "spec.timeZone"},
	{name: "gke schedule on 30 February", rule: "cron", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.drillSchedule", "0 3 30 2 *") },
		key: "gke.snapshots.drillSchedule", value: "0 3 30 2 *", says: "would never run"},
	{name: "gke retention zero", rule: "retention", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.retentionDays", 0) },
		key: "gke.snapshots.retentionDays", value: "0", says: "between 1 and 3650"},
	{name: "gke gcloud tag empty", rule: "gcloud-tag", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.gcloudImageTag", "") },
		key: "gke.snapshots.gcloudImageTag", value: "", says: "google-cloud-cli"},
	{name: "gke dns ttl zero", rule: "dns-ttl", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "dns.ttl", 0) },
		key: "gke.dns.ttl", value: "0", says: "between 1 and 300"},
	{name: "gke dns ttl an hour", rule: "dns-ttl", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "dns.ttl", 3600) },
		key: "gke.dns.ttl", value: "3600", says: "between 1 and 300"},
	{name: "gke response policy", rule: "response-policy", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "dns.existingResponsePolicy", "Shared_Policy") },
		key: "gke.dns.existingResponsePolicy", value: "Shared_Policy", says: "response policy"},
	{name: "gke gateway class empty", rule: "gateway-class", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "gateway.className", "") },
		key: "gke.gateway.className", value: "", says: "GatewayClass"},
	{name: "gke gateway class with an underscore", rule: "gateway-class", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "gateway.className", "gke_l7") },
		key: "gke.gateway.className", value: "gke_l7", says: "RFC 1123 subdomain"},
	{name: "retired shard not a name", rule: "retired-shard-name", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "retiredShards", []any{"Beta"}) },
		key: "kcp.retiredShards[0]", value: "Beta", says: "name the shard had"},
	{name: "retired shard starting with a digit", rule: "retired-shard-name", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "retiredShards", []any{"2beta"}) },
		key: "kcp.retiredShards[0]", value: "2beta", says: "start with an alphabetic character"},
	{name: "retired shard twice", rule: "retired-shard-name", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "retiredShards", []any{"beta", "beta"}) },
		key: "kcp.retiredShards[1]", value: "beta", says: "listed twice"},
	{name: "root shard retired", rule: "retired-root", stack: "gke", edit: func(v map[string]any) { setIn(v, "kcp", "retiredShards", []any{"root"}) },
		key: "kcp.retiredShards[0]", value: "root", says: "root shard cannot be removed"},
	{name: "retired shard still running", rule: "retired-active", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "retiredShards", []any{"alpha"}) },
		key: "kcp.retiredShards[0]", value: "alpha", says: "either running or retired"},
	{name: "shard removed without retiring it", rule: "shard-vanished", stack: "kind", previous: ranWithBeta,
		edit: func(map[string]any) {}, key: "kcp.shards", value: "beta", says: "list it in kcp.retiredShards"},
	{name: "shard renamed in place", rule: "shard-vanished", stack: "kind", previous: ranWithBeta,
		edit: func(v map[string]any) { addShard(v, "gamma", "beta.kcp.localhost", "10.96.0.103") },
		key:  "kcp.shards", value: "beta", says: "a rename is a retire plus an add"},
	{name: "shard hostname moved", rule: "shard-moved", stack: "kind", previous: ranWithBeta,
		edit: func(v map[string]any) { addShard(v, "beta", "b.kcp.localhost", "10.96.0.103") },
		key:  "kcp.shards[1].hostname", value: "b.kcp.localhost", says: "was beta.kcp.localhost at the last up"},
	{name: "shard ClusterIP moved", rule: "shard-moved", stack: "kind", previous: ranWithBeta,
		edit: func(v map[string]any) { addShard(v, "beta", "beta.kcp.localhost", "10.96.0.104") },
		key:  "kcp.shards[1].clusterIP", value: "10.96.0.104", says: "cannot change in place"},
	{name: "root shard ClusterIP moved", rule: "shard-moved", stack: "kind", previous: ranWithBeta,
		edit: func(v map[string]any) {
			setIn(v, "kcp", "rootShard.clusterIP", "10.96.0.111")
			addShard(v, "beta", "beta.kcp.localhost", "10.96.0.103")
		},
		key: "kcp.rootShard.clusterIP", value: "10.96.0.111", says: "was 10.96.0.101"},
	{name: "gke gateway certificate", rule: "gateway-certificate", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "gateway.certificateSecret", "kcp-tls") },
		key: "gke.gateway", value: `certificateSecret="kcp-tls" certManagerClusterIssuer="letsencrypt"`, says: "exactly one"},
	{name: "gke cluster issuer with a space", rule: "gateway-certificate", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "gateway.certManagerClusterIssuer", "lets encrypt") },
		key: "gke.gateway.certManagerClusterIssuer", value: "lets encrypt", says: "RFC 1123 subdomain"},
	{name: "gke certificate secret in capitals", rule: "gateway-certificate", stack: "gke", edit: func(v map[string]any) { useCertificateSecret(v, "KCP-TLS") },
		key: "gke.gateway.certificateSecret", value: "KCP-TLS", says: "RFC 1123 subdomain"},
}

// acceptance is a config at the edge of a rule that the rule lets through: a shipped
// stack with one edit.
type acceptance struct {
	name  string
	stack string
	edit  func(v map[string]any)
}

// acceptances hold values next to the refusals above that Kubernetes takes, so the
// config takes them too.
var acceptances = []acceptance{
	{name: "kcp pre-release", stack: "kind", edit: func(v map[string]any) { setIn(v, "versions", "kcp", "v0.34.0-rc.1") }},
	{name: "etcd pre-release", stack: "gke", edit: func(v map[string]any) { setIn(v, "versions", "etcd", "v3.7.0-alpha.0") }},
	{name: "hostname label of 63 characters", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kcp", "rootShard.hostname", strings.Repeat("r", 63)+".kcp.localhost")
	}},
	{name: "hostname labels starting with digits", stack: "gke", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].hostname", "1-alpha.2kcp.example.com") }},
	{name: "hostname top-level label with digits", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "frontProxy.hostname", "kcp.k8s") }},
	{name: "shard name of 30 characters", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].name", strings.Repeat("s", 30)) }},
	{name: "shard name of one letter", stack: "gke", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].name", "a") }},
	{name: "shard name ending in a digit", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "shards[0].name", "alpha-2") }},
	{name: "retired shard of one letter", stack: "kind", edit: func(v map[string]any) { setIn(v, "kcp", "retiredShards", []any{"b"}) }},
	{name: "CA secret name starting with a digit, with dots", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "oidc", "caSecret", map[string]any{"name": "1issuer.ca.v2", "key": "ca.crt"})
	}},
	{name: "CA secret key with capitals and underscores", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "oidc", "caSecret", map[string]any{"name": "issuer-ca", "key": "CA_Bundle-1.pem"})
	}},
	{name: "CA secret key a dot file", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "oidc", "caSecret", map[string]any{"name": "issuer-ca", "key": ".ca.crt"})
	}},
	{name: "OIDC CA chain of a root and an intermediate", stack: "gke", edit: func(v map[string]any) { setIn(v, "oidc", "caCertificates", issuerCAs.chain) }},
	{name: "OIDC CA with blank lines around it", stack: "kind", edit: func(v map[string]any) { setIn(v, "oidc", "caCertificates", "\n\n"+issuerCAs.root+"\n") }},
	{name: "no issuer ClusterIP on kind", stack: "kind", edit: func(v map[string]any) { delete(v[key("kind")].(map[string]any), "issuerClusterIP") }},
	{name: "issuer ClusterIP with an issuer URL that has a port and a path", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "oidc", "issuerURL", "https://login.railgrid.test:5556/dex")
	}},
	{name: "etcd volume size 1.5Gi", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "volumeSize", "1.5Gi") }},
	{name: "kcp memory equal to its limit, cpu in millicores", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kcp", "resources.memory", "2Gi")
		setIn(v, "kcp", "resources.memoryLimit", "2Gi")
		setIn(v, "kcp", "resources.cpu", "1m")
	}},
	{name: "etcd volume size 2G", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "volumeSize", "2G") }},
	{name: "etcd volume size in exponent form", stack: "gke", edit: func(v map[string]any) { setIn(v, "etcd", "volumeSize", "5e10") }},
	{name: "etcd volume size of one byte", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "volumeSize", "1") }},
	{name: "storage class starting with a digit", stack: "kind", edit: func(v map[string]any) { setIn(v, "etcd", "storageClass", "1-local-path") }},
	{name: "storage class with dots", stack: "gke", edit: func(v map[string]any) { setIn(v, "etcd", "storageClass", "etcd.pd-ssd") }},
	{name: "hub namespace starting with a digit", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "namespace", "1railgrid") }},
	{name: "hub namespace of 63 characters", stack: "gke", edit: func(v map[string]any) { setIn(v, "hub", "namespace", strings.Repeat("n", 63)) }},
	{name: "hub secret name with dots", stack: "kind", edit: func(v map[string]any) { setIn(v, "hub", "secretName", "railgrid.kcp.1") }},
	{name: "schedule @hourly", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.schedule", "@hourly") }},
	{name: "schedule @every 6h", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.schedule", "@every 6h") }},
	{name: "schedule with day and month names", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.drillSchedule", "30 3 ? JAN-DEC MON-FRI") }},
	{name: "schedule on 29 February", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.drillSchedule", "0 3 29 2 *") }},
	{name: "schedule with steps and lists", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "snapshots.schedule", "*/15 0-6,18-23 * * *") }},
	{name: "gateway class with dots", stack: "gke", edit: func(v map[string]any) { setIn(v, "gke", "gateway.className", "gke-l7.example.com") }},
	{name: "certificate secret with dots", stack: "gke", edit: func(v map[string]any) { useCertificateSecret(v, "kcp.tls") }},
	{name: "chart repositories on an OCI mirror, with a port", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "operator", "chartRepository", "oci://registry.mirror.example.com:5000/kcp-dev")
		setIn(v, "kind", "certManagerChart.repository", "oci://registry.mirror.example.com:5000/jetstack/")
		setIn(v, "kind", "envoyGatewayChart.repository", "oci://registry.mirror.example.com:5000/envoyproxy")
	}},
	{name: "Envoy Gateway chart from an https mirror", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kind", "envoyGatewayChart.repository", "https://charts.mirror.example.com/envoyproxy")
	}},
	{name: "chart settings of an add-on left at their defaults while it is present", stack: "kind", edit: func(v map[string]any) {
		setIn(v, "kind", "certManagerPresent", true)
		setIn(v, "kind", "certManagerChart", map[string]any{})
	}},
}

// Each acceptance passes validation and declares the stack.
func TestConfigAtTheEdgeOfARuleIsAccepted(t *testing.T) {
	for _, tc := range acceptances {
		t.Run(tc.name, func(t *testing.T) {
			values := stackValues(t, tc.stack)
			tc.edit(values)
			rec, err := runValues(t, tc.stack, values, mockstack.Options{})
			require.NoError(t, err)
			require.NotEmpty(t, rec.Resources)
		})
	}
}

// longName is a DNS name of labels labels of 63 characters each.
func longName(labels int) string {
	parts := make([]string, labels)
	for i := range parts {
		parts[i] = strings.Repeat(string(rune('a'+i)), 63)
	}
	return strings.Join(parts, ".")
}

// useCertificateSecret makes the gke stack's listeners take their certificate from a
// Secret instead of cert-manager.
func useCertificateSecret(values map[string]any, name string) {
	setIn(values, "gke", "gateway.certificateSecret", name)
	delete(values[key("gke")].(map[string]any)["gateway"].(map[string]any), "certManagerClusterIssuer")
}

// Each refusal is refused before any resource is declared, with an error that names
// its rule, key and value.
func TestBadConfigIsRefusedNamingKeyValueAndRule(t *testing.T) {
	for _, tc := range refusals {
		t.Run(tc.rule+"/"+tc.name, func(t *testing.T) {
			values := stackValues(t, tc.stack)
			tc.edit(values)
			requireRefused(t, tc.stack, values, mockstack.Options{GKEServiceCIDR: tc.gkeRange, Previous: tc.previous}, tc.rule, tc.key, tc.value, tc.says)
		})
	}
}

// Every rule has a refusal above, and every refusal names a rule that exists: a rule
// added without a refusal test fails here.
func TestEveryRuleHasARefusalTest(t *testing.T) {
	rules := config.Rules()
	require.NotEmpty(t, rules)
	tested := map[string]int{}
	for _, tc := range refusals {
		tested[tc.rule]++
	}
	known := map[string]bool{}
	for _, r := range rules {
		require.False(t, known[r.ID], "rule %s is registered twice", r.ID)
		known[r.ID] = true
		require.NotEmpty(t, r.Keys, r.ID)
		require.NotEmpty(t, r.Refuses, r.ID)
		require.Positive(t, tested[r.ID], "rule %s (%s) has no refusal in tests/config_test.go", r.ID, r.Refuses)
	}
	for id := range tested {
		require.True(t, known[id], "a refusal names rule %s, which config.Rules does not have", id)
	}
}

// addShard appends a shard to the kcp section.
func addShard(values map[string]any, name, hostname, clusterIP string) {
	kcp := values[key("kcp")].(map[string]any)
	kcp["shards"] = append(kcp["shards"].([]any), map[string]any{"name": name, "hostname": hostname, "clusterIP": clusterIP, "replicas": 1})
}

func setIn(values map[string]any, top, path string, value any) {
	node, ok := values[key(top)].(map[string]any)
	if !ok {
		node = map[string]any{}
		values[key(top)] = node
	}
	setPath(node, splitPath(path), value)
}

func setPath(node any, parts []string, value any) {
	switch n := node.(type) {
	case map[string]any:
		if len(parts) == 1 {
			n[parts[0]] = value
			return
		}
		next, ok := n[parts[0]]
		if !ok {
			next = map[string]any{}
			n[parts[0]] = next
		}
		setPath(next, parts[1:], value)
	case []any:
		var idx int
		for _, c := range parts[0] {
			idx = idx*10 + int(c-'0')
		}
		if len(parts) == 1 {
			n[idx] = value
			return
		}
		setPath(n[idx], parts[1:], value)
	}
}

// All problems are reported together, a type error and an unknown key included, each at
// its own key path.
func TestEveryProblemIsReportedAtOnce(t *testing.T) {
	values := stackValues(t, "kind")
	setIn(values, "versions", "kcp", "latest")
	setIn(values, "etcd", "members", "three")
	setIn(values, "oidc", "usernamePrefix", "")
	setIn(values, "kcp", "rootShard.replicas", 0)
	values[key("etdc")] = map[string]any{"members": 1}
	rec, err := runValues(t, "kind", values, mockstack.Options{})
	var invalid config.Errors
	require.ErrorAs(t, err, &invalid)
	got := map[string]string{}
	for _, fe := range invalid {
		got[fe.Key] = fe.RuleID
		require.Contains(t, err.Error(), fmt.Sprintf("%s:%s = %q: %s", config.Project, fe.Key, fe.Value, fe.Rule), "one message style")
	}
	require.Equal(t, map[string]string{
		"versions.kcp":           "pinned-version",
		"etcd.members":           "type",
		"oidc.usernamePrefix":    "oidc-fixed",
		"kcp.rootShard.replicas": "replicas",
		"etdc":                   "unknown-key",
	}, got, "%v", err)
	require.Empty(t, rec.Resources)
}

// The plan tool reads a stack file through the same check: a misspelled top-level key
// is refused, not ignored.
func TestUnknownTopLevelKeyIsRefusedInAStackFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "Pulumi.kind.yaml")
	data, err := os.ReadFile(stackFile("kind"))
	require.NoError(t, err)
	var doc map[string]map[string]any
	require.NoError(t, yaml.Unmarshal(data, &doc))
	doc["config"][key("etdc")] = map[string]any{"members": 3}
	out, err := yaml.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, out, 0o600))
	_, err = config.ParseStackFile(path)
	var invalid config.Errors
	require.ErrorAs(t, err, &invalid)
	require.Len(t, invalid, 1, "%v", err)
	require.Equal(t, "etdc", invalid[0].Key)
	require.Equal(t, "unknown-key", invalid[0].RuleID)
	require.Contains(t, invalid[0].Rule, "is not a railgrid-kcp config key")
}

// A value the stack gives is kept, zero and false included, where it makes sense: it is
// never replaced by the default (each default below differs from the value given).
func TestExplicitZeroIsKeptNotDefaulted(t *testing.T) {
	values := stackValues(t, "gke")
	setIn(values, "gke", "nodePools.kcp.minPerZone", 0)
	setIn(values, "hub", "remintGeneration", 0)
	rec, err := runValues(t, "gke", values, mockstack.Options{})
	require.NoError(t, err)
	require.NotEmpty(t, rec.Resources)
	cfg, err := config.FromValues(encode(t, values))
	require.NoError(t, err)
	require.NotEqual(t, 0, config.DefaultKcpPoolMinPerZone)
	require.Equal(t, 0, cfg.GKE.NodePools.Kcp.MinPerZone)
	require.Equal(t, 0, cfg.Hub.RemintGeneration)

	kind := stackValues(t, "kind")
	setIn(kind, "kind", "gatewayNodePort", 30444)
	setIn(kind, "kind", "certManagerPresent", false)
	cfg, err = config.FromValues(encode(t, kind))
	require.NoError(t, err)
	require.Equal(t, 30444, cfg.Kind.GatewayNodePort)
	require.False(t, cfg.Kind.CertManagerPresent)
}

// A kind cluster with nodes in three zones may run three etcd members per shard.
func TestKindNodeZonesAllowMoreMembers(t *testing.T) {
	values := stackValues(t, "kind")
	setIn(values, "etcd", "members", 3)
	setIn(values, "kind", "nodeZones", 3)
	cfg, err := config.FromValues(encode(t, values))
	require.NoError(t, err)
	require.Equal(t, 3, cfg.Etcd.Members)
}

// encode turns stackValues trees into the strings the engine passes.
func encode(t *testing.T, values map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range values {
		if s, ok := v.(string); ok {
			out[k] = s
			continue
		}
		b, err := json.Marshal(v)
		require.NoError(t, err)
		out[k] = string(b)
	}
	return out
}

// Defaults documented in Pulumi.yaml are the defaults the program applies.
func TestPulumiYAMLDocumentsTheProgramDefaults(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "Pulumi.yaml"))
	require.NoError(t, err)
	var project struct {
		Name   string `yaml:"name"`
		Config map[string]struct {
			Type        string         `yaml:"type"`
			Description string         `yaml:"description"`
			Default     map[string]any `yaml:"default"`
		} `yaml:"config"`
	}
	require.NoError(t, yaml.Unmarshal(data, &project))
	require.Equal(t, config.Project, project.Name)
	for _, k := range []string{"platform", "versions", "operator", "kcp", "oidc", "etcd", "network", "loadBalancer", "hub"} {
		decl, ok := project.Config[k]
		require.True(t, ok, "Pulumi.yaml does not declare %s", k)
		require.NotEmpty(t, decl.Type, k)
		require.NotEmpty(t, decl.Description, k)
	}
	cfg := shippedConfig(t, "kind")
	v := project.Config["versions"].Default
	require.Equal(t, config.DefaultKcpVersion, v["kcp"])
	require.Equal(t, config.DefaultOperatorChartVersion, v["operatorChart"])
	require.Equal(t, config.DefaultOperatorImageTag, v["operatorImage"])
	require.Equal(t, config.DefaultEtcdVersion, v["etcd"])
	require.Equal(t, config.DefaultCertManagerVersion, v["certManager"])
	require.Equal(t, config.DefaultEnvoyGatewayVersion, v["envoyGateway"])
	require.Equal(t, cfg.LoadBalancer.Timeout, project.Config["loadBalancer"].Default["timeout"])
	hub := project.Config["hub"].Default
	require.Equal(t, cfg.Hub.Namespace, hub["namespace"])
	require.Equal(t, cfg.Hub.SecretName, hub["secretName"])
	require.Equal(t, cfg.Hub.SecretKey, hub["secretKey"])
	require.Equal(t, cfg.Hub.KubeconfigValidity, hub["kubeconfigValidity"])
	require.Equal(t, config.OperatorChartRepository, project.Config["operator"].Default["chartRepository"])
}

// Every key Pulumi.yaml declares without a default is set by both stacks: the CLI
// refuses a stack that lacks one. The other platform's empty default is accepted.
func TestEveryRequiredProjectKeyIsSetByBothStacks(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "Pulumi.yaml"))
	require.NoError(t, err)
	var project struct {
		Config map[string]map[string]any `yaml:"config"`
	}
	require.NoError(t, yaml.Unmarshal(data, &project))
	for _, stack := range []string{"kind", "gke"} {
		values := stackValues(t, stack)
		for k, decl := range project.Config {
			if _, hasDefault := decl["default"]; hasDefault {
				if _, set := values[key(k)]; !set {
					values[key(k)] = decl["default"]
				}
				continue
			}
			_, set := values[key(k)]
			require.True(t, set, "stack %s does not set %s, which Pulumi.yaml declares without a default", stack, k)
		}
		_, err := runValues(t, stack, values, mockstack.Options{})
		require.NoError(t, err, "stack %s with Pulumi.yaml's defaults filled in", stack)
	}
}

// The shipped stacks have the shapes the design document describes; each value checked
// here is set by the stack file or the Pulumi.yaml default, not by the program.
func TestShippedStacksHaveTheDesignedShape(t *testing.T) {
	kind, gke := shippedConfig(t, "kind"), shippedConfig(t, "gke")
	require.Equal(t, 1, kind.Etcd.Members, "kind: one member on its one node")
	require.Equal(t, 1, kind.Kind.NodeZones, "kind/cluster.yaml has one node")
	require.Equal(t, 3, gke.Etcd.Members)
	require.Equal(t, []string{"europe-west1-b", "europe-west1-c", "europe-west1-d"}, gke.GKE.Zones)
	for _, cfg := range []*config.Config{kind, gke} {
		require.Len(t, cfg.Kcp.Shards, 1)
		require.Equal(t, "alpha", cfg.Kcp.Shards[0].Name)
		require.Equal(t, "v0.33.0", cfg.Versions.Kcp)
		require.Equal(t, "1h0m0s", cfg.LoadBalancerTimeout().String())
		require.Equal(t, "8766h0m0s", cfg.KubeconfigValidity().String())
	}
}

// kind/cluster.yaml, which the kind stack documents, has the one node that the kind
// stack's default kind.nodeZones assumes.
func TestKindClusterHasTheNodesTheKindStackAssumes(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "kind", "cluster.yaml"))
	require.NoError(t, err)
	var cluster struct {
		Nodes []map[string]any `yaml:"nodes"`
	}
	require.NoError(t, yaml.Unmarshal(data, &cluster))
	require.Len(t, cluster.Nodes, config.DefaultKindNodeZones)
	require.GreaterOrEqual(t, config.DefaultKindNodeZones, shippedConfig(t, "kind").Etcd.Members)
}
