//go:build !linux

package testenv

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// errLinuxOnly is what the parts that need Linux's namespaces and mounts return elsewhere.
var errLinuxOnly = errors.New("testenv: needs Linux (network namespaces, mounts, /proc)")

// SetProcessGroup does nothing off Linux: there is no parent-death signal there, and
// the servers are killed by the cleanups.
func SetProcessGroup(*exec.Cmd) {}

func terminateGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

// KillGroup kills the process (no process groups here).
func KillGroup(cmd *exec.Cmd) { terminateGroup(cmd) }

// KillTree kills the process (no /proc to find what it started).
func KillTree(cmd *exec.Cmd) { terminateGroup(cmd) }

// Descendants finds nothing (no /proc to read).
func Descendants(int) []int { return nil }

// setParentDeathSignal does nothing off Linux (see SetProcessGroup).
func setParentDeathSignal(*exec.Cmd) {}

// inNewNetworkNamespace refuses: network namespaces are Linux's.
func inNewNetworkNamespace(*exec.Cmd) error { return errLinuxOnly }

// killPID kills one process.
func killPID(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// processGone says whether no process pid exists (signal 0 checks without sending).
func processGone(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	defer p.Release()
	return p.Signal(syscall.Signal(0)) != nil
}

// lockFile refuses: the kernel tunables it guards are Linux's.
func lockFile(*os.File) error { return errLinuxOnly }

// detachMount refuses: the mounts it undoes are Linux's.
func detachMount(string) error { return errLinuxOnly }
