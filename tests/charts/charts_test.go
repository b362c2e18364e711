// Package charts checks the chart mirrors the tests serve (testenv.ServeChartRepository,
// testenv.ServeChartRegistry) with the real Helm CLI: each of the three charts the kind
// stack installs, built from its upstream source at the version the program pins, is
// pulled through its mirror as the stack's Helm release would pull it, trusting the
// test's CA, and no pull gets through without it. The images built here for the
// add-ons' pods must carry the names those charts render (images_test.go).
//
// It runs the Helm CLI (hack/build-tools.sh helm) and reads ../shared/thirdparty and
// ../shared/reference/crds (the kcp-operator chart) and the Go module cache (the
// cert-manager and Envoy Gateway modules, downloaded through the Go module proxy when
// missing). Without helm on PATH it fails, unless RAILGRID_SKIP_CHARTS=1; `go test
// -short` skips it.
package charts

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

const envSkip = "RAILGRID_SKIP_CHARTS"

// mirroredChart is one chart the kind stack installs, where the test serves it, and how
// helm pulls it from there as the stack's release does (components/helmrelease.go).
type mirroredChart struct {
	name, version, appVersion string
	source                    config.ChartSource
	// caFile is the CA of the mirror's server.
	caFile string
}

// pullArgs are the arguments of `helm pull` for the chart, into dest: by name from an
// https repository, by reference (<repository>/<name>) from an oci:// one.
func (c mirroredChart) pullArgs(dest string) []string {
	args := []string{"pull", c.name, "--repo", c.source.Repository}
	if c.source.IsOCI() {
		args = []string{"pull", c.source.OCIReference(c.name)}
	}
	return append(args, "--version", c.version, "--destination", dest)
}

// requireHelm finds the Helm CLI on PATH, or fails the test saying how to get it.
func requireHelm(t *testing.T, test string) string {
	t.Helper()
	var exe testenv.Executables
	bin := exe.Find("helm", "")
	exe.Require(t, test, `Put it on PATH: eval "$(hack/build-tools.sh env helm)"`, envSkip)
	return bin
}

func TestServedChartsArePulledOnlyWithTheTestCA(t *testing.T) {
	testenv.SkipIfShortOrDisabled(t, envSkip, "serves charts over https and pulls them with the Helm CLI")
	helmBin := requireHelm(t, "the chart mirror test")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	start := time.Now()

	root := testenv.RepoRoot(t)
	publisher := testenv.Helm{Bin: helmBin, Home: t.TempDir()}
	mirrors := testenv.ServeKindCharts(t, ctx, publisher, t.TempDir(), testenv.CRDsDir(root), testenv.ThirdpartyDir(root),
		config.DefaultCertManagerVersion, config.DefaultEnvoyGatewayVersion)
	repo, registry := mirrors.Repository, mirrors.Registry
	t.Logf("charts built and served in %s: the Helm repository %s, the OCI registry %s",
		time.Since(start).Round(time.Millisecond), repo.URL, registry.Repository)

	charts := []mirroredChart{
		{config.CertManagerChartName, config.DefaultCertManagerVersion, config.DefaultCertManagerVersion, repo.Source(), repo.CAFile},
		{config.OperatorChartName, config.DefaultOperatorChartVersion, config.DefaultOperatorImageTag, repo.Source(), repo.CAFile},
		{config.EnvoyGatewayChartName, config.DefaultEnvoyGatewayVersion, config.DefaultEnvoyGatewayVersion, registry.Source(), registry.CAFile},
	}
	for _, c := range charts {
		t.Run(c.name, func(t *testing.T) {
			// Each pull with a Helm home of its own: nothing one pull cached serves another.
			t.Run("with the CA file", func(t *testing.T) {
				helm := testenv.Helm{Bin: helmBin, Home: t.TempDir()}
				pullAndCheck(t, ctx, helm, c, "--ca-file", c.caFile)
			})
			if c.source.IsOCI() {
				// How the stack's release gets through: the Kubernetes provider pulls an
				// OCI chart with no CA file, trusting what the machine trusts.
				t.Run("with the CA in SSL_CERT_FILE", func(t *testing.T) {
					helm := testenv.Helm{Bin: helmBin, Home: t.TempDir(), Env: []string{"SSL_CERT_FILE=" + c.caFile}}
					pullAndCheck(t, ctx, helm, c)
				})
			}
			t.Run("without the CA", func(t *testing.T) {
				helm := testenv.Helm{Bin: helmBin, Home: t.TempDir()}
				_, err := helm.Run(ctx, c.pullArgs(t.TempDir())...)
				switch {
				case err == nil:
					t.Errorf("helm pulled %s from %s without the test's CA", c.name, c.source.Repository)
				case !strings.Contains(err.Error(), "certificate signed by unknown authority"):
					t.Errorf("helm failed to pull %s from %s without the test's CA, but not for the unknown authority: %v", c.name, c.source.Repository, err)
				}
			})
		})
	}
	t.Logf("done in %s", time.Since(start).Round(time.Millisecond))
}

// pullAndCheck pulls the chart with helm and extra arguments, and checks that what came
// is the chart at the pinned version.
func pullAndCheck(t *testing.T, ctx context.Context, helm testenv.Helm, c mirroredChart, extra ...string) {
	t.Helper()
	dest := t.TempDir()
	if _, err := helm.Run(ctx, append(c.pullArgs(dest), extra...)...); err != nil {
		t.Fatalf("pulling %s %s from %s: %v", c.name, c.version, c.source.Repository, err)
	}
	archives, err := filepath.Glob(filepath.Join(dest, "*.tgz"))
	if err != nil || len(archives) != 1 {
		t.Fatalf("helm pull wrote %v into %s (%v), want one chart archive", archives, dest, err)
	}
	got, err := testenv.ReadArchiveChartMetadata(archives[0])
	if err != nil {
		t.Fatal(err)
	}
	want := testenv.ChartMetadata{Name: c.name, Version: c.version, AppVersion: c.appVersion}
	if got != want {
		t.Errorf("pulled %s from %s: chart %+v, want %+v", filepath.Base(archives[0]), c.source.Repository, got, want)
	}
}
