//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
)

// changedLines keeps the lines of a --diff preview that describe changes.
func changedLines(out string) string {
	var keep []string
	inChange := false
	for _, line := range strings.Split(out, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "~ ") || strings.HasPrefix(trimmed, "+- ") || strings.HasPrefix(trimmed, "- ") ||
			strings.HasPrefix(trimmed, "+ ") || strings.HasPrefix(trimmed, "-+ ") || strings.HasPrefix(trimmed, "~") && strings.Contains(trimmed, ":"):
			inChange = true
			keep = append(keep, line)
		case trimmed == "":
			inChange = false
		case inChange:
			keep = append(keep, line)
		}
		if len(keep) > 80 {
			break
		}
	}
	return strings.Join(keep, "\n")
}

// drift is what step 5 found changing when nothing was changed (a program bug it
// reports); the later "no changes" checks tolerate exactly those resources, so that one
// bug fails one step.
var drift = &knownDrift{urns: map[string]bool{}}

type knownDrift struct {
	mu   sync.Mutex
	urns map[string]bool
}

func (d *knownDrift) add(changed map[string][]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for urn := range changed {
		d.urns[urn] = true
	}
}

func (d *knownDrift) has(urn string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.urns[urn]
}

// changedURNs returns the resources a preview or update changes, with their operations.
// The refresh steps of an up --refresh change nothing themselves: what they find shows
// in the steps that follow them.
func changedURNs(log *eventLog) map[string][]string {
	out := map[string][]string{}
	for urn, ops := range log.opsByURN() {
		for _, op := range ops {
			if op != "same" && op != "read" && op != "refresh" {
				out[urn] = append(out[urn], op)
			}
		}
	}
	return out
}

func describe(changed map[string][]string) []string {
	var out []string
	for urn, ops := range changed {
		out = append(out, strings.Join(ops, ",")+" "+shortURN(urn))
	}
	slices.Sort(out)
	return out
}

// checkNoChanges runs a preview that must report no changes, other than the perpetual
// diffs step 5 reported.
func checkNoChanges(t *testing.T, ctx context.Context, s *e2eStack, label string) {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, previewTimeout)
	defer cancel()
	res, log, err := s.preview(pctx, optpreview.ExpectNoChanges(), optpreview.Diff())
	changed := changedURNs(log)
	var known []string
	for urn := range changed {
		if drift.has(urn) {
			known = append(known, shortURN(urn))
			delete(changed, urn)
		}
	}
	if len(changed) > 0 || (err != nil && len(known) == 0) {
		t.Errorf("the %s preview expected no changes (%v):%s%s\n%s", label, firstLine(fmt.Sprint(err)), indent(describe(changed)),
			indent(log.diagnostics()), changedLines(res.StdOut+stdoutOf(err)))
		return
	}
	if len(known) > 0 {
		t.Logf("%s preview: no changes apart from the perpetual diff reported by step 5 (%v)", label, known)
		return
	}
	t.Logf("%s preview: %s", label, changeCounts(res.ChangeSummary))
}

func changedOps[K ~string](m map[K]int) []string {
	var out []string
	for op, n := range m {
		if op != "same" && op != "read" && n > 0 {
			out = append(out, fmt.Sprintf("%s=%d", op, n))
		}
	}
	slices.Sort(out)
	return out
}
