//go:build !linux

package testenv

import "os/exec"

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
