package verify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

// fixture is a healthy stack: config, fake cluster, scripted DNS and provider probe, a
// TLS edge and a fake kcp behind the owned Services.
type fixture struct {
	cfg     *config.Config
	cluster *verifytest.Cluster
	dns     *verifytest.DNSRunner
	probe   *verifytest.ProbeRunner
	kcp     *verifytest.Kcp
	opts    verify.Options
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cfg := verifytest.Config(t)
	cl := verifytest.NewHealthyCluster(t, cfg)
	dns := verifytest.HealthyDNS(cfg)
	probe := verifytest.HealthyProbe(cfg, dns)
	probe.ReadCA = func(ctx context.Context, namespace, name string) (string, error) {
		cm, err := cl.Kube.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return cm.Data["ca.crt"], nil
	}
	f := &fixture{
		cfg: cfg, cluster: cl, dns: dns, probe: probe,
		opts: verify.Options{
			Config: cfg, Kube: cl.Kube, Dynamic: cl.Dynamic, Pods: probe,
			ProviderImage: verifytest.ProviderImage,
			OIDCUser:      &verify.OIDCUser{Token: verifytest.AliceToken(cfg.OIDC.IssuerURL)},
			Timeout:       time.Second, Interval: 20 * time.Millisecond,
			Now: func() time.Time { return verifytest.Now },
		},
	}
	f.withKcp(t, verifytest.HealthyKcp(cfg))
	return f
}

// withKcp replaces the fake kcp behind the owned Services.
func (f *fixture) withKcp(t *testing.T, b verifytest.KcpBehaviour) {
	t.Helper()
	f.kcp = verifytest.NewKcp(t, f.cfg, f.cluster.CA, b)
	f.opts.Services = f.kcp
}

// withEdge starts the fake edge and points the HTTP client at it, trusting the test CA.
func (f *fixture) withEdge(t *testing.T, b verifytest.EdgeBehaviour) {
	t.Helper()
	srv := verifytest.NewEdge(t, f.cfg, f.cluster.CA, b)
	client, err := verify.NewHTTPClient(verify.HTTPOptions{
		Address: srv.Listener.Addr().String(),
		CAFile:  f.cluster.CA.CAFile(t, t.TempDir()),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.opts.HTTP = client
}

func (f *fixture) run(t *testing.T, checks ...string) []verify.Result {
	t.Helper()
	results, err := verify.Run(context.Background(), f.opts, checks)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) == 0 {
		t.Fatal("no results")
	}
	return results
}

// only returns the result for item, failing the test when there is not exactly one.
func only(t *testing.T, results []verify.Result, item string) verify.Result {
	t.Helper()
	var found []verify.Result
	for _, r := range results {
		if r.Item == item {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one result for %q, got %d in %s", item, len(found), dump(results))
	}
	return found[0]
}

func requireAll(t *testing.T, results []verify.Result, want verify.Status) {
	t.Helper()
	for _, r := range results {
		if r.Status != want {
			t.Errorf("%s %s: status %s, want %s: %s", r.Check, r.Item, r.Status, want, r.Message)
		}
	}
}

// requireFail asserts the item failed and its message holds every fragment.
func requireFail(t *testing.T, results []verify.Result, item string, fragments ...string) {
	t.Helper()
	requireStatus(t, results, item, verify.StatusFail, fragments...)
}

func requireStatus(t *testing.T, results []verify.Result, item string, status verify.Status, fragments ...string) {
	t.Helper()
	r := only(t, results, item)
	if r.Status != status {
		t.Fatalf("%s: status %s, want %s: %s", item, r.Status, status, r.Message)
	}
	for _, f := range fragments {
		if !strings.Contains(r.Message, f) {
			t.Errorf("%s: message %q does not contain %q", item, r.Message, f)
		}
	}
}

// requireOthersPass asserts every result except the named items passed, so a failing
// test fails for the reason it injects and nothing else.
func requireOthersPass(t *testing.T, results []verify.Result, except ...string) {
	t.Helper()
	skip := map[string]bool{}
	for _, e := range except {
		skip[e] = true
	}
	for _, r := range results {
		if !skip[r.Item] && r.Status != verify.StatusPass {
			t.Errorf("%s %s: unexpected %s: %s", r.Check, r.Item, r.Status, r.Message)
		}
	}
}

func dump(results []verify.Result) string {
	var b strings.Builder
	for _, r := range results {
		b.WriteString("\n  " + string(r.Status) + " " + r.Check + " " + r.Item + ": " + r.Message)
	}
	return b.String()
}
