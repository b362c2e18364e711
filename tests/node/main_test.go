//go:build linux

package node

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

// TestMain runs the package's tests as machine "node" (testenv.RunOnOwnMachine): a
// network namespace of their own, with their own node lock, so that they run beside the
// end-to-end test's machines instead of waiting for its lock. Where they would only be
// skipped (-short, RAILGRID_SKIP_NODE, not root), and in the machine itself, they run here.
func TestMain(m *testing.M) {
	flag.Parse()
	if testenv.Machine() != "" || testing.Short() || os.Getenv(envSkip) == "1" || os.Geteuid() != 0 {
		os.Exit(m.Run())
	}
	os.Exit(runOnOwnMachine())
}

func runOnOwnMachine() int {
	pattern := flag.Lookup("test.run").Value.String()
	// This process runs no test, so the timeout is the machine's alone.
	timeout := flag.Lookup("test.timeout").Value.(flag.Getter).Get().(time.Duration)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	grace := 3 * time.Minute
	run, err := testenv.RunOnOwnMachine(ctx, "node", pattern, timeout, grace, os.Stdout)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		return 1
	case !run.Passed:
		fmt.Fprintf(os.Stderr, "on machine node: failed: %v\n", run.Failed)
		return 1
	}
	return 0
}
