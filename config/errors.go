package config

import (
	"fmt"
	"strings"
)

// FieldError is one refused config value: the key path (as written in the stack file,
// shown with the project prefix), the value, and the rule it breaks (Rule says it for
// this value; RuleID names the entry of Rules).
type FieldError struct {
	Key    string
	Value  string
	Rule   string
	RuleID string
}

func (e FieldError) Error() string {
	return fmt.Sprintf("%s:%s = %q: %s", Project, e.Key, e.Value, e.Rule)
}

// Errors is every problem found in one configuration; they are reported together.
type Errors []FieldError

func (e Errors) Error() string {
	lines := make([]string, 0, len(e)+1)
	lines = append(lines, fmt.Sprintf("invalid stack configuration (%d problem(s)):", len(e)))
	for _, fe := range e {
		lines = append(lines, "  - "+fe.Error())
	}
	return strings.Join(lines, "\n")
}

// add refuses value at key for rule, in the rule's own words.
func (e *Errors) add(rule *Rule, key, value string) {
	*e = append(*e, FieldError{Key: key, Value: value, Rule: rule.Refuses, RuleID: rule.ID})
}

// addf refuses value at key for rule, in words specific to this value.
func (e *Errors) addf(rule *Rule, key, value, format string, args ...any) {
	*e = append(*e, FieldError{Key: key, Value: value, Rule: fmt.Sprintf(format, args...), RuleID: rule.ID})
}

func (e Errors) orNil() error {
	if len(e) == 0 {
		return nil
	}
	return e
}
