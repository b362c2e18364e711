package verify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

func TestRunAllChecksOnAHealthyStack(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withEdge(t, verifytest.HealthyEdge())
	results := f.run(t)
	requireAll(t, results, verify.StatusPass)
	var order []string
	for _, r := range results {
		if len(order) == 0 || order[len(order)-1] != r.Check {
			order = append(order, r.Check)
		}
	}
	if got := strings.Join(order, ","); got != "rollout,split-horizon,ingress,hub-kubeconfig,certificates,anonymous,hub-credential,shards,provider-path,oidc-user" {
		t.Errorf("check order %s", got)
	}
	// certificates: three serving certificates, their CA once, the hub's copy;
	// hub-credential: the port-forward, then from a pod the front proxy and both shards.
	if s := verify.Summarize(results); s.Pass != 11+2+4+1+(3+1+1)+4+(1+3)+2+15+1 || s.Warn != 0 || s.Fail != 0 || s.Skip != 0 {
		t.Errorf("summary %+v", s)
	}
}

func TestRunRunsOnlyTheSelectedChecksInTheirOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	names, err := verify.ParseCheckNames("hub-kubeconfig, split-horizon")
	if err != nil {
		t.Fatal(err)
	}
	results := f.run(t, names...)
	if len(results) != 3 || results[0].Check != verify.CheckSplitHorizon || results[2].Check != verify.CheckHubKubeconfig {
		t.Fatalf("results %s", dump(results))
	}
}

func TestRunRefusesMissingDependencies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := verify.Run(context.Background(), f.opts, []string{verify.CheckIngress})
	if err == nil || !strings.Contains(err.Error(), "check ingress needs Options.HTTP") {
		t.Fatalf("error %v", err)
	}
	f.opts.Services = nil
	for _, check := range []string{verify.CheckAnonymous, verify.CheckHubCredential, verify.CheckShards} {
		_, err := verify.Run(context.Background(), f.opts, []string{check})
		if err == nil || !strings.Contains(err.Error(), "check "+check+" needs Options.Services") {
			t.Errorf("%s: error %v", check, err)
		}
	}
	if _, err := verify.Run(context.Background(), verify.Options{}, nil); err == nil {
		t.Fatal("no config accepted")
	}
}

func TestParseCheckNames(t *testing.T) {
	t.Parallel()
	all, err := verify.ParseCheckNames("all")
	if err != nil || len(all) != 10 || all[4] != verify.CheckCertificates || all[8] != verify.CheckProviderPath || all[9] != verify.CheckOIDCUser {
		t.Fatalf("all: %v %v", all, err)
	}
	if _, err := verify.ParseCheckNames("rollout,dns"); err == nil || !strings.Contains(err.Error(), `unknown check "dns"`) {
		t.Fatalf("error %v", err)
	}
}

func TestReportText(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := verifytest.HealthyEdge()
	b.FrontAPIStatus = http.StatusOK
	f.withEdge(t, b)
	results := f.run(t, verify.CheckIngress)
	var out bytes.Buffer
	if err := verify.NewReport("kind", "kind-railgrid-kcp", false, results).WriteText(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("want 4 result lines and a summary:\n%s", out.String())
	}
	if !strings.HasPrefix(lines[0], "✓ ingress") || !strings.HasPrefix(lines[3], "✗ ingress        GET https://kcp.example.com/api: answered 200, want 401") {
		t.Errorf("lines:\n%s", out.String())
	}
	if lines[4] != "FAILED: 3 passed, 0 warning(s), 1 failed" {
		t.Errorf("summary %q", lines[4])
	}
}

func TestReportJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	results := f.run(t, verify.CheckHubKubeconfig)
	var out bytes.Buffer
	if err := verify.NewReport("kind", "kind-railgrid-kcp", false, results).WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var got verify.Report
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Passed || got.Stack != "kind" || got.Summary.Pass != 1 || len(got.Results) != 1 || got.Results[0].Status != verify.StatusPass {
		t.Errorf("report %+v", got)
	}
}
