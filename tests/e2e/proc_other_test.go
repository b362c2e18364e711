//go:build !linux

package e2e

import "os/exec"

// Off Linux there is no parent-death signal; the servers are killed by the cleanups.
func setProcessGroup(*exec.Cmd) {}

func terminateGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

func killGroup(cmd *exec.Cmd) { terminateGroup(cmd) }

func killTree(cmd *exec.Cmd) { terminateGroup(cmd) }
