package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/internal/plan"
)

// README.md draws each stack's dependency graph as `cmd/plan -format mermaid` prints it
// (the graph of -format graph folded into the components), generated here from the
// program so that it cannot go stale.
func TestREADMEShowsEachStacksDependencyGraph(t *testing.T) {
	for _, stack := range stacks {
		var b bytes.Buffer
		require.NoError(t, plan.WriteMermaid(&b, runStack(t, stack)))
		graph := b.String()
		for _, want := range []string{"flowchart LR\n", "KcpRootShard railgrid-kcp-root", "KcpShard railgrid-kcp-shard-alpha", "FrontProxy railgrid-kcp-frontproxy",
			"HubKubeconfig railgrid-kcp-hub", "KcpEdge railgrid-kcp-edge", "critical path (bold): StatefulSet etcd-root, RootShard root"} {
			require.Contains(t, graph, want, stack)
		}
		generatedBlock(t, "README.md", "dependency graph: "+stack, "```mermaid\n"+graph+"```\n",
			"go test ./tests -run TestREADMEShowsEachStacksDependencyGraph -update-docs")
	}
}

// The README's test command is the one .ci/run runs: the same tool groups on PATH, go vet
// of every package, then the same go test line, with the build flags of hack/goflags.sh.
func TestREADMERunsTheTestsAsCIDoes(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	ci := readRepoFile(t, ".ci/run")

	ciTools := regexp.MustCompile(`(?m)^tools=\(([^)]*)\)$`).FindStringSubmatch(ci)
	require.NotNil(t, ciTools, ".ci/run lists no tools=(...)")
	readmeTools := regexp.MustCompile(`eval "\$\(hack/build-tools\.sh env ([^)]*)\)"`).FindStringSubmatch(readme)
	require.NotNil(t, readmeTools, "README.md has no eval \"$(hack/build-tools.sh env ...)\" line")
	require.Equal(t, strings.Fields(ciTools[1]), strings.Fields(readmeTools[1]), "README.md puts other tool groups on PATH than .ci/run")

	require.Regexp(t, `(?m)^\. hack/goflags\.sh$`, ci)
	require.Regexp(t, `(?m)^go vet \./\.\.\. `, ci)
	ciTest := regexp.MustCompile(`(?m)^(go test [^|\n]*?) \|\| status=\$\?$`).FindStringSubmatch(ci)
	require.NotNil(t, ciTest, ".ci/run has no go test line")
	want := "(. hack/goflags.sh && go vet ./... && " + ciTest[1] + ")"
	require.Contains(t, readme, want, "README.md's test command is not .ci/run's")
}

func readRepoFile(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(file)))
	require.NoError(t, err)
	return string(data)
}
