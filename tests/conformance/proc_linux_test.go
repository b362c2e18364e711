//go:build linux

package conformance

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts the server in its own process group, so that stopping it also
// stops anything it started, and has the kernel kill it if the test binary dies (for
// example on a go test -timeout) before the cleanups run.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func terminateGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
