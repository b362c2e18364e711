package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A kubelet that dies at start is started again, its dead run listed with its fatal
// line; one stopped on purpose is not.
func TestTheKubeletIsStartedAgainWhenItExitsOnItsOwn(t *testing.T) {
	dir := t.TempDir()
	// The first run dies as the pinned kubelet can; the next ones serve.
	script := filepath.Join(dir, "kubelet")
	body := "#!/bin/sh\nif [ ! -e " + filepath.Join(dir, "ran") + " ]; then : > " + filepath.Join(dir, "ran") +
		"; echo 'fatal error: concurrent map iteration and map write'; exit 2; fi\nexec sleep 60\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	n := &Node{opts: NodeOptions{Dir: dir, Bins: NodeBinaries{Kubelet: script}}, kubeletRestartDelay: 100 * time.Millisecond}
	if err := n.launchKubelet("kubelet.log"); err != nil {
		t.Fatal(err)
	}
	first := n.Kubelet()
	deadline := time.Now().Add(10 * time.Second)
	for (n.Kubelet() == first || n.Kubelet().Exited()) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	second := n.Kubelet()
	if second == first || second.Exited() {
		t.Fatalf("the kubelet was not started again after it died (crashes %v)", n.KubeletCrashes())
	}
	crashes := n.KubeletCrashes()
	if len(crashes) != 1 || !strings.Contains(crashes[0], "fatal error: concurrent map iteration and map write") || !strings.Contains(crashes[0], "exit status 2") {
		t.Fatalf("crashes: %v", crashes)
	}
	n.stopKubelet()
	time.Sleep(300 * time.Millisecond)
	if n.Kubelet() != second || len(n.KubeletCrashes()) != 1 {
		t.Fatalf("a kubelet stopped on purpose was started again: %v", n.KubeletCrashes())
	}
}
