package tests

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
)

// Stacks are run once per test binary: the composition is deterministic.
var (
	stackOnce   = map[string]*sync.Once{"kind": {}, "gke": {}}
	stackResult = map[string]*mockstack.Recording{}
	stackErr    = map[string]error{}
)

// stackFile is the path of a shipped Pulumi.<stack>.yaml.
func stackFile(stack string) string { return filepath.Join("..", "Pulumi."+stack+".yaml") }

// runStack runs the real composition of a shipped stack under mocks.
func runStack(t *testing.T, stack string) *mockstack.Recording {
	t.Helper()
	stackOnce[stack].Do(func() {
		stackResult[stack], stackErr[stack] = mockstack.RunStackFile(stack, stackFile(stack), mockstack.Options{})
	})
	require.NoError(t, stackErr[stack])
	return stackResult[stack]
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }

func TestBothStacksEvaluate(t *testing.T) {
	for _, stack := range []string{"kind", "gke"} {
		rec := runStack(t, stack)
		require.NotEmpty(t, rec.Resources, stack)
		for _, r := range rec.Resources {
			t.Logf("%s %s parent=%s deps=%d", stack, r.URN, r.Parent, len(r.Dependencies))
		}
	}
}
