package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The kubelet's kernel tunables are put back once, by the last holder, to what they were
// before the first: not to a value another node's kubelet wrote, and also when a holder
// was killed.
func TestKernelTunablesGoBackWhenTheLastHolderGoes(t *testing.T) {
	dir := t.TempDir()
	defer func(f, p string) { kernelTunablesFile, procSys = f, p }(kernelTunablesFile, procSys)
	kernelTunablesFile, procSys = filepath.Join(dir, "tunables.json"), filepath.Join(dir, "sys")
	key := kubeletSysctls[0]
	set := func(v string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(procSys, key)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(procSys, key), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	value := func() string {
		b, _ := os.ReadFile(filepath.Join(procSys, key))
		return strings.TrimSpace(string(b))
	}
	hold := func(pid int) func() {
		t.Helper()
		release, err := holdKernelTunablesAs(pid)
		if err != nil {
			t.Fatal(err)
		}
		return release
	}

	set("0")
	releaseFirst := hold(os.Getpid())
	set("1") // the first node's kubelet
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	hold(other.Process.Pid) // a second node, in another process, that is then killed
	releaseFirst()
	if got := value(); got != "1" {
		t.Fatalf("put back to %q while another holder ran", got)
	}
	_ = other.Process.Kill()
	_ = other.Wait()
	if got := value(); got != "1" {
		t.Fatalf("changed to %q with no holder going", got)
	}
	// The next run drops the killed holder; when it goes, what was there before the
	// first comes back.
	hold(os.Getpid())()
	if got := value(); got != "0" {
		t.Errorf("after the last holder: %q, want the value before the first, 0", got)
	}
	if b, err := os.ReadFile(kernelTunablesFile); err != nil || len(b) != 0 {
		t.Errorf("the record after the last holder: %q, %v; want it empty", b, err)
	}
}
