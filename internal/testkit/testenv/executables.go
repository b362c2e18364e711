package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Executables finds the programs a test runs. A miss is remembered rather than fatal at
// once, so that one failure names everything that is missing.
type Executables struct{ missing []string }

// Find returns the executable $env names, when env is not "" and the variable is set,
// or else name's path on PATH. It returns "" for a miss, which Require then reports.
func (e *Executables) Find(name, env string) string {
	if env != "" {
		if p := os.Getenv(env); p != "" {
			if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
				e.missing = append(e.missing, fmt.Sprintf("$%s=%s is not an executable file", env, p))
				return ""
			}
			return p
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		if env != "" {
			e.missing = append(e.missing, fmt.Sprintf("%s is not on PATH and $%s is not set", name, env))
		} else {
			e.missing = append(e.missing, name+" is not on PATH")
		}
		return ""
	}
	return p
}

// Require fails the test if any Find missed: a run that silently does nothing would
// read as a pass. The message names each miss, how to get the programs (howToGet) and
// the variable that skips the test instead.
func (e *Executables) Require(t testing.TB, test, howToGet, skipEnv string) {
	t.Helper()
	if len(e.missing) > 0 {
		t.Fatalf("%s cannot run: %s.\n%s; set %s=1 to skip this test", test, strings.Join(e.missing, "; "), howToGet, skipEnv)
	}
}
