package plan

import (
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
)

// WriteChanges prints what changes between two offline plans of one stack (before and
// after a config or code change), resource by resource as the engine would plan it:
// "+" a create, "-" a delete, "~" an update with the lines of its inputs that change.
// Reads are listed with "r" when they appear or go, as they change nothing. Secret
// values are never printed (Redact).
func WriteChanges(w io.Writer, before, after *mockstack.Recording) error {
	old := map[string]mockstack.Resource{}
	for _, r := range before.Resources {
		old[r.URN] = r
	}
	seen := map[string]bool{}
	var creates, deletes, updates, reads []string
	unchanged := 0
	for _, r := range after.Resources {
		seen[r.URN] = true
		prev, existed := old[r.URN]
		switch {
		case !existed && r.Read:
			reads = append(reads, "r "+changeLabel(r)+" (new read)")
		case !existed:
			creates = append(creates, "+ "+changeLabel(r))
		case !r.Read && !reflect.DeepEqual(Redact(prev.Inputs), Redact(r.Inputs)):
			diff, err := inputDiff(prev, r)
			if err != nil {
				return err
			}
			updates = append(updates, "~ "+changeLabel(r)+"\n"+diff)
		case !r.Read:
			unchanged++
		}
	}
	for _, r := range before.Resources {
		if seen[r.URN] {
			continue
		}
		if r.Read {
			reads = append(reads, "r "+changeLabel(r)+" (read no more)")
		} else {
			deletes = append(deletes, "- "+changeLabel(r))
		}
	}
	for _, group := range [][]string{creates, deletes, updates, reads} {
		sort.Strings(group)
		for _, line := range group {
			if _, err := fmt.Fprintln(w, line); err != nil {
				return err
			}
		}
	}
	_, err := fmt.Fprintf(w, "# %d to create, %d to delete, %d to update, %d unchanged\n",
		len(creates), len(deletes), len(updates), unchanged)
	return err
}

// changeLabel names a resource as a reviewer looks for it: a Kubernetes object by kind
// and namespace/name, anything else by type and resource name.
func changeLabel(r mockstack.Resource) string {
	if _, kind, patch, ok := kubernetesKind(r); ok {
		name := mockstack.MetadataName(r)
		if ns := metadataNamespace(r); ns != "" {
			name = ns + "/" + name
		}
		if patch {
			return kind + " " + name + " (patch)"
		}
		return kind + " " + name
	}
	if r.Read && r.ReadID != "" {
		return r.Type + " " + r.ReadID
	}
	return r.Type + " " + r.Name
}

func metadataNamespace(r mockstack.Resource) string {
	meta, ok := Redact(r.Inputs)["metadata"].(map[string]any)
	if !ok {
		return ""
	}
	ns, _ := meta["namespace"].(string)
	return ns
}

// inputDiff is a line diff of two resources' inputs as YAML, changed lines only, each
// with its "-" or "+".
func inputDiff(before, after mockstack.Resource) (string, error) {
	a, err := yaml.Marshal(Redact(before.Inputs))
	if err != nil {
		return "", err
	}
	b, err := yaml.Marshal(Redact(after.Inputs))
	if err != nil {
		return "", err
	}
	var out []string
	for _, l := range lineDiff(strings.Split(strings.TrimRight(string(a), "\n"), "\n"), strings.Split(strings.TrimRight(string(b), "\n"), "\n")) {
		out = append(out, "    "+l)
	}
	return strings.Join(out, "\n"), nil
}

// lineDiff returns the lines removed ("-") and added ("+") from a to b, in order, by
// the longest common subsequence.
func lineDiff(a, b []string) []string {
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i++
			j++
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			out = append(out, "+ "+b[j])
			j++
		default:
			out = append(out, "- "+a[i])
			i++
		}
	}
	return out
}
