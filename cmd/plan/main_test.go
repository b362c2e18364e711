package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/railgrid/railgrid-kcp/internal/plan"
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
		"admin.kubeconfig: '" + plan.SecretPlaceholder + "'", "# Helm release kcp-operator/kcp-operator: chart kcp-operator version 0.7.10"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q", want)
		}
	}
	if strings.Contains(out, "client-certificate-data") || strings.Contains(out, "BEGIN CERTIFICATE") {
		t.Error("the plan prints credential material")
	}
	if first := strings.Index(out, "kind: Namespace"); first < 0 || first > strings.Index(out, "kind: StatefulSet") {
		t.Error("namespaces must come first")
	}
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
	if len(doc.MockedInvokes) != 1 || doc.MockedInvokes[0] != "gcp:container/getCluster:getCluster" {
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

func TestGraphEndsWithTheCriticalPath(t *testing.T) {
	code, out, _ := runPlan(t, "-stack", "kind", "-config", stackFile("kind"), "-format", "graph")
	if code != 0 || !strings.HasPrefix(out, "digraph") || !strings.Contains(out, "// critical path: 4 resources") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

func TestInvalidConfigExitsTwoWithEveryErrorAndNoOutput(t *testing.T) {
	data, err := os.ReadFile(stackFile("kind"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), "members: 1", "members: 2", 1)
	bad = strings.Replace(bad, "clientID: railgrid", "clientID: \"\"", 1)
	path := filepath.Join(t.TempDir(), "Pulumi.kind.yaml")
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runPlan(t, "-stack", "kind", "-config", path)
	if code != 2 || out != "" {
		t.Fatalf("want exit 2 and no stdout, got %d and %q", code, out)
	}
	for _, key := range []string{"railgrid-kcp:etcd.members", "railgrid-kcp:oidc.clientID"} {
		if !strings.Contains(errOut, key) {
			t.Errorf("stderr does not name %s:\n%s", key, errOut)
		}
	}
}
