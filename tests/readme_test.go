package tests

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite README.md's table of config rules from config.Rules")

const (
	rulesBegin = "<!-- config rules: begin -->\n"
	rulesEnd   = "<!-- config rules: end -->"
)

// README.md's table of what the config refuses is the table config.Rules generates: a
// rule added, changed or removed without the README fails here.
func TestREADMEListsEveryRule(t *testing.T) {
	path := filepath.Join("..", "README.md")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	readme := string(data)
	begin, end := strings.Index(readme, rulesBegin), strings.Index(readme, rulesEnd)
	require.True(t, begin >= 0 && end > begin, "README.md lacks the markers %q and %q", rulesBegin, rulesEnd)
	want := config.RulesMarkdown()
	for _, r := range config.Rules() {
		require.Contains(t, want, "| `"+r.ID+"` |", "the generated table lacks rule %s", r.ID)
	}
	if *updateREADME {
		readme = readme[:begin+len(rulesBegin)] + want + readme[end:]
		require.NoError(t, os.WriteFile(path, []byte(readme), 0o644))
		return
	}
	require.Equal(t, want, readme[begin+len(rulesBegin):end],
		"README.md's table of config rules differs from config.Rules; run go test ./tests -run TestREADMEListsEveryRule -update-readme")
}
