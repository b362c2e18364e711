//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"

	"github.com/railgrid/railgrid-kcp/internal/plan"
	"github.com/railgrid/railgrid-kcp/naming"
)

var (
	pvcGVR         = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	serviceGVR     = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	secretGVR      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMapGVR   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	namespaceGVR   = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	statefulSetGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	deploymentGVR  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gatewayGVR     = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
	gwClassGVR     = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
	envoyProxyGVR  = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "envoyproxies"}
)

// designFields are the fields the design document sets, compared exactly (not as a
// subset): every element of a list must be there and nothing else.
var designFields = map[string][][]string{
	"RootShard": {
		{"spec", "image"}, {"spec", "proxy", "image"}, {"spec", "extraArgs"}, {"spec", "etcd", "endpoints"},
		{"spec", "auth"}, {"spec", "external"}, {"spec", "certificates"}, {"spec", "replicas"},
	},
	"Shard":      {{"spec", "image"}, {"spec", "extraArgs"}, {"spec", "etcd", "endpoints"}, {"spec", "auth"}, {"spec", "rootShard"}},
	"FrontProxy": {{"spec", "image"}, {"spec", "auth"}, {"spec", "external"}, {"spec", "rootShard"}},
	"Kubeconfig": {{"spec", "username"}, {"spec", "groups"}, {"spec", "validity"}, {"spec", "secretRef"}, {"spec", "target"}},
	"Service":    {{"spec", "clusterIP"}, {"spec", "selector"}, {"spec", "ports"}},
}

// liveObject fetches the live object of a plan manifest (for a patch: the patched object).
func liveObject(ctx context.Context, c *cluster, mapper meta.RESTMapper, manifest map[string]any) (*unstructured.Unstructured, error) {
	apiVersion, _ := manifest["apiVersion"].(string)
	kind, _ := manifest["kind"].(string)
	md, _ := manifest["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	mapping, err := mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", apiVersion, kind, err)
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(mapping.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	}
	return c.dyn.Resource(mapping.Resource).Get(ctx, name, metav1.GetOptions{})
}

func newMapper(c *cluster) (meta.RESTMapper, error) {
	groups, err := restmapper.GetAPIGroupResources(c.kube.Discovery())
	if err != nil {
		return nil, err
	}
	return restmapper.NewDiscoveryRESTMapper(groups), nil
}

// comparePlan checks every object of the offline plan against the live cluster: every
// field the plan sets must be there with the same value (placeholders for secrets and
// computed values excepted), the design document's fields exactly, and a Secret must
// hold exactly the keys the plan names.
func comparePlan(ctx context.Context, c *cluster, objects []plan.Object) ([]string, int, error) {
	mapper, err := newMapper(c)
	if err != nil {
		return nil, 0, err
	}
	var problems []string
	checked := 0
	for _, o := range objects {
		m := normalize(o.Manifest).(map[string]any)
		kind, _ := m["kind"].(string)
		md, _ := m["metadata"].(map[string]any)
		id := fmt.Sprintf("%s %v/%v", kind, md["namespace"], md["name"])
		if o.Patch {
			id = "patch of " + id
		}
		live, err := liveObject(ctx, c, mapper, m)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		checked++
		got := normalize(live.Object).(map[string]any)
		want := map[string]any{}
		for k, v := range m {
			if k == "stringData" && kind == "Secret" {
				continue
			}
			want[k] = v
		}
		var diffs []string
		subset("", want, got, false, &diffs)
		if kind == "Secret" {
			if sd, ok := m["stringData"].(map[string]any); ok {
				data, _ := got["data"].(map[string]any)
				if !sameKeys(sd, data) {
					diffs = append(diffs, fmt.Sprintf("data keys %v, the plan has %v", keysOf(data), keysOf(sd)))
				}
			}
		}
		if !o.Patch {
			for _, path := range designFields[kind] {
				w, wok := nested(m, path)
				g, _ := nested(got, path)
				if wok {
					subset(strings.Join(path, "."), w, g, true, &diffs)
				}
			}
		}
		for _, d := range diffs {
			problems = append(problems, id+": "+d)
		}
	}
	return problems, checked, nil
}

// pulumiManager is the field manager the Kubernetes provider writes every object of the
// program with (naming.FieldManager, set by the program on each object).
const pulumiManager = naming.FieldManager

func managedByPulumi(o *unstructured.Unstructured) bool {
	for _, m := range o.GetManagedFields() {
		if strings.HasPrefix(m.Manager, pulumiManager) {
			return true
		}
	}
	return false
}

// unplannedObjects lists the objects of every kind the plan declares that the Kubernetes
// provider wrote in the cluster but that the offline plan does not have: a stray or
// orphaned object the comparison of planned objects alone would never see.
func unplannedObjects(ctx context.Context, c *cluster, objects []plan.Object) ([]string, int, error) {
	mapper, err := newMapper(c)
	if err != nil {
		return nil, 0, err
	}
	planned := map[string]bool{}
	kinds := map[schema.GroupVersionKind]bool{}
	for _, o := range objects {
		apiVersion, _ := o.Manifest["apiVersion"].(string)
		kind, _ := o.Manifest["kind"].(string)
		md, _ := o.Manifest["metadata"].(map[string]any)
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return nil, 0, err
		}
		kinds[gv.WithKind(kind)] = true
		planned[fmt.Sprintf("%s %s %v/%v", gv.Group, kind, orEmpty(md["namespace"]), md["name"])] = true
	}
	var extra []string
	seen := 0
	for gvk := range kinds {
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", gvk, err)
		}
		list, err := c.dyn.Resource(mapping.Resource).Namespace("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, 0, fmt.Errorf("listing %s: %w", mapping.Resource, err)
		}
		for _, o := range list.Items {
			// Helm's own record of a release (a Secret labelled owner=helm) is written
			// by the provider's Helm client, not declared by the program.
			if !managedByPulumi(&o) || (gvk.Kind == "Secret" && o.GetLabels()["owner"] == "helm") {
				continue
			}
			seen++
			key := fmt.Sprintf("%s %s %s/%s", gvk.Group, gvk.Kind, o.GetNamespace(), o.GetName())
			if !planned[key] && o.GetDeletionTimestamp() == nil {
				extra = append(extra, fmt.Sprintf("%s %s/%s is in the cluster, written by %s*, but not in the offline plan",
					gvk.Kind, o.GetNamespace(), o.GetName(), pulumiManager))
			}
		}
	}
	sort.Strings(extra)
	return extra, seen, nil
}

func orEmpty(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// subset reports every value of want that got does not have. Maps may have more keys
// live (server defaults); lists, when strict, must have exactly the planned elements in
// the planned order.
func subset(path string, want, got any, strict bool, diffs *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			if len(w) == 0 && got == nil {
				return
			}
			*diffs = append(*diffs, fmt.Sprintf("%s: live %s, plan %s", orRoot(path), compact(got), compact(want)))
			return
		}
		for k, v := range w {
			subset(path+"."+k, v, g[k], strict, diffs)
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			if len(w) == 0 && got == nil {
				return
			}
			*diffs = append(*diffs, fmt.Sprintf("%s: live %s, plan %s", orRoot(path), compact(got), compact(want)))
			return
		}
		if strict && len(w) != len(g) {
			*diffs = append(*diffs, fmt.Sprintf("%s: live %s, plan %s", orRoot(path), compact(got), compact(want)))
			return
		}
		if len(w) == len(g) {
			var indexDiffs []string
			for i := range w {
				subset(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], strict, &indexDiffs)
			}
			if len(indexDiffs) == 0 || strict {
				*diffs = append(*diffs, indexDiffs...)
				return
			}
		}
		// Lists the server may extend or reorder (volume mounts of a patched
		// Deployment): each planned element must match some live element.
		for i, item := range w {
			found := false
			for _, candidate := range g {
				var d []string
				subset("", item, candidate, false, &d)
				if len(d) == 0 {
					found = true
					break
				}
			}
			if !found {
				*diffs = append(*diffs, fmt.Sprintf("%s[%d]: %s not in live %s", path, i, compact(item), compact(got)))
			}
		}
	case string:
		if w == plan.SecretPlaceholder || w == plan.ComputedPlaceholder {
			return
		}
		if got != want {
			*diffs = append(*diffs, fmt.Sprintf("%s: live %s, plan %s", orRoot(path), compact(got), compact(want)))
		}
	default:
		if !reflect.DeepEqual(want, got) {
			*diffs = append(*diffs, fmt.Sprintf("%s: live %s, plan %s", orRoot(path), compact(got), compact(want)))
		}
	}
}

func orRoot(path string) string {
	if path == "" {
		return "."
	}
	return strings.TrimPrefix(path, ".")
}

// normalize turns any JSON-able value into what encoding/json decodes it to, so that
// numbers compare as float64 on both sides.
func normalize(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

func nested(obj map[string]any, path []string) (any, bool) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[p]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

func compact(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(data)
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sameKeys(a, b map[string]any) bool { return reflect.DeepEqual(keysOf(a), keysOf(b)) }

// countObjects counts the live objects of a resource (in a namespace, or everywhere).
func countObjects(ctx context.Context, c *cluster, gvr schema.GroupVersionResource, ns string) ([]string, error) {
	list, err := c.dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, o := range list.Items {
		if o.GetNamespace() != "" {
			names = append(names, o.GetNamespace()+"/"+o.GetName())
		} else {
			names = append(names, o.GetName())
		}
	}
	sort.Strings(names)
	return names, nil
}

// checkExactlyOnce checks that every object of the stack exists once in the cluster and
// in the state, and that the cluster has no object of the stack's kinds that the state
// does not know.
func checkExactlyOnce(t *testing.T, ctx context.Context, e *env, d deployment) {
	t.Helper()
	inState := map[string]int{}
	for _, r := range d.Resources {
		if strings.HasPrefix(r.Type, "kubernetes:") && r.ID != "" && !strings.HasSuffix(r.Type, "Patch") && !strings.HasPrefix(r.Type, "kubernetes:helm.sh") {
			kind := r.Type[strings.LastIndex(r.Type, ":")+1:]
			inState[kind+" "+r.ID]++
		}
	}
	for k, n := range inState {
		if n > 1 {
			t.Errorf("the state holds %s %d times", k, n)
		}
	}
	for _, o := range e.plan.objects {
		if o.Patch {
			continue
		}
		kind, _ := o.Manifest["kind"].(string)
		md, _ := o.Manifest["metadata"].(map[string]any)
		id := fmt.Sprint(md["name"])
		if ns, ok := md["namespace"].(string); ok && ns != "" {
			id = ns + "/" + id
		}
		if inState[kind+" "+id] != 1 {
			t.Errorf("%s %s is in the state %d times, want once", kind, id, inState[kind+" "+id])
		}
	}
	for _, l := range []struct {
		kind string
		gvr  schema.GroupVersionResource
		ns   string
	}{
		{"RootShard", rootShardGVR, ""}, {"Shard", shardGVR, ""}, {"FrontProxy", frontProxyGVR, ""}, {"Kubeconfig", kubeconfigGVR, ""},
		{"Service", serviceGVR, naming.NamespaceKcp}, {"Service", serviceGVR, naming.NamespaceEtcd},
		{"StatefulSet", statefulSetGVR, naming.NamespaceEtcd},
	} {
		// Only what the Kubernetes provider wrote: the operator creates Services of its
		// own (root-kcp, ...) in kcp-system.
		list, err := e.c.dyn.Resource(l.gvr).Namespace(l.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			if !managedByPulumi(&o) {
				continue
			}
			n := o.GetName()
			if o.GetNamespace() != "" {
				n = o.GetNamespace() + "/" + n
			}
			if inState[l.kind+" "+n] != 1 {
				t.Errorf("%s %s is in the cluster but not in the state (orphaned)", l.kind, n)
			}
		}
	}
	var counts []string
	for _, kind := range kcpKinds {
		gvr := map[string]schema.GroupVersionResource{"RootShard": rootShardGVR, "Shard": shardGVR, "FrontProxy": frontProxyGVR, "Kubeconfig": kubeconfigGVR}[kind]
		names, _ := countObjects(ctx, e.c, gvr, "")
		counts = append(counts, fmt.Sprintf("%s %v", kind, names))
		if len(names) != 1 {
			t.Errorf("the cluster has %d %s objects, want 1: %v", len(names), kind, names)
		}
	}
	t.Logf("the cluster and the state agree, one of each:%s", indent(counts))
}

// objectIDs maps "<resource> <ns>/<name>" to UIDs of the objects that hold data or that
// must never be replaced by a routine change.
func dataHolders(t *testing.T, ctx context.Context, c *cluster) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(gvr schema.GroupVersionResource, ns string, filter func(name string) bool) {
		list, err := c.dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing %s: %v", gvr.Resource, err)
		}
		for _, o := range list.Items {
			if filter == nil || filter(o.GetName()) {
				out[gvr.Resource+" "+o.GetNamespace()+"/"+o.GetName()] = string(o.GetUID())
			}
		}
	}
	add(pvcGVR, naming.NamespaceEtcd, nil)
	add(statefulSetGVR, naming.NamespaceEtcd, nil)
	add(namespaceGVR, "", func(n string) bool {
		return slices.Contains([]string{naming.NamespaceEtcd, naming.NamespaceKcp, naming.NamespaceOperator, "railgrid-system"}, n)
	})
	add(rootShardGVR, "", nil)
	add(shardGVR, "", nil)
	add(frontProxyGVR, "", nil)
	add(serviceGVR, naming.NamespaceKcp, nil)
	return out
}

func checkSameObjects(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, uid := range before {
		switch got, ok := after[k]; {
		case !ok:
			t.Errorf("%s was deleted", k)
		case got != uid:
			t.Errorf("%s was replaced (uid %s, was %s)", k, got, uid)
		}
	}
}
