package config

import (
	"fmt"
	"strings"
)

// FieldError is one refused config value: the key (as written in the stack file, with
// the project prefix), the value and the rule it breaks.
type FieldError struct {
	Key   string
	Value string
	Rule  string
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

func (e *Errors) add(key, value, rule string) {
	*e = append(*e, FieldError{Key: key, Value: value, Rule: rule})
}

func (e Errors) orNil() error {
	if len(e) == 0 {
		return nil
	}
	return e
}
