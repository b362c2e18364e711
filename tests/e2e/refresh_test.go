//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

// refreshTimeout bounds a refresh: it reads every resource of the stack back.
const refreshTimeout = 4 * time.Minute

// checkRefreshFindsNothing runs what Pulumi's own program tests run after every up:
// `pulumi refresh --expect-no-changes`, then `pulumi preview --expect-no-changes`. A
// provider default the program does not declare, or a field a controller rewrites,
// shows up here as a change (docs/operations.md, "Drift").
func checkRefreshFindsNothing(t *testing.T, ctx context.Context, s *e2eStack, label string) {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	start := time.Now()
	res, log, err := s.refresh(rctx, optrefresh.ExpectNoChanges())
	took := time.Since(start).Round(100 * time.Millisecond)
	if changed := refreshChanges(log); err != nil || len(changed) > 0 {
		t.Errorf("%s: pulumi refresh --expect-no-changes found changes in %s (%v):%s%s", label, took,
			firstLine(fmt.Sprint(err)), indent(describeRefresh(changed)), indent(log.diagnostics()))
	} else {
		t.Logf("%s: pulumi refresh --expect-no-changes passed in %s: %s", label, took, changeCounts(summaryOf(res.Summary)))
	}
	pctx, cancel := context.WithTimeout(ctx, previewTimeout)
	defer cancel()
	pres, plog, err := s.preview(pctx, optpreview.ExpectNoChanges(), optpreview.Diff())
	if changed := changedURNs(plog); err != nil || len(changed) > 0 {
		t.Errorf("%s: pulumi preview --expect-no-changes after the refresh (%v):%s%s\n%s", label, firstLine(fmt.Sprint(err)),
			indent(describe(changed)), indent(plog.diagnostics()), changedLines(pres.StdOut+stdoutOf(err)))
	} else {
		t.Logf("%s: pulumi preview --expect-no-changes passed: %s", label, changeCounts(pres.ChangeSummary))
	}
}

// refreshChange is what a refresh found of one resource: its operation and the
// properties that differ from the last inputs.
type refreshChange struct {
	op    apitype.OpType
	diffs []string
}

// refreshChanges returns the resources a refresh (or a refresh preview) found changed:
// a step whose operation is not "same" or "read", or a refresh step with differences.
func refreshChanges(log *eventLog) map[string]refreshChange {
	out := map[string]refreshChange{}
	for _, e := range log.all() {
		var m *apitype.StepEventMetadata
		switch {
		case e.ResOutputsEvent != nil:
			m = &e.ResOutputsEvent.Metadata
		case e.ResourcePreEvent != nil:
			m = &e.ResourcePreEvent.Metadata
		default:
			continue
		}
		diffs := slices.Clone(m.Diffs)
		for path := range m.DetailedDiff {
			if !slices.Contains(diffs, path) {
				diffs = append(diffs, path)
			}
		}
		switch {
		case m.Op == apitype.OpSame || m.Op == apitype.OpRead:
		case m.Op == apitype.OpRefresh && len(diffs) == 0 && m.New != nil:
		default:
			c := out[m.URN]
			c.op = m.Op
			for _, d := range diffs {
				if !slices.Contains(c.diffs, d) {
					c.diffs = append(c.diffs, d)
				}
			}
			if m.New == nil && m.Op == apitype.OpRefresh {
				c.op = apitype.OpDelete
			}
			out[m.URN] = c
		}
	}
	return out
}

func describeRefresh(changed map[string]refreshChange) []string {
	var out []string
	for urn, c := range changed {
		slices.Sort(c.diffs)
		out = append(out, fmt.Sprintf("%s %s %v", c.op, shortURN(urn), c.diffs))
	}
	slices.Sort(out)
	return out
}
