package testenv

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Process is a server started by a test, in its own process group, its output in a
// log file.
type Process struct {
	// Name says which server it is in errors and logs.
	Name string
	// LogPath is the file that holds its stdout and stderr.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess starts bin with its output in logPath; the process group is stopped
// when the test (or subtest) ends, whatever the outcome.
func StartProcess(t *testing.T, name, bin, logPath string, args ...string) *Process {
	t.Helper()
	p, err := LaunchProcess(name, bin, logPath, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// LaunchProcess starts bin (with extra environment variables) in its own process
// group, its output in logPath, in logPath's directory; the caller stops it. It is for
// a server whose lifetime is not a test's, such as one restarted like a pod.
func LaunchProcess(name, bin, logPath string, env []string, args ...string) (*Process, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = filepath.Dir(logPath)
	cmd.Stdout, cmd.Stderr = f, f
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	SetProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Pid is the process's id, e.g. to enter the namespaces it runs in.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended (nil for exit status 0); it is nil while it runs.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Stop terminates the process group, then kills it if it has not exited in 10 s. Whatever
// the server left in its group is killed too.
func (p *Process) Stop() {
	if !p.Exited() {
		terminateGroup(p.cmd)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			KillGroup(p.cmd)
			<-p.done
		}
	}
	KillGroup(p.cmd)
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string { return tailFile(p.LogPath, n) }

// tailFile returns the last n lines of a file, or the error reading it. Lines of up to
// 4 MiB are read whole: controllers log whole objects on one line.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// WaitFor polls check every 250 ms until it returns true or an error, the timeout
// passes, ctx ends or proc (if not nil) exits; an exit is reported with the end of
// proc's log, so that a crashed server explains itself.
func WaitFor(ctx context.Context, timeout time.Duration, proc *Process, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := check()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if proc != nil && proc.Exited() {
			return fmt.Errorf("%s exited: %v\n%s", proc.Name, proc.err, proc.Tail(30))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
