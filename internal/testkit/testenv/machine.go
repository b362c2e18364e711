package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// EnvMachine names the machine this test process runs as: a network namespace of its
// own that its parent made (RunOnOwnMachine), with its own loopback, bridge, routes and
// iptables, so that a node runs in it beside another on the host's network. Unset, the
// process runs on the host's network.
const EnvMachine = "RAILGRID_MACHINE"

// Machine is the name of the machine this process runs as, "" on the host's network.
func Machine() string { return os.Getenv(EnvMachine) }

// MachineScoped is name on the host's network and name-<machine> on a machine of its
// own: for what lives outside the network namespace (a lock file, a named test host's
// namespace) and so must differ between machines that run side by side.
func MachineScoped(name string) string {
	if m := Machine(); m != "" {
		return name + "-" + m
	}
	return name
}

// MachineRun is what a test binary run again as a machine of its own reported.
type MachineRun struct {
	// Failed are the tests that failed in it ("--- FAIL:" lines), outermost first.
	Failed []string
	// Passed reports whether it exited 0.
	Passed bool
}

// RunOnOwnMachine runs this test binary again with -test.run pattern as machine name: in
// a new network namespace, which holds only its loopback (brought up before the binary
// starts), so nothing in it reaches the host's network or any other. Its output goes to
// out as it comes, each line prefixed with [name]. timeout is its -test.timeout; when
// ctx ends it gets SIGTERM, and grace to finish its clean-ups. An error means it could
// not start or was killed.
func RunOnOwnMachine(ctx context.Context, name, pattern string, timeout, grace time.Duration, out io.Writer) (MachineRun, error) {
	exe, err := os.Executable()
	if err != nil {
		return MachineRun{}, err
	}
	args := []string{"-c", `ip link set lo up && exec "$@"`, "sh", exe,
		"-test.run", pattern, "-test.v", "-test.count=1", "-test.timeout", timeout.String()}
	cmd := exec.CommandContext(ctx, "sh", args...)
	cmd.Env = append(os.Environ(), EnvMachine+"="+name)
	if err := inNewNetworkNamespace(cmd); err != nil {
		return MachineRun{}, err
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = grace
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return MachineRun{}, fmt.Errorf("starting machine %s: %w", name, err)
	}
	var run MachineRun
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		run.Failed = copyLines(r, out, "["+name+"] ")
	}()
	err = cmd.Wait()
	w.Close()
	wg.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		run.Passed = true
	case errors.As(err, &exit) && exit.Exited():
		err = nil // it ran and failed: run.Failed says what
	default:
		err = fmt.Errorf("machine %s: %w", name, err)
	}
	return run, err
}

var failLine = regexp.MustCompile(`^\s*--- FAIL: (\S+)`)

// copyLines copies r to out line by line behind prefix, and returns the tests whose
// "--- FAIL:" lines it saw, outermost first.
func copyLines(r io.Reader, out io.Writer, prefix string) []string {
	var failed []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(out, prefix+line)
		if m := failLine.FindStringSubmatch(line); m != nil {
			failed = append(failed, m[1])
		}
	}
	_, _ = io.Copy(io.Discard, r)
	slices.SortStableFunc(failed, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	return failed
}
