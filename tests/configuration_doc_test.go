package tests

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
)

// docs/configuration.md's table of what the config refuses is the table config.Rules
// generates: a rule added, changed or removed without the document fails here.
func TestConfigurationDocListsEveryRule(t *testing.T) {
	want := config.RulesMarkdown()
	for _, r := range config.Rules() {
		require.Contains(t, want, "| `"+r.ID+"` |", "the generated table lacks rule %s", r.ID)
	}
	generatedBlock(t, "docs/configuration.md", "config rules", want,
		"go test ./tests -run TestConfigurationDocListsEveryRule -update-docs")
}
