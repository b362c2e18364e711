package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
	"github.com/railgrid/railgrid-kcp/naming"
)

func runPlan(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func stackFile(stack string) string { return filepath.Join("..", "..", "Pulumi."+stack+".yaml") }

func TestYAMLPlanHasEveryObjectAndNoSecret(t *testing.T) {
	code, out, errOut := runPlan(t, "-stack", "kind", "-config", stackFile("kind"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"kind: RootShard", "kind: Shard", "kind: FrontProxy", "kind: Kubeconfig", "kind: StatefulSet", "kind: TLSRoute",
		"# Helm release kcp-operator/kcp-operator: chart kcp-operator version 0.7.10"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q", want)
		}
	}
	// The kubeconfig the operator wrote, as the same run read it, and the client key and
	// certificate in it: none may appear in the plan, encoded or not.
	encoded := hubKubeconfig(t, "kind")
	kubeconfig, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil || !strings.Contains(string(kubeconfig), "client-key-data: ") {
		t.Fatalf("the mocked hub Secret holds no kubeconfig (%v): %.80q", err, kubeconfig)
	}
	leaks := []string{encoded, string(kubeconfig)}
	for _, line := range strings.Split(string(kubeconfig), "\n") {
		if _, value, ok := strings.Cut(line, "-data: "); ok {
			leaks = append(leaks, value)
		}
	}
	for _, leak := range leaks {
		if strings.Contains(out, leak) {
			t.Errorf("the plan prints credential material: %.60q", leak)
		}
	}
	if first := strings.Index(out, "kind: Namespace"); first < 0 || first > strings.Index(out, "kind: StatefulSet") {
		t.Error("namespaces must come first")
	}
}

// hubKubeconfig is the kubeconfig the operator wrote for the hub as a mock run of the
// stack reads it (base64, as Secret data). The hub Secret itself is declared without
// data: the copy fills it in the cluster.
func hubKubeconfig(t *testing.T, stack string) string {
	t.Helper()
	rec, err := mockstack.RunStackFile(stack, stackFile(stack), mockstack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if secret, ok := rec.KubernetesObject("Secret", config.DefaultHubSecretName); !ok || secret.Inputs.HasValue("data") {
		t.Fatalf("the hub Secret: declared %v, with data %v", ok, secret.Inputs["data"])
	}
	minted, ok := rec.Find("kubernetes:core/v1:Secret", "railgrid-kcp-hub-minted")
	if !ok {
		t.Fatal("the operator's kubeconfig Secret is not read")
	}
	data := plain(minted.Outputs["data"])
	if !data.IsObject() {
		t.Fatalf("the operator's Secret's data is %v", data)
	}
	value := plain(data.ObjectValue()[naming.KubeconfigSecretKey])
	if !value.IsString() || value.StringValue() == "" {
		t.Fatalf("the operator's Secret's %s is %v", naming.KubeconfigSecretKey, value)
	}
	return value.StringValue()
}

// plain unwraps a secret.
func plain(v resource.PropertyValue) resource.PropertyValue {
	for v.IsSecret() {
		v = v.SecretValue().Element
	}
	return v
}

func TestJSONPlanMarksWhatOnlyTheCloudKnows(t *testing.T) {
	code, out, errOut := runPlan(t, "-stack", "gke", "-config", stackFile("gke"), "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc plan.JSONPlan
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	// The cluster's lookup, and the read of the stack's own previous outputs.
	if !slices.Equal(slices.Sorted(slices.Values(doc.MockedInvokes)), []string{"gcp:container/getCluster:getCluster", "pulumi:pulumi:readStackOutputs"}) {
		t.Errorf("mocked invokes: %v", doc.MockedInvokes)
	}
	var bucket *plan.JSONResource
	for i, r := range doc.Resources {
		if r.Type == "gcp:storage/bucket:Bucket" {
			bucket = &doc.Resources[i]
		}
	}
	if bucket == nil || !bucket.Protect {
		t.Fatalf("the snapshot bucket must be listed as protected: %+v", bucket)
	}
}

// The JSON plan lists the stack's outputs; the users' kubeconfig is one, in the clear.
func TestJSONPlanListsTheStacksOutputs(t *testing.T) {
	code, out, errOut := runPlan(t, "-stack", "kind", "-config", stackFile("kind"), "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc plan.JSONPlan
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	kubeconfig, _ := doc.Outputs["userKubeconfig"].(string)
	if !strings.Contains(kubeconfig, "server: https://kcp.localhost:8443/clusters/root") || !strings.Contains(kubeconfig, "- --oidc-issuer-url=https://dex.kcp.localhost") {
		t.Errorf("output userKubeconfig:\n%s", kubeconfig)
	}
	if doc.Outputs["platform"] != "kind" || doc.Outputs["frontProxyHostname"] != "kcp.localhost" {
		t.Errorf("outputs platform and frontProxyHostname: %v, %v", doc.Outputs["platform"], doc.Outputs["frontProxyHostname"])
	}
}

func TestGraphEndsWithTheCriticalPath(t *testing.T) {
	code, out, _ := runPlan(t, "-stack", "kind", "-config", stackFile("kind"), "-format", "graph")
	if code != 0 || !strings.HasPrefix(out, "digraph") || !strings.Contains(out, "// critical path: 5 resources") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

// -format mermaid draws the components, not the composition that holds them, with an
// arrow from what is awaited to what waits for it.
func TestMermaidFoldsTheGraphIntoTheComponents(t *testing.T) {
	code, out, errOut := runPlan(t, "-stack", "kind", "-config", stackFile("kind"), "-format", "mermaid")
	if code != 0 || !strings.HasPrefix(out, "flowchart LR\n") {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	labels := map[string]string{}
	arrows := map[[2]string]bool{}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if id, rest, ok := strings.Cut(line, "[\""); ok {
			labels[id] = strings.TrimSuffix(rest, "\"]")
		}
		if from, to, ok := strings.Cut(line, " --> "); ok {
			for _, d := range strings.Split(to, " & ") {
				arrows[[2]string{labels[from], labels[d]}] = true
			}
		}
	}
	if len(labels) == 0 {
		t.Fatalf("no nodes:\n%s", out)
	}
	for _, l := range labels {
		if strings.HasPrefix(l, "KcpPlatform ") {
			t.Errorf("the composition is drawn as a node: %s", l)
		}
	}
	root, operator, etcdRoot, shard := "KcpRootShard railgrid-kcp-root", "KcpOperator railgrid-kcp-operator", "EtcdCluster railgrid-kcp-etcd-root", "KcpShard railgrid-kcp-shard-alpha"
	for _, want := range [][2]string{{operator, root}, {etcdRoot, root}, {root, shard}} {
		if !arrows[want] {
			t.Errorf("no arrow %s --> %s:\n%s", want[0], want[1], out)
		}
	}
	for _, wrong := range [][2]string{{root, etcdRoot}, {shard, root}, {root, operator}} {
		if arrows[wrong] {
			t.Errorf("arrow %s --> %s runs the wrong way", wrong[0], wrong[1])
		}
	}
	if !strings.Contains(out, "%% critical path (bold): StatefulSet etcd-root, RootShard root, FrontProxy frontproxy, Kubeconfig") {
		t.Errorf("no critical path:\n%s", out)
	}
}

func TestInvalidConfigExitsTwoWithEveryErrorAndNoOutput(t *testing.T) {
	data, err := os.ReadFile(stackFile("kind"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), "members: 1", "members: 2", 1)
	bad = strings.Replace(bad, "clientID: railgrid", "clientID: \"\"", 1)
	bad = strings.Replace(bad, "volumeSize: 2Gi", "volumeSize: 2", 1)
	bad += "  railgrid-kcp:etdc:\n    members: 3\n"
	path := filepath.Join(t.TempDir(), "Pulumi.kind.yaml")
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runPlan(t, "-stack", "kind", "-config", path)
	if code != 2 || out != "" {
		t.Fatalf("want exit 2 and no stdout, got %d and %q", code, out)
	}
	for _, key := range []string{`railgrid-kcp:etcd.members = "2"`, `railgrid-kcp:oidc.clientID = ""`, `railgrid-kcp:etcd.volumeSize = "2": must be a string`,
		`railgrid-kcp:etdc = "{\"members\":3}": is not a railgrid-kcp config key`, "invalid stack configuration (4 problem(s))"} {
		if !strings.Contains(errOut, key) {
			t.Errorf("stderr does not name %s:\n%s", key, errOut)
		}
	}
}
