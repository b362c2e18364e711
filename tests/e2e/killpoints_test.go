//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// killUp kills the running `pulumi up` as a CI runner or a closed laptop does: SIGKILL
// to the CLI, its process group and every process below it (the CLI starts its plugins
// in process groups of their own). It returns what it killed.
func (c *pulumiCLI) killUp() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var killed []string
	for cmd := range c.running {
		if cmd.Process == nil || !containsArg(cmd.Args, "up") {
			continue
		}
		for _, pid := range append([]int{cmd.Process.Pid}, testenv.Descendants(cmd.Process.Pid)...) {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			killed = append(killed, fmt.Sprintf("%d %s", pid, strings.TrimSpace(string(comm))))
		}
		testenv.KillTree(cmd)
	}
	return killed
}

// killPoint is where a killed up is killed: once arm has seen the events it waits for
// and inCluster reports the object it is about, the test kills the up.
type killPoint struct {
	name      string
	arm       func(steps map[string]*engineStep) bool // the engine is where the kill should land
	inCluster func(ctx context.Context) bool          // the object being created has reached the API server
	// settle is how long to wait once armed: past the CLI's first state write, where a
	// kill can leave the file backend's state unreadable (docs/operations.md).
	settle time.Duration
	landed func(t *testing.T, steps map[string]*engineStep)
	// before runs before the up starts, afterKill right after the kill.
	before, afterKill func()
	// leavesHelmPending: the kill lands while Helm installs, so it must leave Helm's
	// record pending.
	leavesHelmPending bool
}

// locks lists the file backend's lock files of the stack.
func (s *e2eStack) locks() []string {
	var out []string
	_ = filepath.WalkDir(filepath.Join(s.stateDir, ".pulumi", "locks"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, strings.TrimPrefix(path, s.stateDir+string(filepath.Separator)))
		}
		return nil
	})
	return out
}

// checkHelmRecordsRepaired checks that the up logged the program's hook removing each
// record the kill before it left pending, and that the up got past the release.
func checkHelmRecordsRepaired(t *testing.T, log *eventLog, records []string) {
	t.Helper()
	if len(records) == 0 {
		return
	}
	warnings := strings.Join(log.diagnostics(), "\n")
	for _, r := range records {
		if !strings.Contains(warnings, r+" (pending-install)") {
			t.Errorf("the up after the kill did not log that its hook removed the pending Helm record %s; its warnings:\n%s", r, indent(log.diagnostics()))
		}
	}
}

// helmReleasePending returns the kcp-operator's Helm release records (Secrets of Helm's
// storage driver) whose status label is pending-install or pending-upgrade.
func helmReleasePending(t *testing.T, ctx context.Context, e *env) []string {
	t.Helper()
	records, err := pendingHelmRecords(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	return records
}

func pendingHelmRecords(ctx context.Context, e *env) ([]string, error) {
	list, err := e.c.kube.CoreV1().Secrets(naming.NamespaceOperator).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + naming.OperatorReleaseName})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sec := range list.Items {
		if st := sec.Labels["status"]; st == "pending-install" || st == "pending-upgrade" {
			out = append(out, sec.Name)
		}
	}
	return out, nil
}
