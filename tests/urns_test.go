package tests

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateURNs = flag.Bool("update-urns", false, "add to testdata/urns the URNs the shipped stacks declare and the lists lack (never removes one)")

// A resource's URN (its parents' type tokens, its own type token and its name) is its
// identity in a deployed stack: the next `pulumi up` deletes a resource whose URN the
// program no longer declares, and a URN that changes is a delete and a create. So every
// URN of the shipped stacks stays as testdata/urns/<stack>.txt lists it, whatever the Go
// types and functions behind it are called.
//
// A resource meant to go is removed from the list by hand. A type token or a name meant
// to change needs pulumi.Aliases and a test that previews, with the real engine, a stack
// made before the change. A new resource is added with -update-urns.
func TestEveryURNOfADeployedStackStays(t *testing.T) {
	for _, stack := range stacks {
		t.Run(stack, func(t *testing.T) {
			path := filepath.Join("testdata", "urns", stack+".txt")
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			pinned := map[string]bool{}
			for _, line := range strings.Split(string(data), "\n") {
				if line != "" && !strings.HasPrefix(line, "#") {
					pinned[line] = true
				}
			}
			require.NotEmpty(t, pinned, "%s lists no URN", path)
			declared := map[string]bool{}
			for _, res := range runStack(t, stack).Resources {
				declared[res.URN] = true
			}
			var gone, added []string
			for urn := range pinned {
				if !declared[urn] {
					gone = append(gone, urn)
				}
			}
			for urn := range declared {
				if !pinned[urn] {
					added = append(added, urn)
				}
			}
			sort.Strings(gone)
			sort.Strings(added)
			if len(gone) > 0 {
				t.Fatalf("a stack deployed before would delete these, which the program no longer declares (keep their type tokens and names, or add pulumi.Aliases):\n%s\n\ndeclared instead, and not in %s:\n%s",
					strings.Join(gone, "\n"), path, strings.Join(added, "\n"))
			}
			if len(added) > 0 && *updateURNs {
				require.NoError(t, os.WriteFile(path, []byte(string(data)+strings.Join(added, "\n")+"\n"), 0o644))
				return
			}
			if len(added) > 0 {
				t.Fatalf("%s does not list these yet (go test ./tests -run TestEveryURNOfADeployedStackStays -update-urns):\n%s", path, strings.Join(added, "\n"))
			}
		})
	}
}
