package providerprobe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/internal/providerprobe"
	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
)

func options(client *providerprobe.Client, out *bytes.Buffer, steps ...string) providerprobe.Options {
	return providerprobe.Options{
		Client: client, Steps: steps,
		Shard: "alpha", ShardHostname: alphaHost,
		ShardURLs:  []providerprobe.ShardURL{{Name: "root", URL: "https://" + rootHost}, {Name: "alpha", URL: "https://" + alphaHost}},
		NamePrefix: "probe-test", WantUser: "kcp-admin", WantGroups: []string{"system:kcp:admin"},
		// Long enough for a few reads on a loaded machine: a wait that runs out before its
		// first read (the client's rate limiter refuses a request it cannot finish in
		// time) cannot report what kcp said, and the test that lets the wait run out
		// checks that it does.
		Wait: 2 * time.Second, Interval: 20 * time.Millisecond,
		Report: providerprobe.NewReporter(out),
	}
}

// runProbe runs the probe and reads its report back from what it printed.
func runProbe(t *testing.T, o providerprobe.Options, out *bytes.Buffer) []providerprobe.Line {
	t.Helper()
	if err := providerprobe.Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	lines := providerprobe.ParseReport(out.String())
	if !slices.EqualFunc(lines, o.Report.Lines(), func(a, b providerprobe.Line) bool { return a == b }) {
		t.Fatalf("printed report %q is not the lines reported %+v", out.String(), o.Report.Lines())
	}
	return lines
}

func line(t *testing.T, lines []providerprobe.Line, check string) providerprobe.Line {
	t.Helper()
	for _, l := range lines {
		if l.Check == check {
			return l
		}
	}
	t.Fatalf("no line for %s in %+v", check, lines)
	return providerprobe.Line{}
}

// hub-identity asks through the front proxy by the kubeconfig's name and at each shard's
// public URL, in the root workspace, by name (the TLS server name is the URL's host) and
// with the client certificate; each line says what kcp saw.
func TestHubIdentityAsksTheFrontProxyAndEveryShardByName(t *testing.T) {
	t.Parallel()
	k := newFakeKcp(t, func(w http.ResponseWriter, r *http.Request, user string, groups []string) {
		if !selfSubjectReview(w, r, user, groups) {
			writeStatus(w, http.StatusNotFound, "NotFound", "not found")
		}
	})
	var out bytes.Buffer
	o := options(k.client(t, k.clientCA, providerprobe.Trust{CAPEM: k.serverCA.PEM}, "kcp-admin", "system:kcp:admin"), &out, providerprobe.StepHubIdentity)
	lines := runProbe(t, o, &out)
	if len(lines) != 3 || o.Report.Failed() {
		t.Fatalf("lines %+v", lines)
	}
	for check, url := range map[string]string{
		"front-proxy": frontURL + "/clusters/root",
		"shard root":  "https://" + rootHost + "/clusters/root",
		"shard alpha": "https://" + alphaHost + "/clusters/root",
	} {
		l := line(t, lines, check)
		if l.Step != "hub-identity" || l.Result != providerprobe.Pass || l.URL != url ||
			l.Identity != `user "kcp-admin" in groups [system:kcp:admin, system:authenticated]` ||
			!strings.HasPrefix(l.Credential, "client certificate CN=kcp-admin,O=system:kcp:admin issued by CN=root-client-ca") {
			t.Errorf("%s: %+v", check, l)
		}
	}
	want := []request{
		{"POST", frontHost + ":6443", "/clusters/root/apis/authentication.k8s.io/v1/selfsubjectreviews", frontHost, "kcp-admin"},
		{"POST", rootHost, "/clusters/root/apis/authentication.k8s.io/v1/selfsubjectreviews", rootHost, "kcp-admin"},
		{"POST", alphaHost, "/clusters/root/apis/authentication.k8s.io/v1/selfsubjectreviews", alphaHost, "kcp-admin"},
	}
	if got := k.seen(); !slices.Equal(got, want) {
		t.Errorf("kcp saw %+v, want %+v", got, want)
	}
}

// The identity must be the one the hub's Kubeconfig object asks for.
func TestHubIdentityFailsForAnotherUserOrGroup(t *testing.T) {
	t.Parallel()
	k := newFakeKcp(t, func(w http.ResponseWriter, r *http.Request, user string, groups []string) {
		selfSubjectReview(w, r, user, groups)
	})
	var out bytes.Buffer
	o := options(k.client(t, k.clientCA, providerprobe.Trust{CAPEM: k.serverCA.PEM}, "someone", "system:masters"), &out, providerprobe.StepHubIdentity)
	l := line(t, runProbe(t, o, &out), "shard alpha")
	if l.Result != providerprobe.Fail || !strings.Contains(l.Error, `want user "kcp-admin"; want group system:kcp:admin`) ||
		l.Identity != `user "someone" in groups [system:masters, system:authenticated]` {
		t.Errorf("line %+v", l)
	}
}

// Each way a provider's request must fail does fail, and says why: the system's roots
// do not know kcp's CA, a server certificate of another CA is not trusted, and kcp
// refuses a client certificate of another CA.
func TestRequestsFailWithoutTheRightTrustOrCredential(t *testing.T) {
	t.Parallel()
	k := newFakeKcp(t, func(w http.ResponseWriter, r *http.Request, user string, groups []string) {
		selfSubjectReview(w, r, user, groups)
	})
	other := pki.MustCA(t, "another-ca")
	cases := map[string]struct {
		clientCA *pki.CA
		trust    providerprobe.Trust
		want     string
	}{
		"system roots":              {k.clientCA, providerprobe.Trust{System: true}, "x509: certificate signed by unknown authority"},
		"another server CA":         {k.clientCA, providerprobe.Trust{CAPEM: other.PEM}, "x509: certificate signed by unknown authority"},
		"client cert of another CA": {other, providerprobe.Trust{CAPEM: k.serverCA.PEM}, "Unauthorized"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			o := options(k.client(t, tc.clientCA, tc.trust, "kcp-admin", "system:kcp:admin"), &out, providerprobe.StepHubIdentity)
			for _, l := range runProbe(t, o, &out) {
				if l.Result != providerprobe.Fail || !strings.Contains(l.Error, tc.want) || l.Identity != "" {
					t.Errorf("%s: %+v, want a failure with %q", l.Check, l, tc.want)
				}
			}
		})
	}
}

// A run whose first check fails still reports every check (the later ones as not run,
// saying which failure stopped them) and still cleans up what it made.
func TestProviderPathReportsEveryCheckAndDeletesWhatItMade(t *testing.T) {
	t.Parallel()
	var created []string
	k := newFakeKcp(t, func(w http.ResponseWriter, r *http.Request, user string, groups []string) {
		const collection = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces"
		switch {
		case r.Method == http.MethodPost && r.URL.Path == collection:
			var ws map[string]any
			_ = json.NewDecoder(r.Body).Decode(&ws)
			created = append(created, ws["metadata"].(map[string]any)["name"].(string))
			if sel := ws["spec"].(map[string]any)["location"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any); sel["name"] != "alpha" {
				t.Errorf("workspace placed by %v, want name=alpha", sel)
			}
			writeJSON(w, http.StatusCreated, ws)
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, collection+"/"):
			// kcp's answer while no shard matches the selector.
			writeJSON(w, http.StatusOK, map[string]any{
				"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
				"metadata": map[string]any{"name": strings.TrimPrefix(r.URL.Path, collection+"/")},
				"status": map[string]any{"phase": "Scheduling", "conditions": []any{map[string]any{
					"type": "WorkspaceScheduled", "status": "False", "reason": "Unschedulable", "message": "No available shards to schedule the workspace",
				}}},
			})
		case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, collection+"/"):
			writeJSON(w, http.StatusOK, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Success"})
		default:
			writeStatus(w, http.StatusNotFound, "NotFound", "not found")
		}
	})
	var out bytes.Buffer
	o := options(k.client(t, k.clientCA, providerprobe.Trust{CAPEM: k.serverCA.PEM}, "kcp-admin", "system:kcp:admin"), &out, providerprobe.StepProviderPath)
	lines := runProbe(t, o, &out)
	var checks []string
	for _, l := range lines {
		checks = append(checks, l.Check)
	}
	if !slices.Equal(checks, providerprobe.ProviderPathChecks) {
		t.Fatalf("checks %v, want %v", checks, providerprobe.ProviderPathChecks)
	}
	ws := line(t, lines, "workspaces")
	if ws.Result != providerprobe.Fail || ws.URL != frontURL+"/clusters/root" ||
		!strings.Contains(ws.Error, `is not Ready`) || !strings.Contains(ws.Error, `phase "Scheduling"`) ||
		!strings.Contains(ws.Error, "WorkspaceScheduled=False (Unschedulable: No available shards to schedule the workspace)") {
		t.Errorf("workspaces: %+v", ws)
	}
	for _, l := range lines[1 : len(lines)-1] {
		if l.Result != providerprobe.NotRun || l.Message != "not run: it needs what workspaces would have made" {
			t.Errorf("%s: %+v", l.Check, l)
		}
	}
	if len(created) != 2 || !strings.HasPrefix(created[0], "probe-test-") || created[0] != strings.TrimSuffix(created[1], "-consumer")+"-provider" {
		t.Fatalf("created %v", created)
	}
	cleanup := line(t, lines, "cleanup")
	if cleanup.Result != providerprobe.Pass || cleanup.Message != "deleted root:"+created[1]+", root:"+created[0] {
		t.Errorf("cleanup: %+v", cleanup)
	}
	var deleted []string
	for _, r := range k.seen() {
		if r.Method == http.MethodDelete {
			deleted = append(deleted, strings.TrimPrefix(r.Path, "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces/"))
		}
	}
	if !slices.Equal(deleted, []string{created[1], created[0]}) {
		t.Errorf("deleted %v, want the consumer, then the provider", deleted)
	}
}

// Only a kubeconfig of the operator's kind is used: an https server and an inline client
// certificate; anything else it might ask for is refused, not half used.
func TestLoadCredentialTakesOnlyTheServerAndTheClientCertificate(t *testing.T) {
	t.Parallel()
	c := pki.MustCA(t, "root-client-ca")
	leaf := c.MustClientCert(t, "kcp-admin", []string{"system:kcp:admin"})
	good := verifytest.Kubeconfig(t, frontURL+"/clusters/root", c.PEM, leaf.CertPEM, leaf.KeyPEM)
	cred, err := providerprobe.LoadCredential(good)
	if err != nil {
		t.Fatal(err)
	}
	if cred.Server != frontURL+"/clusters/root" || !bytes.Equal(cred.CertPEM, leaf.CertPEM) || !bytes.Equal(cred.KeyPEM, leaf.KeyPEM) ||
		cred.Subject != "client certificate CN=kcp-admin,O=system:kcp:admin issued by CN=root-client-ca" {
		t.Errorf("credential %+v", cred)
	}
	cases := map[string]struct {
		edit func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)
		want string
	}{
		"exec plugin": {func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Exec = &clientcmdapi.ExecConfig{Command: "true"}
		}, "exec plugin"},
		"token":           {func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "abc" }, "carries a token"},
		"key file":        {func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.ClientKey = "/etc/key" }, "names files"},
		"no certificate":  {func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.ClientCertificateData = nil }, "no inline client certificate"},
		"insecure":        {func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.InsecureSkipTLSVerify = true }, "skips TLS verification"},
		"server name":     {func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.TLSServerName = "kcp" }, "tls-server-name"},
		"proxy":           {func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.ProxyURL = "http://proxy:3128" }, "proxy-url"},
		"http server":     {func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "http://" + frontHost }, "is not an https URL"},
		"address server":  {func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "https://10.96.0.100:6443" }, "names the address 10.96.0.100"},
		"no such cluster": {func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { *c = clientcmdapi.Cluster{} }, "server"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kc, err := clientcmd.Load(good)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(kc.Clusters["kcp"], kc.AuthInfos["kcp-admin"])
			edited, err := clientcmd.Write(*kc)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := providerprobe.LoadCredential(edited); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// The client is built as the rules say: the CA file alone (or the system's roots
// alone), the URL's host as the server name, the client certificate, no proxy.
func TestClientConfigTrustsOnlyWhatItIsGiven(t *testing.T) {
	t.Parallel()
	c := pki.MustCA(t, "root-client-ca")
	leaf := c.MustClientCert(t, "kcp-admin", nil)
	client := &providerprobe.Client{Credential: providerprobe.Credential{CertPEM: leaf.CertPEM, KeyPEM: leaf.KeyPEM}, Trust: providerprobe.Trust{CAPEM: c.PEM}}
	cfg, err := client.Config("https://"+alphaHost+"/services/apiexport/x/y", true)
	if err != nil {
		t.Fatal(err)
	}
	tls := cfg.TLSClientConfig
	if !bytes.Equal(tls.CAData, c.PEM) || tls.CAFile != "" || tls.Insecure || tls.ServerName != "" || !bytes.Equal(tls.CertData, leaf.CertPEM) ||
		cfg.BearerToken != "" || cfg.Username != "" || cfg.Dial != nil || cfg.Host != "https://"+alphaHost+"/services/apiexport/x/y" {
		t.Errorf("config %+v", cfg)
	}
	if u, err := cfg.Proxy(&http.Request{}); u != nil || err != nil {
		t.Errorf("proxy %v %v, want none", u, err)
	}
	client.Trust = providerprobe.Trust{System: true}
	if cfg, err = client.Config("https://"+alphaHost, true); err != nil || cfg.TLSClientConfig.CAData != nil {
		t.Errorf("system trust: CA %q, %v", cfg.TLSClientConfig.CAData, err)
	}
	for raw, want := range map[string]string{
		"https://10.96.0.102":            "names the address",
		"https://" + alphaHost + ":6443": "names port 6443",
		"http://" + alphaHost:            "is not an https URL",
	} {
		if _, err := client.Config(raw, true); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", raw, err, want)
		}
	}
}

// A slice URL a provider anywhere in the cluster can follow: https, the shard's public
// hostname, port 443 at most, the path kcp builds.
func TestSliceURLProblem(t *testing.T) {
	t.Parallel()
	const path = "/services/apiexport/2x1/widgets"
	for raw, want := range map[string]string{
		"https://alpha.kcp.test" + path:                               "",
		"https://alpha.kcp.test:443" + path:                           "",
		"https://alpha.kcp.test:8443" + path:                          "names port 8443",
		"https://10.96.0.102" + path:                                  "names the address 10.96.0.102",
		"http://alpha.kcp.test" + path:                                "is not an https URL",
		"https://alpha-shard-kcp.kcp-system.svc.cluster.local" + path: "is not the shard's public hostname alpha.kcp.test",
		"https://alpha.kcp.test/services/apiexport/2x1/other":         "whose path is not " + path,
	} {
		err := providerprobe.SliceURLProblem(raw, "alpha.kcp.test", path)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}

func TestOptionsAreRefusedNamingTheRule(t *testing.T) {
	t.Parallel()
	k := &providerprobe.Client{}
	for name, tc := range map[string]struct {
		edit func(o *providerprobe.Options)
		want string
	}{
		"step":       {func(o *providerprobe.Options) { o.Steps = []string{"dns"} }, `unknown step "dns"`},
		"prefix":     {func(o *providerprobe.Options) { o.NamePrefix = "Probe_" }, "lower-case letters"},
		"hostname":   {func(o *providerprobe.Options) { o.ShardHostname = "alpha.kcp.test:8443" }, "is not a host name"},
		"shard URL":  {func(o *providerprobe.Options) { o.ShardURLs[1].URL = "https://alpha.kcp.test:6443" }, `shard "alpha"`},
		"two URLs":   {func(o *providerprobe.Options) { o.ShardURLs[1].Name = "root" }, `shard "root" has two URLs`},
		"no user":    {func(o *providerprobe.Options) { o.WantUser = "" }, "user kcp must report is empty"},
		"no waiting": {func(o *providerprobe.Options) { o.Wait = 0 }, "must be positive"},
	} {
		var out bytes.Buffer
		o := options(k, &out)
		if err := o.Validate(); err != nil {
			t.Fatalf("%s: the base options are refused: %v", name, err)
		}
		tc.edit(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", name, err, tc.want)
		}
	}
}

// The report is read back from a pod's log, where other output may stand between its
// lines.
func TestParseReportKeepsOnlyTheProbesLines(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := providerprobe.NewReporter(&out)
	r.Add(providerprobe.Line{Step: "hub-identity", Check: "front-proxy", URL: frontURL, Result: providerprobe.Pass, Seconds: 0.5})
	out.WriteString("W1203 warnings.go:70] a warning\n{\"step\":\"x\"}\nnot json\n")
	r.Add(providerprobe.Line{Step: "hub-identity", Check: "shard alpha", Result: providerprobe.Fail, Error: "Unauthorized"})
	got := providerprobe.ParseReport(out.String())
	if len(got) != 2 || got[0].URL != frontURL || got[1].Error != "Unauthorized" || !r.Failed() {
		t.Errorf("parsed %+v", got)
	}
}
