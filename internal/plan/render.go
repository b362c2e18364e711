package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

// WriteYAML writes every Kubernetes object as multi-document YAML in apply order. Patches
// of objects the cluster already has are marked, and Helm releases are listed in a
// comment (their objects come from the chart at deployment).
func WriteYAML(w io.Writer, rec *mockstack.Recording) error {
	fmt.Fprintf(w, "# railgrid-kcp offline plan of stack %q: every Kubernetes object, in apply order.\n", rec.Stack)
	fmt.Fprintf(w, "# Secret values are replaced by %q; values known only at deployment by %q.\n", SecretPlaceholder, ComputedPlaceholder)
	for _, res := range Order(rec) {
		if res.Type == "kubernetes:helm.sh/v3:Release" {
			in := Redact(res.Inputs)
			fmt.Fprintf(w, "# Helm release %v/%v: chart %v version %v\n", in["namespace"], in["name"], in["chart"], in["version"])
		}
	}
	for _, obj := range KubernetesObjects(rec) {
		fmt.Fprintln(w, "---")
		if obj.Patch {
			fmt.Fprintln(w, "# server-side apply patch of an existing object (it adds entries; forced only if it says pulumi.com/patchForce)")
		}
		out, err := yaml.Marshal(obj.Manifest)
		if err != nil {
			return fmt.Errorf("%s: %w", obj.Resource, err)
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
	}
	return nil
}

// JSONResource is one resource in the JSON plan.
type JSONResource struct {
	Type                string         `json:"type"`
	Name                string         `json:"name"`
	URN                 string         `json:"urn"`
	Parent              string         `json:"parent,omitempty"`
	Custom              bool           `json:"custom"`
	Read                bool           `json:"read,omitempty"`
	Dependencies        []string       `json:"dependencies,omitempty"`
	Protect             bool           `json:"protect,omitempty"`
	RetainOnDelete      bool           `json:"retainOnDelete,omitempty"`
	DeleteBeforeReplace bool           `json:"deleteBeforeReplace,omitempty"`
	Inputs              map[string]any `json:"inputs"`
	// MockedOutputs are outputs only the cloud or cluster knows, taken from fakes here.
	MockedOutputs []string `json:"mockedOutputs,omitempty"`
}

// JSONPlan is the whole JSON document.
type JSONPlan struct {
	Stack     string         `json:"stack"`
	Resources []JSONResource `json:"resources"`
	// MockedInvokes are data-source calls answered by fakes (the GKE cluster lookup).
	MockedInvokes []string `json:"mockedInvokes,omitempty"`
	// Outputs are the stack's outputs as the mocked run computes them (what only the
	// cloud or cluster knows comes from the fakes), secrets and unknowns replaced as in
	// the inputs.
	Outputs map[string]any `json:"outputs,omitempty"`
}

// WriteJSON writes every resource of the stack as one JSON document.
func WriteJSON(w io.Writer, rec *mockstack.Recording) error {
	doc := JSONPlan{Stack: rec.Stack}
	for _, res := range Order(rec) {
		doc.Resources = append(doc.Resources, JSONResource{
			Type: res.Type, Name: res.Name, URN: res.URN, Parent: res.Parent, Custom: res.Custom, Read: res.Read,
			Dependencies: res.Dependencies, Protect: res.Protect, RetainOnDelete: res.RetainOnDelete,
			DeleteBeforeReplace: res.DeleteBeforeReplace, Inputs: Redact(res.Inputs), MockedOutputs: res.Faked,
		})
	}
	for _, inv := range rec.Invokes {
		if inv.Faked {
			doc.MockedInvokes = append(doc.MockedInvokes, inv.Token)
		}
	}
	doc.Outputs = map[string]any{}
	for name, out := range rec.Outputs {
		switch {
		case out.Secret:
			doc.Outputs[name] = SecretPlaceholder
		case !out.Known:
			doc.Outputs[name] = ComputedPlaceholder
		default:
			doc.Outputs[name] = out.Value
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// Waits reports whether the engine waits for a resource to become ready before its
// dependents start: Helm releases, custom resources with pulumi.com/waitFor, workloads.
func Waits(res mockstack.Resource) bool {
	if res.Read || !res.Custom {
		return false
	}
	switch {
	case res.Type == "kubernetes:helm.sh/v3:Release":
		return true
	case strings.HasSuffix(res.Type, ":Deployment"), strings.HasSuffix(res.Type, ":StatefulSet"),
		strings.HasSuffix(res.Type, ":DaemonSet"), strings.HasSuffix(res.Type, ":Job"):
		return strings.HasPrefix(res.Type, "kubernetes:")
	}
	meta := Redact(res.Inputs)["metadata"]
	if m, ok := meta.(map[string]any); ok {
		if ann, ok := m["annotations"].(map[string]any); ok {
			_, waits := ann[naming.AnnotationWaitFor]
			return waits
		}
	}
	return false
}

// CriticalPath is the longest chain of resources that wait for readiness, first to last.
func CriticalPath(rec *mockstack.Recording) []mockstack.Resource {
	edges := Edges(rec)
	order := Order(rec)
	best := map[string]int{}
	prev := map[string]string{}
	byURN := map[string]mockstack.Resource{}
	for _, res := range order {
		byURN[res.URN] = res
		weight := 0
		if Waits(res) {
			weight = 1
		}
		best[res.URN] = weight
		for _, dep := range edges[res.URN] {
			if best[dep]+weight > best[res.URN] || (best[dep]+weight == best[res.URN] && prev[res.URN] == "" && best[dep] > 0) {
				best[res.URN] = best[dep] + weight
				prev[res.URN] = dep
			}
		}
	}
	end := ""
	for _, res := range order {
		if end == "" || best[res.URN] > best[end] {
			end = res.URN
		}
	}
	var chain []mockstack.Resource
	for u := end; u != ""; u = prev[u] {
		if Waits(byURN[u]) {
			chain = append([]mockstack.Resource{byURN[u]}, chain...)
		}
	}
	return chain
}

// WriteGraph writes the dependency graph as DOT, then the critical path as comments.
func WriteGraph(w io.Writer, rec *mockstack.Recording) error {
	edges := Edges(rec)
	fmt.Fprintf(w, "digraph %q {\n  rankdir=LR;\n  node [shape=box, fontsize=10];\n", "railgrid-kcp-"+rec.Stack)
	ids := map[string]string{}
	for i, res := range Order(rec) {
		ids[res.URN] = fmt.Sprintf("n%d", i)
		style := ""
		if Waits(res) {
			style = ", style=bold"
		}
		if !res.Custom {
			style += ", shape=folder"
		}
		fmt.Fprintf(w, "  %s [label=%q%s];\n", ids[res.URN], label(res), style)
	}
	urns := make([]string, 0, len(edges))
	for u := range edges {
		urns = append(urns, u)
	}
	sort.Strings(urns)
	for _, u := range urns {
		for _, dep := range edges[u] {
			fmt.Fprintf(w, "  %s -> %s;\n", ids[dep], ids[u])
		}
	}
	fmt.Fprintln(w, "}")
	path := CriticalPath(rec)
	fmt.Fprintf(w, "// critical path: %d resources that wait for readiness\n", len(path))
	for i, res := range path {
		fmt.Fprintf(w, "//   %d. %s\n", i+1, label(res))
	}
	return nil
}

func label(res mockstack.Resource) string {
	typ := res.Type[strings.LastIndex(res.Type, ":")+1:]
	if name := mockstack.MetadataName(res); name != "" {
		return typ + " " + name
	}
	return typ + " " + res.Name
}
