package providerprobe

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Result is the outcome of one check.
type Result string

const (
	Pass Result = "pass"
	Fail Result = "fail"
	// NotRun: an earlier check this one needs failed, so it was not tried.
	NotRun Result = "not-run"
)

// Line is one line of the report: one check of a step, as a JSON object. Every request
// of a check goes to URL exactly as written there.
type Line struct {
	// Step is StepProviderPath or StepHubIdentity; Check names the check within it.
	Step  string `json:"step"`
	Check string `json:"check"`
	// URL is the URL the check followed (the one that decided its result).
	URL string `json:"url,omitempty"`
	// Identity is the user and groups kcp said it saw (SelfSubjectReview), when it said.
	Identity string `json:"identity,omitempty"`
	// Credential is the client certificate the probe presented: subject and issuer.
	Credential string `json:"credential,omitempty"`
	Result     Result `json:"result"`
	// Message says what was seen; Error, for a failed check, what went wrong, with kcp's
	// own error text.
	Message string  `json:"message,omitempty"`
	Error   string  `json:"error,omitempty"`
	Seconds float64 `json:"seconds"`
}

// Reporter writes each Line as one JSON line as soon as the check ends, so that a probe
// cut short still leaves what it found in the pod's log.
type Reporter struct {
	mu    sync.Mutex
	w     io.Writer
	lines []Line
}

// NewReporter writes to w.
func NewReporter(w io.Writer) *Reporter { return &Reporter{w: w} }

// Add writes l.
func (r *Reporter) Add(l Line) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, l)
	if r.w == nil {
		return
	}
	data, err := json.Marshal(l)
	if err != nil { // a Line is strings and a number: it always marshals
		panic(err)
	}
	fmt.Fprintf(r.w, "%s\n", data)
}

// Lines is every line written so far.
func (r *Reporter) Lines() []Line {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Line(nil), r.lines...)
}

// Failed reports whether any check failed or was not run.
func (r *Reporter) Failed() bool {
	for _, l := range r.Lines() {
		if l.Result != Pass {
			return true
		}
	}
	return false
}

// ParseReport reads the probe's lines back from a log that may hold other output
// (client-go's warnings go to stderr, which a pod's log mixes in): every line that is a
// JSON object with a step, a check and a result is a Line, and nothing else is.
func ParseReport(log string) []Line {
	var out []Line
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(text, "{") {
			continue
		}
		var l Line
		if err := json.Unmarshal([]byte(text), &l); err != nil || l.Step == "" || l.Check == "" || l.Result == "" {
			continue
		}
		out = append(out, l)
	}
	return out
}

// check times one check and turns its outcome into a Line.
type check struct {
	step, name string
	credential string
	started    time.Time
	url        string
	identity   string
}

func (c *check) line(result Result, message string, err error) Line {
	l := Line{
		Step: c.step, Check: c.name, URL: c.url, Identity: c.identity, Credential: c.credential,
		Result: result, Message: message, Seconds: roundSeconds(time.Since(c.started)),
	}
	if err != nil {
		l.Error = err.Error()
	}
	return l
}

func roundSeconds(d time.Duration) float64 {
	return float64(d.Round(10*time.Millisecond)) / float64(time.Second)
}
