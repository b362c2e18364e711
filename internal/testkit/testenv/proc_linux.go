//go:build linux

package testenv

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// SetProcessGroup makes cmd start in its own process group, so that stopping it also
// stops anything it started, and has the kernel kill it if the test binary dies (for
// example on a go test -timeout) before the cleanups run.
func SetProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// terminateGroup asks cmd's process group to stop (SIGTERM).
func terminateGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
}

// KillGroup kills cmd's process group (SIGKILL).
func KillGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// KillTree kills a process, its group and every process below it. The Pulumi CLI
// starts its plugins in process groups of their own, so killing the CLI's group alone
// would leave the provider running.
func KillTree(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	for _, pid := range Descendants(cmd.Process.Pid) {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // the group it leads, if any (plugins do)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	KillGroup(cmd)
}

// Descendants returns the pids of every process below pid, from /proc.
func Descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces and parentheses.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndex(s, ")")+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			out = append(out, c)
			walk(c)
		}
	}
	walk(pid)
	return out
}

// setParentDeathSignal has the kernel kill cmd if the test binary dies first.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// inNewNetworkNamespace starts cmd in a network namespace of its own.
func inNewNetworkNamespace(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	return nil
}

// killPID kills one process (SIGKILL).
func killPID(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }

// processGone says whether no process pid exists.
func processGone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }

// lockFile takes an exclusive lock on f, held until f is closed.
func lockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }

// detachMount unmounts p lazily (MNT_DETACH); a point that is not mounted, or not there,
// is not an error.
func detachMount(p string) error {
	if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
		return err
	}
	return nil
}
