package verify_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

const (
	readyz   = "GET https://kcp.example.com/readyz"
	frontAPI = "GET https://kcp.example.com/api"
	rootAPI  = "GET https://kcp-root.example.com/api"
	alphaAPI = "GET https://kcp-alpha.example.com/api"
)

func TestIngressPassesWithKcpAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEdge(t, verifytest.HealthyEdge())
	results := f.run(t, verify.CheckIngress)
	requireAll(t, results, verify.StatusPass)
	if len(results) != 4 {
		t.Fatalf("want readyz, two shards and the front-proxy /api: %s", dump(results))
	}
	requireStatus(t, results, readyz, verify.StatusPass, "200")
	requireStatus(t, results, rootAPI, verify.StatusPass, "403 for system:anonymous")
	requireStatus(t, results, alphaAPI, verify.StatusPass, "403 for system:anonymous")
	requireStatus(t, results, frontAPI, verify.StatusPass, "401")
}

func TestIngressFailsWhenReadyzIsNot200(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := verifytest.HealthyEdge()
	b.ReadyzStatus = http.StatusServiceUnavailable
	f.withEdge(t, b)
	results := f.run(t, verify.CheckIngress)
	requireFail(t, results, readyz, "answered 503, want 200", "body: ok")
	requireOthersPass(t, results, readyz)
}

func TestIngressFailsWhenAShardAnswers401(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := verifytest.HealthyEdge()
	b.ShardAPIStatus = http.StatusUnauthorized
	f.withEdge(t, b)
	results := f.run(t, verify.CheckIngress)
	requireFail(t, results, rootAPI, "answered 401, want 403", `message: forbidden: User "system:anonymous" cannot get path "/api"`)
	requireFail(t, results, alphaAPI, "answered 401, want 403")
	requireOthersPass(t, results, rootAPI, alphaAPI)
}

func TestIngressFailsWhenThe403IsNotForSystemAnonymous(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := verifytest.HealthyEdge()
	b.ShardAPIBody = "Forbidden by the edge's WAF"
	f.withEdge(t, b)
	results := f.run(t, verify.CheckIngress)
	requireFail(t, results, rootAPI, "answered 403 but the body does not mention system:anonymous", "body: Forbidden by the edge's WAF")
	requireOthersPass(t, results, rootAPI, alphaAPI)
}

func TestIngressFailsWhenTheFrontProxyLetsAnonymousIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := verifytest.HealthyEdge()
	b.FrontAPIStatus = http.StatusOK
	f.withEdge(t, b)
	results := f.run(t, verify.CheckIngress)
	requireFail(t, results, frontAPI, "answered 200, want 401", "rejects unauthenticated requests")
	requireOthersPass(t, results, frontAPI)
}

// Without -ca-file or -insecure-skip-tls-verify the system roots are used, which do not
// trust the edge's certificate.
func TestIngressFailsOnAnUntrustedCertificate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := verifytest.NewEdge(t, f.cfg, f.cluster.CA, verifytest.HealthyEdge())
	client, err := verify.NewHTTPClient(verify.HTTPOptions{Address: srv.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	f.opts.HTTP = client
	results := f.run(t, verify.CheckIngress)
	requireFail(t, results, readyz, "request failed", "certificate")

	// -insecure-skip-tls-verify accepts it.
	client, err = verify.NewHTTPClient(verify.HTTPOptions{Address: srv.Listener.Addr().String(), InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	f.opts.HTTP = client
	requireAll(t, f.run(t, verify.CheckIngress), verify.StatusPass)
}

// The injected dialer sees the ingress address for every hostname, while the URL's host
// still gives SNI and Host.
func TestIngressDialsTheIngressAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := verifytest.NewEdge(t, f.cfg, f.cluster.CA, verifytest.HealthyEdge())
	var dials atomic.Int32
	client, err := verify.NewHTTPClient(verify.HTTPOptions{
		Address: "ingress.invalid:8443",
		CAFile:  f.cluster.CA.CAFile(t, t.TempDir()),
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr != "ingress.invalid:8443" {
				t.Errorf("dialled %s, want the ingress address", addr)
			}
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.opts.HTTP = client
	requireAll(t, f.run(t, verify.CheckIngress), verify.StatusPass)
	if dials.Load() != 4 {
		t.Errorf("%d dials, want 4", dials.Load())
	}
}

func TestNewHTTPClientRefusesBadOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		opts verify.HTTPOptions
		want string
	}{
		"both trust flags": {verify.HTTPOptions{CAFile: notPEM, InsecureSkipVerify: true}, "exclude each other"},
		"no PEM":           {verify.HTTPOptions{CAFile: notPEM}, "holds no PEM certificate"},
		"missing CA file":  {verify.HTTPOptions{CAFile: filepath.Join(dir, "missing.pem")}, "read CA file"},
		"address no port":  {verify.HTTPOptions{Address: "127.0.0.1"}, "must be host:port"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := verify.NewHTTPClient(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestIngressTrustsExtraRoots(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := verifytest.NewEdge(t, f.cfg, f.cluster.CA, verifytest.HealthyEdge())
	ca, err := verify.HubKubeconfigCA(context.Background(), f.cluster.Kube, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := verify.NewHTTPClient(verify.HTTPOptions{Address: srv.Listener.Addr().String(), ExtraRootsPEM: ca})
	if err != nil {
		t.Fatal(err)
	}
	f.opts.HTTP = client
	requireAll(t, f.run(t, verify.CheckIngress), verify.StatusPass)

	f.cfg.Hub.SecretName = "missing"
	if _, err := verify.HubKubeconfigCA(context.Background(), f.cluster.Kube, f.cfg); err == nil {
		t.Fatal("no error for a missing hub Secret")
	}
}
