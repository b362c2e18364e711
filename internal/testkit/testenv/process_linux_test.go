//go:build linux

package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childPID starts a shell in its own group that starts `sleep` (behind prefix, such as
// setsid) and waits for it, and returns the shell and the sleep's pid.
func childPID(t *testing.T, prefix string) (*Process, int) {
	t.Helper()
	dir := t.TempDir()
	p, err := LaunchProcess("shell", "/bin/sh", filepath.Join(dir, "shell.log"), nil,
		"-c", prefix+" sleep 300 & echo $! > child.pid; wait")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	var pid int
	if err := WaitFor(context.Background(), 10*time.Second, p, func() (bool, error) {
		data, err := os.ReadFile(filepath.Join(dir, "child.pid"))
		if err != nil || !strings.HasSuffix(string(data), "\n") {
			return false, nil
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("kill", "-9", strconv.Itoa(pid)).Run() })
	return p, pid
}

// waitOwnSession waits until pid leads a session of its own. The shell writes the pid
// file once it has forked the child, which runs setsid only after that; until then the
// child is still in the shell's group, and killing the group would end it.
func waitOwnSession(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fields, err := statFields(pid)
		if err == nil && len(fields) > 3 && fields[3] == strconv.Itoa(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d has not left the shell's session after 10s (stat %v, %v)", pid, fields, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// goneWithin waits up to d for pid to be gone or a zombie (killed, not yet reaped).
func goneWithin(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		fields, err := statFields(pid)
		if err != nil || (len(fields) > 0 && fields[0] == "Z") {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// Stop ends what the server started in its group, not only the server.
func TestStopEndsTheWholeProcessGroup(t *testing.T) {
	p, child := childPID(t, "")
	p.Stop()
	if !p.Exited() {
		t.Error("the shell still runs after Stop")
	}
	if !goneWithin(child, 10*time.Second) {
		t.Errorf("its child %d still runs after Stop", child)
	}
}

// KillTree reaches a child that left the group (as the Pulumi CLI's plugins do), which
// killing the group does not.
func TestKillTreeEndsChildrenInOtherGroups(t *testing.T) {
	p, child := childPID(t, "setsid")
	waitOwnSession(t, child)
	KillGroup(p.cmd)
	<-p.Done()
	if goneWithin(child, time.Second) {
		t.Fatalf("killing the group ended the setsid child %d too; the test shows nothing", child)
	}
	p2, child2 := childPID(t, "setsid")
	waitOwnSession(t, child2)
	KillTree(p2.cmd)
	<-p2.Done()
	if !goneWithin(child2, 10*time.Second) {
		t.Errorf("the setsid child %d still runs after KillTree", child2)
	}
}

// WaitFor stops when the server exits, and says how it ended with the end of its log.
func TestWaitForReportsAnExitWithTheLog(t *testing.T) {
	dir := t.TempDir()
	p := StartProcess(t, "crasher", "/bin/sh", filepath.Join(dir, "crasher.log"), "-c", "echo first; echo last words; exit 3")
	start := time.Now()
	err := WaitFor(context.Background(), time.Minute, p, func() (bool, error) { return false, nil })
	if err == nil {
		t.Fatal("WaitFor returned nil for a check that never passes")
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("WaitFor took %s to see the exit", time.Since(start))
	}
	for _, want := range []string{"crasher exited", "exit status 3", "first\nlast words"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("WaitFor's error does not say %q: %v", want, err)
		}
	}
	if p.Err() == nil || p.Tail(1) != "last words" {
		t.Errorf("Err = %v, Tail(1) = %q", p.Err(), p.Tail(1))
	}
}
