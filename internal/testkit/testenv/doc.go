// Package testenv is what the tests that run real servers share (tests/conformance,
// tests/e2e, tests/node, tests/snapshots, tests/signin, tests/charts,
// tests/providerprobe, tests/kcpadmin, tests/langhost): an etcd and a kube-apiserver
// with their certificates (StartAPIServer), servers run as processes in their own
// process groups with their logs (StartProcess, LaunchProcess, WaitFor), the lookup of
// the executables (Executables), the repository root and the ../shared directories next
// to it (RepoRoot, CRDsDir, ThirdpartyDir), the skip rules (SkipIfShortOrDisabled), the
// upstream CRDs (LoadCRDs, WaitEstablished), the add-ons' charts built from their
// upstream sources (CertManagerChart, EnvoyGatewayChart, OperatorChart) with the chart
// mirrors that serve them over https on loopback (ServeChartRepository,
// ServeChartRegistry; the Helm CLI through Helm), Dex as the hub's identity provider
// (DexConfig, StartDex, DexAt, and its password grant and tokens: PasswordGrant,
// VerifiedClaims), the real node (StartNode, SetUpNodeNetwork, AddTestHost) and the
// images it runs (WriteImages, GcloudImage), fake-gcs-server (StartGCSEmulator), and a
// long test's context and hold (RunContext, Hold). Its certificates come from
// internal/testkit/pki. The list of its files, each with what it holds, is
// internal/testkit's package documentation (internal/testkit/doc.go).
//
// tests/conformance and tests/e2e each had their own copy of all this, and the copies
// had drifted; one package keeps them the same. It is a normal package so that test
// packages can import it; tests/testkit_test.go keeps the program from importing it.
// Nothing in it reads ../shared unless a test asks it to.
package testenv
