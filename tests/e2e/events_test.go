//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/railgrid/railgrid-kcp/naming"
)

// stdoutOf returns the CLI's stdout from an Automation API error.
func stdoutOf(err error) string {
	msg := err.Error()
	i := strings.Index(msg, "stdout: ")
	if i < 0 {
		return ""
	}
	msg = msg[i+len("stdout: "):]
	if j := strings.Index(msg, "stderr: "); j >= 0 {
		msg = msg[:j]
	}
	return msg
}

// stderrOf returns the CLI's stderr from an Automation API error, or the error.
func stderrOf(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "stderr: "); i >= 0 {
		return strings.TrimSpace(msg[i+len("stderr: "):])
	}
	return msg
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "\n"); i >= 0 {
		return s[:i]
	}
	return s
}

// eventLog is the engine events of one operation, in order.
type eventLog struct {
	mu     sync.Mutex
	events []apitype.EngineEvent
}

// slowest names the n resource steps that took longest, from the engine's pre event to
// the step's outputs (whole seconds: the events' resolution), components aside (they
// span their children): where an up's time went.
func (l *eventLog) slowest(n int) string {
	started := map[string]int{}
	type took struct {
		urn  string
		secs int
	}
	var steps []took
	for _, ev := range l.all() {
		if pre := ev.ResourcePreEvent; pre != nil && pre.Metadata.Provider != "" && pre.Metadata.Op != "same" && pre.Metadata.Op != "read" {
			started[pre.Metadata.URN] = ev.Timestamp
		}
		if out := ev.ResOutputsEvent; out != nil {
			if at, ok := started[out.Metadata.URN]; ok {
				steps = append(steps, took{out.Metadata.URN, ev.Timestamp - at})
			}
		}
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].secs > steps[j].secs })
	var parts []string
	for _, s := range steps[:min(n, len(steps))] {
		parts = append(parts, fmt.Sprintf("%s %ds", shortURN(s.urn), s.secs))
	}
	return strings.Join(parts, ", ")
}

func (l *eventLog) all() []apitype.EngineEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]apitype.EngineEvent(nil), l.events...)
}

// collect starts reading an event channel into the log, calling onEvent for each
// event; the returned wait blocks until the stream closes (or 15 s).
func (l *eventLog) collect(onEvent func(apitype.EngineEvent)) (chan events.EngineEvent, func()) {
	ch := make(chan events.EngineEvent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range ch {
			if e.Error != nil {
				continue
			}
			l.mu.Lock()
			l.events = append(l.events, e.EngineEvent)
			l.mu.Unlock()
			if onEvent != nil {
				onEvent(e.EngineEvent)
			}
		}
	}()
	return ch, func() {
		select {
		case <-done:
		case <-time.After(15 * time.Second):
		}
	}
}

// engineStep is one resource step seen in the events.
type engineStep struct {
	urn, op  string
	pre, out int // sequence numbers of the ResourcePreEvent and ResOutputsEvent (0: none)
	outputs  map[string]any
}

// steps indexes the resource steps of an event log by URN (the first step per URN).
func (l *eventLog) steps() map[string]*engineStep {
	out := map[string]*engineStep{}
	for _, e := range l.all() {
		switch {
		case e.ResourcePreEvent != nil:
			m := e.ResourcePreEvent.Metadata
			if _, ok := out[m.URN]; !ok {
				out[m.URN] = &engineStep{urn: m.URN, op: string(m.Op), pre: e.Sequence}
			}
		case e.ResOutputsEvent != nil:
			m := e.ResOutputsEvent.Metadata
			st, ok := out[m.URN]
			if !ok {
				st = &engineStep{urn: m.URN, op: string(m.Op)}
				out[m.URN] = st
			}
			if st.out == 0 {
				st.out = e.Sequence
				if m.New != nil {
					st.outputs = m.New.Outputs
				}
			}
		}
	}
	return out
}

// opsByURN lists every operation of every resource in the log ("create", "update",
// "replace", "delete-replaced", ...).
func (l *eventLog) opsByURN() map[string][]string {
	out := map[string][]string{}
	for _, e := range l.all() {
		if e.ResourcePreEvent != nil {
			m := e.ResourcePreEvent.Metadata
			out[m.URN] = append(out[m.URN], string(m.Op))
		}
	}
	return out
}

// diagnostics returns the error and warning messages of the log.
func (l *eventLog) diagnostics() []string {
	var out []string
	for _, e := range l.all() {
		if d := e.DiagnosticEvent; d != nil && (d.Severity == "error" || d.Severity == "warning") {
			out = append(out, fmt.Sprintf("%s %s: %s", d.Severity, shortURN(d.URN), strings.TrimSpace(d.Message)))
		}
	}
	return out
}

// changeCounts renders an operation summary deterministically.
func changeCounts[K ~string](m map[K]int) string {
	var keys []string
	for k, n := range m {
		keys = append(keys, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(keys)
	return strings.Join(keys, " ")
}

// shortURN drops the stack and project from a URN for messages.
func shortURN(urn string) string {
	if i := strings.LastIndex(urn, "::"); i >= 0 {
		typ := urn[:i]
		if j := strings.LastIndex(typ, "$"); j >= 0 {
			typ = typ[j+1:]
		} else if j := strings.LastIndex(typ, "::"); j >= 0 {
			typ = typ[j+2:]
		}
		return typ + "::" + urn[i+2:]
	}
	return urn
}

// outputsLine is a one-line description of an UpResult summary.
func summaryOf(s auto.UpdateSummary) map[string]int {
	if s.ResourceChanges == nil {
		return map[string]int{}
	}
	return *s.ResourceChanges
}

func indent(lines []string) string {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString("\n    ")
		b.WriteString(l)
	}
	return b.String()
}

// checkOrder checks, from the engine's events, that every kcp object's create started
// only after what it needs had finished (and, for kcp objects, was reported Available).
func checkOrder(t *testing.T, p rendered, log *eventLog) {
	t.Helper()
	steps := log.steps()
	rs := p.urnOf("RootShard", naming.RootShardName)
	sh := p.urnOf("Shard", "alpha")
	fp := p.urnOf("FrontProxy", naming.FrontProxyName)
	// The Kubeconfig of the config's re-mint generation (interruptedUp runs after two).
	kc := p.urnOf("Kubeconfig", naming.KubeconfigObjectName(p.cfg.Hub.RemintGeneration))
	hub := p.urnOf("Secret", p.cfg.Hub.SecretName)
	rules := []struct {
		dependent string
		needs     []string
	}{
		{rs, []string{p.releaseURN(), p.urnOf("Issuer", naming.SelfSignedIssuer), p.urnOf("StatefulSet", naming.EtcdName(naming.RootShardName))}},
		{sh, []string{rs, p.urnOf("StatefulSet", naming.EtcdName("alpha"))}},
		{fp, []string{rs}},
		{kc, []string{fp}},
		{hub, []string{kc}},
	}
	// The add-ons the stack installs (none in killed-up's plan for cert-manager): the
	// issuer needs cert-manager's webhook serving, the edge Envoy Gateway's CRDs.
	if cm := p.releaseURNOf("cert-manager"); cm != "" {
		rules = append(rules, struct {
			dependent string
			needs     []string
		}{p.urnOf("Issuer", naming.SelfSignedIssuer), []string{cm}})
	}
	if eg := p.releaseURNOf("envoy-gateway"); eg != "" {
		rules = append(rules, struct {
			dependent string
			needs     []string
		}{p.urnOf("Gateway", naming.EdgeGatewayName), []string{eg}})
	}
	var timeline []string
	for _, r := range rules {
		d := steps[r.dependent]
		if r.dependent == "" || d == nil || d.pre == 0 {
			t.Errorf("no create of %s in the up's events", shortURN(r.dependent))
			continue
		}
		for _, need := range r.needs {
			n := steps[need]
			switch {
			case need == "":
				t.Errorf("%s: a dependency is missing from the offline plan", shortURN(r.dependent))
			case n == nil || n.out == 0:
				t.Errorf("%s was created, but %s never finished", shortURN(r.dependent), shortURN(need))
			case n.out > d.pre:
				t.Errorf("%s was created (event %d) before %s had finished (event %d)", shortURN(r.dependent), d.pre, shortURN(need), n.out)
			default:
				timeline = append(timeline, fmt.Sprintf("%s finished (event %d) before %s started (event %d)", shortURN(need), n.out, shortURN(r.dependent), d.pre))
			}
		}
	}
	// The engine recorded each kcp object as Available: its wait did hold.
	for _, urn := range []string{rs, sh, fp, kc} {
		st := steps[urn]
		if st == nil || st.outputs == nil {
			continue
		}
		obj := &unstructured.Unstructured{Object: st.outputs}
		if !isAvailable(obj) {
			t.Errorf("%s finished without being Available: status %s", shortURN(urn), compact(st.outputs["status"]))
		}
	}
	t.Logf("order:%s", indent(timeline))
}
