package errtext

import (
	"strings"
	"testing"
)

func TestFirstLineStopsAtTheNewlineAndShortens(t *testing.T) {
	if got := FirstLine("refused\nbody: secret"); got != "refused" {
		t.Errorf("FirstLine = %q, want %q", got, "refused")
	}
	long := strings.Repeat("x", maxLine+40)
	if got := FirstLine(long); len(got) != maxLine+3 || !strings.HasSuffix(got, "...") {
		t.Errorf("FirstLine of %d characters = %d characters %q, want %d ending in ...", len(long), len(got), got, maxLine+3)
	}
}

func TestURLDropsWhatMayCarryCredentials(t *testing.T) {
	for raw, want := range map[string]string{
		"https://user:pass@kcp.example.com:6443/clusters/root?token=t#f": "https://kcp.example.com:6443/clusters/root",
		"https://kcp.example.com": "https://kcp.example.com",
		"://":                     "(unparsable URL)",
	} {
		if got := URL(raw); got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestListSaysNoneWhenEmpty(t *testing.T) {
	if got := List(nil); got != "none" {
		t.Errorf("List(nil) = %q", got)
	}
	if got := List([]string{"a", "b"}); got != "a, b" {
		t.Errorf("List = %q", got)
	}
}
