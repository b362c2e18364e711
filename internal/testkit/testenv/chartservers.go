package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
)

// Chart mirrors on loopback, as an air-gapped cluster's users run them (the chart
// sources of the configuration: operator.chartRepository, kind.certManagerChart,
// kind.envoyGatewayChart). Both speak the real protocols over https with a serving
// certificate from a test's CA, for 127.0.0.1 only, and the charts in them are put there
// by the real Helm CLI: a Helm repository (index.yaml and the packaged charts, the files
// `helm repo index` describes) and an OCI registry (go-containerregistry's registry, the
// charts pushed with `helm push`). Both stop when the test ends.

// ChartRepository is a Helm chart repository served over https on loopback.
type ChartRepository struct {
	// URL is the repository, https://127.0.0.1:<port>, as a chart source's repository.
	URL string
	// CAFile holds the CA of its serving certificate (PEM): a chart source's caFile, or
	// helm's --ca-file.
	CAFile string
}

// Source is the repository as a chart source of the configuration, with its CA file.
func (r *ChartRepository) Source() config.ChartSource {
	return config.ChartSource{Repository: r.URL, CAFile: r.CAFile}
}

// ServeChartRepository packages each chart directory with helm, indexes them with
// `helm repo index --url` and serves index.yaml and the archives over https on
// 127.0.0.1, with a certificate issued by ca.
func ServeChartRepository(t *testing.T, ctx context.Context, helm Helm, ca *pki.CA, charts ...string) *ChartRepository {
	t.Helper()
	dir := t.TempDir()
	served := filepath.Join(dir, "repository")
	if err := os.Mkdir(served, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, chart := range charts {
		if _, err := helm.Package(ctx, chart, served); err != nil {
			t.Fatalf("packaging a chart for the Helm repository: %v", err)
		}
	}
	logger := log.New(&SyncBuffer{}, "", log.Ltime)
	files := http.FileServer(http.Dir(served))
	host := serveTLS(t, "chart repository", ca, logger, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		logger.Printf("%s %s", req.Method, req.URL)
		files.ServeHTTP(w, req)
	}))
	r := &ChartRepository{URL: "https://" + host, CAFile: ca.CAFile(t, dir)}
	// The index lists each archive at its URL on this server, so it is written once the
	// port is known; nothing asks for it before this function returns.
	if _, err := helm.Run(ctx, "repo", "index", served, "--url", r.URL); err != nil {
		t.Fatalf("indexing the Helm repository: %v", err)
	}
	return r
}

// ChartRegistry is an OCI registry served over https on loopback.
type ChartRegistry struct {
	// Repository is where the charts are, oci://127.0.0.1:<port>/charts: chart <name> is
	// <Repository>/<name>, tagged with its version.
	Repository string
	// CAFile holds the CA of its serving certificate (PEM). The configuration takes no CA
	// file for an oci:// source: the machine that runs pulumi must trust it
	// (SSL_CERT_FILE=CAFile, which replaces the system's roots for that process); helm
	// takes it as --ca-file.
	CAFile string
}

// Source is the registry as a chart source of the configuration (no CA file: see
// CAFile).
func (r *ChartRegistry) Source() config.ChartSource {
	return config.ChartSource{Repository: r.Repository}
}

// chartRegistryPath is the path of the registry's charts: the upstream Envoy Gateway
// chart is oci://docker.io/envoyproxy/gateway-helm, a mirror's is <host>/charts/gateway-helm.
const chartRegistryPath = "charts"

// ServeChartRegistry serves an OCI registry over https on 127.0.0.1, with a certificate
// issued by ca, and pushes each chart directory into it, packaged, with `helm push`.
func ServeChartRegistry(t *testing.T, ctx context.Context, helm Helm, ca *pki.CA, charts ...string) *ChartRegistry {
	t.Helper()
	dir := t.TempDir()
	logger := log.New(&SyncBuffer{}, "", log.Ltime)
	host := serveTLS(t, "chart registry", ca, logger, registry.New(registry.Logger(logger)))
	r := &ChartRegistry{Repository: config.OCIScheme + host + "/" + chartRegistryPath, CAFile: ca.CAFile(t, dir)}
	for _, chart := range charts {
		archive, err := helm.Package(ctx, chart, dir)
		if err != nil {
			t.Fatalf("packaging a chart for the OCI registry: %v", err)
		}
		if _, err := helm.Run(ctx, "push", archive, r.Repository, "--ca-file", r.CAFile); err != nil {
			t.Fatalf("pushing a chart to the OCI registry: %v", err)
		}
	}
	return r
}

// KindChartMirrors serve the three charts the kind stack installs.
type KindChartMirrors struct {
	// Repository holds cert-manager's chart and the kcp-operator's.
	Repository *ChartRepository
	// Registry holds Envoy Gateway's gateway-helm.
	Registry *ChartRegistry
}

// ServeKindCharts writes the three charts the kind stack installs from their upstream
// sources into dir (cert-manager's and Envoy Gateway's at the versions given, the
// kcp-operator's from the chart and CRDs of crdsDir and thirdpartyDir), and serves them
// on loopback as an offline machine's mirrors, both with a certificate of one new CA:
// cert-manager's and the kcp-operator's from a Helm repository, Envoy Gateway's from an
// OCI registry. helm publishes them.
func ServeKindCharts(t *testing.T, ctx context.Context, helm Helm, dir, crdsDir, thirdpartyDir, certManagerVersion, envoyGatewayVersion string) KindChartMirrors {
	t.Helper()
	operator, err := OperatorChart(dir, crdsDir, thirdpartyDir)
	if err != nil {
		t.Fatalf("generating the kcp-operator chart: %v", err)
	}
	certManager, err := CertManagerChart(ctx, certManagerVersion, dir)
	if err != nil {
		t.Fatalf("writing cert-manager's chart: %v", err)
	}
	envoyGateway, err := EnvoyGatewayChart(ctx, envoyGatewayVersion, dir)
	if err != nil {
		t.Fatalf("writing Envoy Gateway's chart: %v", err)
	}
	ca, err := pki.NewCA("railgrid-kcp-chart-mirrors-ca")
	if err != nil {
		t.Fatal(err)
	}
	return KindChartMirrors{
		Repository: ServeChartRepository(t, ctx, helm, ca, certManager, operator),
		Registry:   ServeChartRegistry(t, ctx, helm, ca, envoyGateway),
	}
}

// serveTLS serves handler over https on a free port of 127.0.0.1 with a certificate for
// 127.0.0.1 issued by ca, until the test ends, and returns the address (host:port).
// logger, which writes to a SyncBuffer, takes the server's errors (failed TLS handshakes)
// beside what the handler logs; the test shows them if it fails.
func serveTLS(t *testing.T, what string, ca *pki.CA, logger *log.Logger, handler http.Handler) string {
	t.Helper()
	serving, err := ca.ServerCert([]string{Loopback}, pki.CommonName(what))
	if err != nil {
		t.Fatalf("issuing the %s's certificate: %v", what, err)
	}
	cert, err := serving.TLS()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(Loopback, "0"))
	if err != nil {
		t.Fatalf("listening for the %s: %v", what, err)
	}
	srv := &http.Server{
		Handler:   handler,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:  logger,
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("the %s stopped: %v", what, err)
		}
		if t.Failed() {
			t.Logf("%s at %s, its log:\n%s", what, l.Addr(), logger.Writer())
		}
	})
	return l.Addr().String()
}
