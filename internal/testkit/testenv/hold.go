package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// ErrInterrupted is the cause of a run context ended by SIGINT or SIGTERM.
var ErrInterrupted = errors.New("interrupted")

// ErrDeadline is the cause of a run context that reached its end before the test
// binary's -timeout.
var ErrDeadline = errors.New("the test's -timeout is near")

// RunContext is the context of a long test: it ends `margin` before the test binary's
// -timeout (which would kill the binary with no clean-up), and at SIGINT or SIGTERM, so
// that the test stops and every clean-up runs. Without this, either signal ends the test
// binary at once and leaves its servers, mounts and network behind. context.Cause tells
// the two apart.
func RunContext(t *testing.T, margin time.Duration) context.Context {
	t.Helper()
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Hour)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	dctx, stop := context.WithDeadlineCause(ctx, deadline.Add(-margin), ErrDeadline)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-signals:
			t.Logf("%v: stopping the test; every clean-up runs", sig)
			fmt.Fprintf(os.Stderr, "%v: stopping the test; every clean-up runs\n", sig)
			cancel(fmt.Errorf("%w by %v", ErrInterrupted, sig))
		case <-done:
		}
	}()
	t.Cleanup(func() {
		signal.Stop(signals)
		close(done)
		stop()
		cancel(nil)
	})
	return dctx
}

// Hold writes the hold file and waits until someone removes it (nil) or ctx ends (its
// cause: an interrupt, or the test's -timeout drawing near).
func Hold(ctx context.Context, file string, content []byte) error {
	if err := os.WriteFile(file, content, 0o600); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		select {
		case <-ctx.Done():
			_ = os.Remove(file)
			return context.Cause(ctx)
		case <-time.After(time.Second):
		}
	}
}
