//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

// sources are what every cluster of the test reads: the repository, the upstream CRDs,
// the upstream sources (the operator's chart and RBAC) and the real node's images.
type sources struct {
	root, crds, thirdparty string
	images                 *nodeImageSet
}

// nodeImageSet writes the real node's images once, for the first cluster that needs them.
type nodeImageSet struct {
	once     sync.Once
	dir      string
	tarballs []string
}

func (s *nodeImageSet) get(t *testing.T, bins binaries, p rendered) []string {
	s.once.Do(func() { s.tarballs = buildNodeImages(t, bins, s.dir, p) })
	if len(s.tarballs) == 0 {
		t.Fatal("the real node's images could not be written (see the first cluster's log)")
	}
	return s.tarballs
}

// env is one cluster with the stack, the volume binder and, on the second machine,
// cert-manager's controller and the test's request approver.
type env struct {
	c        *cluster
	stack    *e2eStack
	plan     rendered
	ctl      *controllers // nil unless envOptions.externalApprover
	volumes  *volumeBinder
	approver *requestApprover // nil unless envOptions.externalApprover
	// testHost is a network namespace on the pod network whose DNS is the cluster's.
	testHost *testenv.TestHost
	// dex is the hub's Dex (envOptions.signIn), deployed by the sign-in steps.
	dex *hubDex
}

// testHostName is the test host's network namespace: `ip netns exec rgk-e2e-pods ...`
// (on the second machine, rgk-e2e-pods-e2e-b: testenv.MachineScoped).
const testHostName = "rgk-e2e-pods"

// envOptions are what a run changes in its cluster.
type envOptions struct {
	// externalApprover declares cert-manager present (kind.certManagerPresent): the test
	// runs cert-manager's controller as a process without its own approver, and the test's
	// requestApprover in its place, so the run can hold one Certificate's issuance. The
	// stack then installs only the kcp-operator and Envoy Gateway from their charts.
	externalApprover bool
	// signIn: the hub's Dex signs users in (the lifecycle's sign-in steps): its CA goes
	// into the stack file as oidc.caCertificates.
	signIn bool
}

func newEnv(t *testing.T, ctx context.Context, bins binaries, src sources, opts envOptions) *env {
	t.Helper()
	base := t.TempDir()
	if os.Getenv(envKeep) == "1" {
		var err error
		if base, err = os.MkdirTemp("", "railgrid-e2e-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s=1: keeping the cluster, its logs, the workspace and the state in %s", envKeep, base)
	}
	root, crds := src.root, src.crds
	testenv.RecordRunDir(base)
	// The program compiles while the cluster starts.
	workspace := filepath.Join(base, "workspace")
	compiled := copyProgram(t, ctx, root, workspace)
	overlay := stackOverlay{
		mirrors:            serveCharts(t, ctx, bins, src, filepath.Join(base, "charts")),
		certManagerPresent: opts.externalApprover,
	}
	var dex *hubDex
	if opts.signIn {
		shipped, err := config.ParseStackFile(filepath.Join(root, "Pulumi.kind.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if dex, err = newHubDex(shipped.OIDC.IssuerURL, shipped.OIDC.ClientID); err != nil {
			t.Fatal(err)
		}
		overlay.oidcCA = string(dex.ca.PEM)
	}
	if err := os.MkdirAll(filepath.Join(base, "cluster"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The stack file first: the cluster's Service range comes from its config.
	pre := &e2eStack{t: t, cfgFile: filepath.Join(base, "probe.yaml")}
	if err := writeStackConfig(filepath.Join(root, "Pulumi.kind.yaml"), pre.cfgFile, overlay); err != nil {
		t.Fatal(err)
	}
	p := pre.render()
	c := startCluster(t, ctx, bins, filepath.Join(base, "cluster"), p.cfg, src.images.get(t, bins, p))
	prepareCluster(t, ctx, c, crds, opts.externalApprover)
	e := &env{c: c, plan: p, dex: dex}
	e.volumes = startVolumeBinder(t, ctx, c)
	if opts.externalApprover {
		e.approver = startRequestApprover(t, ctx, c)
		e.ctl = startControllers(t, ctx, c, bins, filepath.Join(base, "cluster"), true)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv(envVerbose) == "1" {
			logAddOnPods(t, c)
		}
	})
	e.stack = newStack(t, ctx, root, base, workspace, c, bins, overlay)
	// A host on the pod network, with the cluster's DNS: what a pod resolves and
	// reaches, the test's own clients resolve and reach from there.
	e.testHost = c.network.AddTestHost(t, testenv.TestHostOptions{
		Name: testHostName, ResolvConf: testenv.ClusterResolvConf(clusterDNSIP(t, c), "default"),
	})
	if err := c.network.Check(c.apiPort, c.node.KubeletPort); err != nil {
		t.Fatalf("with the test's host on the pod network: %v", err)
	}
	if err := compiled(); err != nil {
		t.Fatal(err)
	}
	return e
}

// serveCharts serves the three charts the kind stack installs, at the versions the
// shipped stack file pins, on loopback as an offline machine's mirrors
// (testenv.ServeKindCharts; tests/charts checks these mirrors with the Helm CLI). They
// stop when the run ends.
func serveCharts(t *testing.T, ctx context.Context, bins binaries, src sources, dir string) testenv.KindChartMirrors {
	t.Helper()
	start := time.Now()
	shipped, err := config.ParseStackFile(filepath.Join(src.root, "Pulumi.kind.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	v := shipped.Versions
	publisher := testenv.Helm{Bin: bins.helm, Home: filepath.Join(dir, "helm")}
	m := testenv.ServeKindCharts(t, ctx, publisher, dir, src.crds, src.thirdparty, v.CertManager, v.EnvoyGateway)
	t.Logf("chart mirrors on loopback in %s: cert-manager %s and the kcp-operator at %s, Envoy Gateway %s at %s",
		time.Since(start).Round(time.Millisecond), v.CertManager, m.Repository.URL, v.EnvoyGateway, m.Registry.Repository)
	return m
}

// requireAddOnsBuiltAtPinnedVersions fails unless cert-manager's binaries and Envoy
// Gateway's control plane, which the add-ons' images hold, were built from the module
// versions the kind stack installs (versions.certManager, versions.envoyGateway), as
// their build information records them, so the test proves the program against the
// add-ons a kind cluster gets.
func requireAddOnsBuiltAtPinnedVersions(t *testing.T, ctx context.Context, root string, bins binaries) {
	t.Helper()
	cfg, err := config.ParseStackFile(filepath.Join(root, "Pulumi.kind.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	check := func(bin, module, pinned, key string) {
		built, err := builtModuleVersion(ctx, bin, module)
		if err != nil {
			t.Fatal(err)
		}
		if built != pinned {
			t.Fatalf("the kind stack installs %s %s (%s) but the test runs %s, built from %s", module, pinned, key, bin, built)
		}
	}
	for _, c := range testenv.CertManagerComponents {
		check(bins.certManagerImages[c], testenv.CertManagerModule, cfg.Versions.CertManager, "versions.certManager")
	}
	check(bins.envoyGateway, testenv.EnvoyGatewayModule, cfg.Versions.EnvoyGateway, "versions.envoyGateway")
}
