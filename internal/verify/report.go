package verify

import (
	"encoding/json"
	"fmt"
	"io"
)

// Report is the machine-readable outcome (-json).
type Report struct {
	Stack   string   `json:"stack"`
	Context string   `json:"context,omitempty"`
	Passed  bool     `json:"passed"`
	Strict  bool     `json:"strict"`
	Summary Summary  `json:"summary"`
	Results []Result `json:"results"`
}

// NewReport summarises results.
func NewReport(stack, kubeContext string, strict bool, results []Result) Report {
	if results == nil {
		results = []Result{}
	}
	return Report{
		Stack: stack, Context: kubeContext, Strict: strict,
		Passed: Passed(results, strict), Summary: Summarize(results), Results: results,
	}
}

// Symbol is the mark printed in front of a result.
func (s Status) Symbol() string {
	switch s {
	case StatusPass:
		return "✓"
	case StatusWarn:
		return "⚠"
	case StatusSkip:
		return "-"
	default:
		return "✗"
	}
}

// WriteText prints one line per result and a summary line.
func (r Report) WriteText(w io.Writer) error {
	for _, res := range r.Results {
		if _, err := fmt.Fprintf(w, "%s %-14s %s: %s\n", res.Status.Symbol(), res.Check, res.Item, res.Message); err != nil {
			return err
		}
	}
	verdict := "PASSED"
	if !r.Passed {
		verdict = "FAILED"
	}
	skipped := ""
	if r.Summary.Skip > 0 {
		skipped = fmt.Sprintf(", %d skipped (not verified)", r.Summary.Skip)
	}
	_, err := fmt.Fprintf(w, "%s: %d passed, %d warning(s), %d failed%s\n", verdict, r.Summary.Pass, r.Summary.Warn, r.Summary.Fail, skipped)
	return err
}

// WriteJSON prints the report as one indented JSON document.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
