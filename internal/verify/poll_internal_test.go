package verify

import (
	"context"
	"strings"
	"testing"
	"time"
)

// An attempt cut short by the deadline does not hide the previous attempt's reason.
func TestPollKeepsTheLastCompleteAttempt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	attempts := 0
	got := poll(ctx, time.Millisecond, func(ctx context.Context) []Result {
		attempts++
		if attempts == 1 {
			return []Result{fail("c", "i", "1 of 2 replicas ready")}
		}
		<-ctx.Done()
		return []Result{fail("c", "i", "context deadline exceeded")}
	})
	if len(got) != 1 || !strings.HasPrefix(got[0].Message, "1 of 2 replicas ready (still failing when the check timed out, after 2 attempt(s))") {
		t.Fatalf("got %+v", got)
	}
}

// timerLagContext has a deadline whose timer fires late: Err stays nil for a while
// after the deadline.
type timerLagContext struct {
	context.Context
	deadline time.Time
}

func (c timerLagContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c timerLagContext) Err() error {
	if time.Now().After(c.deadline.Add(time.Second)) {
		return context.DeadlineExceeded
	}
	return nil
}

// An attempt that fails at the deadline, before ctx.Err says so, counts as cut short too.
func TestPollKeepsTheLastCompleteAttemptWhenTheDeadlinePassedFirst(t *testing.T) {
	t.Parallel()
	ctx := timerLagContext{Context: context.Background(), deadline: time.Now().Add(30 * time.Millisecond)}
	attempts := 0
	got := poll(ctx, time.Millisecond, func(context.Context) []Result {
		attempts++
		if attempts == 1 {
			return []Result{fail("c", "i", "kcp answered 401")}
		}
		time.Sleep(time.Until(ctx.deadline))
		return []Result{fail("c", "i", "rate: Wait(n=1) would exceed context deadline")}
	})
	if len(got) != 1 || !strings.HasPrefix(got[0].Message, "kcp answered 401 (still failing when the check timed out, after 2 attempt(s))") {
		t.Fatalf("got %+v", got)
	}
}

func TestPollStopsAtTheFirstSuccess(t *testing.T) {
	t.Parallel()
	attempts := 0
	got := poll(context.Background(), time.Millisecond, func(context.Context) []Result {
		attempts++
		if attempts < 3 {
			return []Result{fail("c", "i", "not yet")}
		}
		return []Result{pass("c", "i", "ok"), warn("c", "j", "soon")}
	})
	if attempts != 3 || len(got) != 2 || got[0].Status != StatusPass {
		t.Fatalf("attempts %d, got %+v", attempts, got)
	}
}

func TestParseNslookupSkipsTheServerAndIPv6(t *testing.T) {
	t.Parallel()
	out := parseNslookup(strings.Join([]string{
		"@@@ begin a.example.com",
		"Server:\t\t10.96.0.10",
		"Address:\t10.96.0.10:53",
		"",
		"Non-authoritative answer:",
		"Name:\ta.example.com.default.svc.cluster.local",
		"Address: 10.96.0.200",
		"Name:\ta.example.com",
		"Address: 10.96.0.101",
		"Name:\ta.example.com",
		"Address: fd00::1",
		"",
		"@@@ end a.example.com rc=0",
		"@@@ begin b.example.com",
		";; connection timed out; no servers could be reached",
		"@@@ end b.example.com rc=1",
	}, "\n"))
	if a := out["a.example.com"]; len(a.ips) != 1 || a.ips[0] != "10.96.0.101" {
		t.Errorf("a: %+v", a)
	}
	if b := out["b.example.com"]; len(b.ips) != 0 || !strings.Contains(b.reason(), "connection timed out") || !strings.Contains(b.reason(), "exit status 1") {
		t.Errorf("b: %+v (%s)", b, b.reason())
	}
}
