package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -format changes compares the plan of -config with that of -before: adding a shard to
// the kind stack file creates its objects and updates only the shared hosts ConfigMap
// and edge policy; without -before the command refuses to guess.
func TestChangesOfAddingAShard(t *testing.T) {
	shipped, err := os.ReadFile(stackFile("kind"))
	if err != nil {
		t.Fatal(err)
	}
	anchor := "        clusterIP: 10.96.0.102\n        replicas: 1\n"
	if !strings.Contains(string(shipped), anchor) {
		t.Fatalf("Pulumi.kind.yaml no longer has alpha as %q", anchor)
	}
	withBeta := strings.Replace(string(shipped), anchor, anchor+
		"      - name: beta\n        hostname: beta.kcp.localhost\n        clusterIP: 10.96.0.103\n        replicas: 1\n", 1)
	after := filepath.Join(t.TempDir(), "Pulumi.kind.yaml")
	if err := os.WriteFile(after, []byte(withBeta), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runPlan(t, "-stack", "kind", "-config", after, "-before", stackFile("kind"), "-format", "changes")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"+ Shard kcp-system/beta\n", "+ StatefulSet etcd/etcd-beta\n", "~ ConfigMap kube-system/railgrid-kcp-hosts\n",
		"+ CronJob etcd/etcd-beta-defrag\n", "+ PodDisruptionBudget kcp-system/beta-shard-kcp\n",
		"    +         10.96.0.103 beta.kcp.localhost\n", "# 12 to create, 0 to delete, 2 to update"} {
		if !strings.Contains(out, want) {
			t.Errorf("the changes lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\n- ") {
		t.Errorf("adding a shard deletes something:\n%s", out)
	}
	// The same file before and after: nothing changes.
	if code, out, _ := runPlan(t, "-stack", "kind", "-config", stackFile("kind"), "-before", stackFile("kind"), "-format", "changes"); code != 0 || !strings.HasPrefix(out, "# 0 to create, 0 to delete, 0 to update") {
		t.Errorf("a plan compared with itself: exit %d\n%s", code, out)
	}
	if code, _, errOut := runPlan(t, "-stack", "kind", "-format", "changes"); code != 2 || !strings.Contains(errOut, "-before") {
		t.Errorf("-format changes without -before: exit %d, %s", code, errOut)
	}
}
