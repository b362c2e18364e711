package config_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
)

// Each file that refuses config has a test file beside it with a table of refusals (at
// least one per rule it checks) and, where a rule has an edge, a table of acceptances.
// That a refused config makes the program declare nothing is the whole program's to
// show: tests/config_test.go.

// refusal is one config that a rule refuses: a shipped stack with an edit, and the key
// path, value and rule the error must name.
type refusal struct {
	name  string
	rule  string // config.Rule ID
	stack string
	edit  edit // nil: the shipped stack as it is
	// previous is what the stack's last up recorded, as its stack reference to itself
	// returns it (the rules that need the previous state).
	previous map[string]config.ShardEndpoint
	key      string
	value    string
	says     string // part of the error's wording
}

// acceptance is a config at the edge of a rule that the rule lets through: a shipped
// stack with an edit.
type acceptance struct {
	name  string
	stack string
	edit  edit
}

// refusals are the tables of refusals of the test files beside the files that refuse.
var refusals = [][]refusal{
	loadRefusals, decodeRefusals, platformRefusals, versionsRefusals, chartsRefusals, kcpRefusals,
	oidcRefusals, etcdRefusals, networkRefusals, hubRefusals, kindRefusals, gkeRefusals,
	collisionRefusals, previousStateRefusals,
}

// requireRefused asserts that each refusal is refused with an error that names its rule,
// key and value, in the one message style.
func requireRefused(t *testing.T, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.rule+"/"+tc.name, func(t *testing.T) {
			_, err := load(t, tc.stack, tc.edit, tc.previous)
			var invalid config.Errors
			require.ErrorAs(t, err, &invalid, "want config.Errors, got %v", err)
			var found bool
			for _, fe := range invalid {
				if fe.Key == tc.key && fe.RuleID == tc.rule {
					found = true
					require.Equal(t, tc.value, fe.Value, "value named by %s", tc.key)
					require.Contains(t, fe.Rule, tc.says)
					require.Contains(t, err.Error(), fmt.Sprintf("%s:%s = %q: ", config.Project, tc.key, tc.value))
				}
			}
			require.True(t, found, "no error of rule %s names %s; got:\n%v", tc.rule, tc.key, err)
		})
	}
}

// requireAccepted asserts that each acceptance passes validation.
func requireAccepted(t *testing.T, cases []acceptance) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.stack, tc.edit, nil)
			require.NoError(t, err)
		})
	}
}

// Every rule has a refusal in the tables above, and every refusal names a rule that
// exists: a rule added without a refusal test fails here.
func TestEveryRuleHasARefusalTest(t *testing.T) {
	rules := config.Rules()
	require.NotEmpty(t, rules)
	tested := map[string]int{}
	for _, table := range refusals {
		require.NotEmpty(t, table)
		for _, tc := range table {
			tested[tc.rule]++
		}
	}
	known := map[string]bool{}
	for _, r := range rules {
		require.False(t, known[r.ID], "rule %s is registered twice", r.ID)
		known[r.ID] = true
		require.NotEmpty(t, r.Keys, r.ID)
		require.NotEmpty(t, r.Refuses, r.ID)
		require.Positive(t, tested[r.ID], "rule %s (%s) has no refusal in the tables of refusals", r.ID, r.Refuses)
	}
	for id := range tested {
		require.True(t, known[id], "a refusal names rule %s, which config.Rules does not have", id)
	}
}
