// Package testenv is what the tests under tests/ that run real servers share: an etcd
// and a kube-apiserver on loopback with their certificates (StartAPIServer), servers
// run as processes in their own process groups with their logs (StartProcess,
// LaunchProcess, WaitFor), the lookup of the executables (Executables), the repository
// root and the ../shared directories next to it (RepoRoot, CRDsDir, ThirdpartyDir), the
// skip rules (SkipIfShortOrDisabled), the upstream CRDs (LoadCRDs, WaitEstablished), and
// the add-ons' charts built from their upstream sources (CertManagerChart,
// EnvoyGatewayChart, OperatorChart) with the chart mirrors that serve them over https on
// loopback (ServeChartRepository, ServeChartRegistry; the Helm CLI through Helm), and
// Dex as the hub's identity provider: its configuration (DexConfig), a Dex process on
// loopback with its own CA (StartDex), its password grant and the claims of the tokens it
// signs (PasswordGrant, VerifiedClaims).
//
// tests/conformance and tests/e2e each had their own copy of all this, and the copies
// had drifted; one package keeps them the same. It is a normal package so that test
// packages can import it, and it lives under tests/internal so that Go refuses to let the
// program import it. Nothing in it reads ../shared unless a test asks it to.
package testenv
