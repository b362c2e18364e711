package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// scrapeTarget is one /metrics endpoint of the running stack and the series the alert
// rules read from it.
type scrapeTarget struct {
	name   string
	scrape func(ctx context.Context) (int, string, error)
	series []string
}

// kcpServersServeMetricsToTheScrapers reads /metrics of every kcp server, the front
// proxy and every etcd as a scraper does: kcp's with the scrapers' own identity (the
// Kubeconfig objects of components/monitoring.go, bound to system:kcp:metrics-reader),
// over TLS verified against kcp's CA; etcd's on its metrics port. A shard other than the
// root shard authorizes it only through the binding in its own system:admin cluster.
func kcpServersServeMetricsToTheScrapers(t *testing.T, l *lifecycle) {
	ctx, e := l.ctx, l.env
	rootCred := metricsKubeconfig(t, ctx, e, naming.RootShardName)
	targets := []scrapeTarget{
		{name: "kcp " + naming.RootShardName, scrape: kcpScrape(t, rootCred, nil, serviceDial(e, naming.NamespaceKcp, naming.OwnedServiceName(naming.RootShardName), naming.KcpPort)),
			series: []string{"apiserver_request_total", "apiserver_current_inflight_requests"}},
		// The front proxy answers /metrics itself, after asking the root shard: the
		// binding in root covers it. Its certificate is the front proxy's, as the hub's
		// kubeconfig names it.
		{name: "kcp front proxy", scrape: kcpScrape(t, rootCred, hubKubeconfig(t, ctx, e), frontProxyDial(e)),
			series: []string{"process_start_time_seconds"}},
	}
	for _, s := range e.plan.cfg.Kcp.Shards {
		targets = append(targets, scrapeTarget{name: "kcp " + s.Name,
			scrape: kcpScrape(t, metricsKubeconfig(t, ctx, e, s.Name), nil, serviceDial(e, naming.NamespaceKcp, naming.OwnedServiceName(s.Name), naming.KcpPort)),
			series: []string{"apiserver_request_total", "apiserver_current_inflight_requests"}})
	}
	for _, shard := range e.plan.cfg.Kcp.AllShards() {
		dial := serviceDial(e, naming.NamespaceEtcd, naming.EtcdHeadlessService(shard.Name), naming.EtcdMetricsPort)
		targets = append(targets, scrapeTarget{name: "etcd " + shard.Name, scrape: plainScrape(dial),
			series: []string{"etcd_server_has_leader", "etcd_server_leader_changes_seen_total", "etcd_mvcc_db_total_size_in_bytes",
				"etcd_server_quota_backend_bytes", "etcd_disk_wal_fsync_duration_seconds_bucket"}})
	}
	for _, target := range targets {
		// The operator binds the user once the shard is Available; a binding made after
		// up returned reaches the authorizer's informer within seconds.
		var status int
		var body string
		var err error
		deadline := time.Now().Add(time.Minute)
		for {
			status, body, err = target.scrape(ctx)
			if err == nil && status == http.StatusOK || time.Now().After(deadline) {
				break
			}
			time.Sleep(2 * time.Second)
		}
		if err != nil || status != http.StatusOK {
			t.Errorf("%s: /metrics answered %d (%v): %.300s", target.name, status, err, body)
			continue
		}
		families := metricFamilies(body)
		var missing []string
		for _, s := range target.series {
			if !families[s] {
				missing = append(missing, s)
			}
		}
		if len(missing) > 0 {
			t.Errorf("%s: /metrics serves %d series names but not %v, which the alert rules read", target.name, len(families), missing)
			continue
		}
		t.Logf("%s: /metrics answered 200 with %d series names, %v among them", target.name, len(families), target.series)
	}
}

// metricsKubeconfig is the kubeconfig the operator wrote for the scrapers' Kubeconfig
// object on server.
func metricsKubeconfig(t *testing.T, ctx context.Context, e *env, server string) []byte {
	t.Helper()
	secret, err := e.c.kube.CoreV1().Secrets(naming.NamespaceKcp).Get(ctx, naming.MetricsKubeconfigName(server), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the scrapers' kubeconfig for %s: %v", server, err)
	}
	return secret.Data[naming.KubeconfigSecretKey]
}

func serviceDial(e *env, namespace, service string, port int) verify.DialFunc {
	return verify.ServiceDialFunc(&verify.PortForwardDialer{Kube: e.c.kube, Config: e.c.rest}, namespace, service, port)
}

// kcpScrape GETs /metrics at the top of the server's path tree (a workspace-scoped
// /metrics is refused) with cred's client certificate. serverOf, when set, is the
// kubeconfig whose server name and CA the endpoint presents (the front proxy's).
func kcpScrape(t *testing.T, cred, serverOf []byte, dial verify.DialFunc) func(context.Context) (int, string, error) {
	t.Helper()
	cfg, err := verify.KubeconfigRESTConfig(cred, dial)
	if err != nil {
		t.Fatalf("the scrapers' kubeconfig: %v", err)
	}
	if serverOf != nil {
		server, err := verify.KubeconfigRESTConfig(serverOf, dial)
		if err != nil {
			t.Fatalf("the front proxy's kubeconfig: %v", err)
		}
		cfg.Host, cfg.TLSClientConfig.ServerName, cfg.TLSClientConfig.CAData = server.Host, server.TLSClientConfig.ServerName, server.TLSClientConfig.CAData
	}
	if cfg.TLSClientConfig.Insecure || len(cfg.TLSClientConfig.CAData) == 0 {
		t.Fatalf("the scrape would not verify the server's certificate")
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimSuffix(strings.SplitN(strings.TrimPrefix(cfg.Host, "https://"), "/", 2)[0], "/")
	return func(ctx context.Context) (int, string, error) {
		return get(ctx, &http.Client{Transport: transport, Timeout: 15 * time.Second}, "https://"+host+"/metrics")
	}
}

// plainScrape GETs etcd's /metrics, which its metrics port serves over plain HTTP.
func plainScrape(dial verify.DialFunc) func(context.Context) (int, string, error) {
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DialContext: dial, Proxy: nil}}
	return func(ctx context.Context) (int, string, error) { return get(ctx, client, "http://etcd/metrics") }
}

func get(ctx context.Context, client *http.Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// metricFamilies are the names of the series a Prometheus text exposition holds (a
// histogram's _bucket, _sum and _count each under its own name).
func metricFamilies(body string) map[string]bool {
	out := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		out[name] = true
	}
	return out
}
