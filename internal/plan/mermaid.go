package plan

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
)

// WriteMermaid writes the dependency graph of WriteGraph folded into the parts of the
// composition, as a Mermaid flowchart (GitHub draws it; the README shows it). A part is a
// child of a top-level resource: a component with everything below it, or a resource the
// composition declares itself. An arrow from one part to another means that something in
// the second waits for something in the first. Parts that hold a resource of the critical
// path are drawn bold, and the path follows as a comment.
func WriteMermaid(w io.Writer, rec *mockstack.Recording) error {
	parent := map[string]string{}
	hasChildren := map[string]bool{}
	for _, res := range rec.Resources {
		parent[res.URN] = res.Parent
		hasChildren[res.Parent] = true
	}
	known := func(urn string) bool { _, ok := parent[urn]; return ok }
	// part walks up to the ancestor just below a top-level resource (one whose parent,
	// the stack, is not in the recording); a top-level resource is its own part.
	part := func(urn string) string {
		if !known(parent[urn]) {
			return urn
		}
		for known(parent[parent[urn]]) {
			urn = parent[urn]
		}
		return urn
	}
	byURN := map[string]mockstack.Resource{}
	var parts []string
	seen := map[string]bool{}
	for _, res := range Order(rec) {
		byURN[res.URN] = res
		p := part(res.URN)
		if !known(parent[p]) && hasChildren[p] {
			continue // the composition itself: drawn as its parts
		}
		if !seen[p] {
			seen[p] = true
			parts = append(parts, p)
		}
	}
	ids := map[string]string{}
	for i, p := range parts {
		ids[p] = fmt.Sprintf("p%d", i)
	}
	arrows := map[[2]string]bool{}
	for urn, deps := range Edges(rec) {
		to := part(urn)
		for _, dep := range deps {
			from := part(dep)
			if from != to && ids[from] != "" && ids[to] != "" {
				arrows[[2]string{from, to}] = true
			}
		}
	}
	index := map[string]int{}
	for i, p := range parts {
		index[p] = i
	}
	// One line per part: the parts that wait for it.
	dependents := map[string][]string{}
	for a := range arrows {
		dependents[a[0]] = append(dependents[a[0]], a[1])
	}
	fmt.Fprintf(w, "flowchart LR\n")
	for _, p := range parts {
		fmt.Fprintf(w, "  %s[%q]\n", ids[p], label(byURN[p]))
	}
	for _, p := range parts {
		to := dependents[p]
		if len(to) == 0 {
			continue
		}
		sort.Slice(to, func(i, j int) bool { return index[to[i]] < index[to[j]] })
		names := make([]string, len(to))
		for i, d := range to {
			names[i] = ids[d]
		}
		fmt.Fprintf(w, "  %s --> %s\n", ids[p], strings.Join(names, " & "))
	}
	path := CriticalPath(rec)
	var bold []string
	onPath := map[string]bool{}
	for _, res := range path {
		if p := part(res.URN); ids[p] != "" && !onPath[p] {
			onPath[p] = true
			bold = append(bold, ids[p])
		}
	}
	if len(bold) > 0 {
		fmt.Fprintf(w, "  classDef critical stroke-width:3px\n  class %s critical\n", strings.Join(bold, ","))
	}
	steps := make([]string, len(path))
	for i, res := range path {
		steps[i] = label(res)
	}
	fmt.Fprintf(w, "  %%%% critical path (bold): %s\n", strings.Join(steps, ", "))
	return nil
}
