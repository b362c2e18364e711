// Package plan turns a mockstack.Recording (the stack's real composition run under
// mocks) into what reviewers read before `pulumi up`: every Kubernetes object as
// apply-able YAML in dependency order, every resource as JSON, and the dependency graph
// with its critical path.
package plan

import (
	"container/heap"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
)

// Placeholders for values the plan does not print.
const (
	SecretPlaceholder   = "<secret: not shown by cmd/plan>"
	ComputedPlaceholder = mockstack.Computed
)

// Object is one Kubernetes object the stack declares, as it would be applied.
type Object struct {
	Resource mockstack.Resource
	Manifest map[string]any
	// Patch is true for a server-side apply patch of an object the cluster already has.
	Patch bool
}

// kubernetesKind returns the object kind of a kubernetes:<apiVersion>:<Kind> type, and
// whether the resource is a Kubernetes object (not a provider, a Helm release or a read).
func kubernetesKind(res mockstack.Resource) (apiVersion, kind string, patch, ok bool) {
	parts := strings.Split(res.Type, ":")
	if len(parts) != 3 || parts[0] != "kubernetes" || res.Read || parts[1] == "helm.sh/v3" || parts[1] == "helm.sh/v4" {
		return "", "", false, false
	}
	apiVersion, kind = parts[1], parts[2]
	if apiVersion == "core/v1" {
		apiVersion = "v1"
	}
	if strings.HasSuffix(kind, "Patch") {
		return apiVersion, strings.TrimSuffix(kind, "Patch"), true, true
	}
	return apiVersion, kind, false, true
}

// KubernetesObjects returns every Kubernetes object of the recording in apply order:
// dependencies first, and among objects whose dependencies are met, namespaces, then
// cluster-scoped and built-in objects, then custom resources.
func KubernetesObjects(rec *mockstack.Recording) []Object {
	var out []Object
	for _, res := range Order(rec) {
		apiVersion, kind, patch, ok := kubernetesKind(res)
		if !ok {
			continue
		}
		manifest := Redact(res.Inputs)
		manifest["apiVersion"] = apiVersion
		manifest["kind"] = kind
		if kind == "Secret" {
			hideSecretData(manifest, res.Inputs)
		}
		out = append(out, Object{Resource: res, Manifest: manifest, Patch: patch})
	}
	return out
}

// hideSecretData moves a Secret's data to stringData with a visible placeholder under
// each key, so the manifest still applies and no value is printed.
func hideSecretData(manifest map[string]any, inputs resource.PropertyMap) {
	hidden := map[string]any{}
	for _, field := range []resource.PropertyKey{"data", "stringData"} {
		v, ok := inputs[field]
		for ok && (v.IsSecret() || v.IsOutput()) {
			if v.IsSecret() {
				v = v.SecretValue().Element
			} else {
				v = v.OutputValue().Element
			}
		}
		if ok && v.IsObject() {
			for k := range v.ObjectValue() {
				hidden[string(k)] = SecretPlaceholder
			}
		}
		delete(manifest, string(field))
	}
	if len(hidden) > 0 {
		manifest["stringData"] = hidden
	}
}

// Redact turns recorded inputs into plain values, replacing secrets and unknown values
// with placeholders.
func Redact(props resource.PropertyMap) map[string]any {
	out := map[string]any{}
	for k, v := range props {
		if strings.HasPrefix(string(k), "__") {
			continue
		}
		out[string(k)] = redactValue(v)
	}
	return out
}

func redactValue(v resource.PropertyValue) any {
	switch {
	case v.IsSecret():
		return SecretPlaceholder
	case v.IsComputed() || (v.IsOutput() && !v.OutputValue().Known):
		return ComputedPlaceholder
	case v.IsOutput():
		if v.OutputValue().Secret {
			return SecretPlaceholder
		}
		return redactValue(v.OutputValue().Element)
	case v.IsObject():
		return Redact(v.ObjectValue())
	case v.IsArray():
		items := make([]any, 0, len(v.ArrayValue()))
		for _, item := range v.ArrayValue() {
			items = append(items, redactValue(item))
		}
		return items
	case v.IsNull():
		return nil
	case v.IsResourceReference():
		return string(v.ResourceReferenceValue().URN)
	default:
		return v.V
	}
}

// rank orders ready resources: namespaces, then other built-in objects, then custom
// resources (whose CRDs a cluster must already have), then everything else.
func rank(res mockstack.Resource) int {
	apiVersion, kind, _, ok := kubernetesKind(res)
	switch {
	case ok && kind == "Namespace":
		return 0
	case ok && isBuiltIn(apiVersion):
		return 1
	case ok:
		return 2
	default:
		return 3
	}
}

func isBuiltIn(apiVersion string) bool {
	group := ""
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		group = apiVersion[:i]
	}
	return group == "" || group == "core" || !strings.Contains(group, ".") || strings.HasSuffix(group, ".k8s.io") && !strings.HasPrefix(group, "gateway.")
}

// Edges returns, for every resource URN, the URNs it waits for. A dependency on a
// component stands for all of the component's descendants.
func Edges(rec *mockstack.Recording) map[string][]string {
	children := map[string][]string{}
	for _, res := range rec.Resources {
		if res.Parent != "" {
			children[res.Parent] = append(children[res.Parent], res.URN)
		}
	}
	var descendants func(urn string) []string
	descendants = func(urn string) []string {
		var out []string
		for _, c := range children[urn] {
			out = append(out, c)
			out = append(out, descendants(c)...)
		}
		return out
	}
	known := map[string]bool{}
	for _, res := range rec.Resources {
		known[res.URN] = true
	}
	edges := map[string][]string{}
	for _, res := range rec.Resources {
		seen := map[string]bool{}
		for _, dep := range res.Dependencies {
			for _, d := range append([]string{dep}, descendants(dep)...) {
				if known[d] && !seen[d] && d != res.URN {
					seen[d] = true
					edges[res.URN] = append(edges[res.URN], d)
				}
			}
		}
		sort.Strings(edges[res.URN])
	}
	return edges
}

// Order sorts all resources so that each comes after what it waits for, preferring
// lower ranks, then URN order, among the resources that are ready.
func Order(rec *mockstack.Recording) []mockstack.Resource {
	edges := Edges(rec)
	byURN := map[string]mockstack.Resource{}
	waiting := map[string]int{}
	dependents := map[string][]string{}
	for _, res := range rec.Resources {
		byURN[res.URN] = res
		waiting[res.URN] = len(edges[res.URN])
		for _, dep := range edges[res.URN] {
			dependents[dep] = append(dependents[dep], res.URN)
		}
	}
	ready := &readyQueue{}
	for _, res := range rec.Resources {
		if waiting[res.URN] == 0 {
			heap.Push(ready, res)
		}
	}
	var out []mockstack.Resource
	for ready.Len() > 0 {
		res := heap.Pop(ready).(mockstack.Resource)
		out = append(out, res)
		for _, d := range dependents[res.URN] {
			waiting[d]--
			if waiting[d] == 0 {
				heap.Push(ready, byURN[d])
			}
		}
	}
	return out
}

type readyQueue []mockstack.Resource

func (q readyQueue) Len() int { return len(q) }
func (q readyQueue) Less(i, j int) bool {
	if ri, rj := rank(q[i]), rank(q[j]); ri != rj {
		return ri < rj
	}
	return q[i].URN < q[j].URN
}
func (q readyQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *readyQueue) Push(x any)   { *q = append(*q, x.(mockstack.Resource)) }
func (q *readyQueue) Pop() any {
	old := *q
	n := len(old)
	x := old[n-1]
	*q = old[:n-1]
	return x
}
