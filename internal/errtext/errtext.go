// Package errtext shapes what an error message or a report line shows of text it did
// not write: an error's first line, a URL without its credentials, a list that may be
// empty.
package errtext

import (
	"net/url"
	"strings"
)

// maxLine is how much of an error's first line a message quotes.
const maxLine = 160

// FirstLine is s up to its first newline, shortened to maxLine characters: enough to
// name the cause, not a whole response body.
func FirstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > maxLine {
		s = s[:maxLine] + "..."
	}
	return s
}

// URL is raw without user info, query and fragment, which may carry credentials.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// List joins items with commas, or says "none".
func List(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}
