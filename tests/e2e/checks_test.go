package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/railgrid/railgrid-kcp/components"
	"github.com/railgrid/railgrid-kcp/internal/plan"
)

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
// program with (components.FieldManager, set by the program on each object).
const pulumiManager = components.FieldManager

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

// leakSearch looks for needles in a document (a JSON state export) the way a leak would
// show up: as is, or under any nesting of base64 and PEM inside any string of it (a
// Secret's data is base64 of a kubeconfig, whose certificate data is base64 of PEM,
// whose body is base64 of the DER certificate that carries the marker).
func leakSearch(doc []byte, needles ...string) []string {
	return newLeakSearcher(needles...).search(doc)
}

// leakSearcher is leakSearch for many documents with the same needles: a string that
// recurs (the backend keeps many copies of one state) is decoded and searched once.
type leakSearcher struct {
	needles []string
	found   map[string][]string // string -> the needles in it
}

func newLeakSearcher(needles ...string) *leakSearcher {
	return &leakSearcher{needles: needles, found: map[string][]string{}}
}

func (l *leakSearcher) search(doc []byte) []string {
	var found []string
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		root = string(doc)
	}
	walkStrings(root, "", func(path, s string) {
		in, seen := l.found[s]
		if !seen {
			layers := decodedLayers([]byte(s), 5, nil)
			for _, n := range l.needles {
				if layersContain(layers, []byte(n)) {
					in = append(in, n)
				}
			}
			l.found[s] = in
		}
		for _, n := range in {
			found = append(found, fmt.Sprintf("%q found under %s", n, path))
		}
	})
	return found
}

func walkStrings(v any, path string, fn func(path, s string)) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			walkStrings(x, path+"."+k, fn)
		}
	case []any:
		for i, x := range t {
			walkStrings(x, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	case string:
		fn(path, t)
	}
}

var base64Run = regexp.MustCompile(`[A-Za-z0-9+/]{16,}={0,2}`)

// deepContains reports whether needle is in data as is, base64-encoded, or in what
// decoding PEM blocks and base64 runs of data yields, depth levels deep.
func deepContains(data, needle []byte, depth int) bool {
	return layersContain(decodedLayers(data, depth, nil), needle)
}

// decodedLayers appends data and everything decoding it yields, depth levels deep: the
// bodies of its PEM blocks and its base64 runs, each decoded again.
func decodedLayers(data []byte, depth int, out [][]byte) [][]byte {
	out = append(out, data)
	if depth == 0 {
		return out
	}
	rest := data
	for {
		block, r := pem.Decode(rest)
		if block == nil {
			break
		}
		out = decodedLayers(block.Bytes, depth-1, out)
		rest = r
	}
	for _, run := range base64Run.FindAll(data, -1) {
		if decoded, ok := decodeBase64(run); ok {
			out = decodedLayers(decoded, depth-1, out)
		}
	}
	return out
}

// layersContain reports whether needle, as is or base64-encoded, is in any layer.
func layersContain(layers [][]byte, needle []byte) bool {
	forms := append([][]byte{needle}, base64Forms(needle)...)
	for _, layer := range layers {
		for _, f := range forms {
			if bytes.Contains(layer, f) {
				return true
			}
		}
	}
	return false
}

// base64Forms are the stable inner parts of the base64 encodings of s at the three
// possible alignments.
func base64Forms(s []byte) [][]byte {
	var out [][]byte
	for shift := 0; shift < 3; shift++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, shift), s...))
		// Drop the characters that depend on the bytes before and after.
		start := (shift*8 + 5) / 6
		end := len(enc) - 4
		if end-start > 8 {
			out = append(out, []byte(enc[start:end]))
		}
	}
	return out
}

func decodeBase64(run []byte) ([]byte, bool) {
	s := strings.TrimRight(string(run), "=")
	for trim := 0; trim < 4 && len(s) > trim; trim++ {
		if decoded, err := base64.RawStdEncoding.DecodeString(s[:len(s)-trim]); err == nil {
			return decoded, true
		}
	}
	return nil, false
}

// kubeconfigFacts are what the test checks of a minted kubeconfig.
type kubeconfigFacts struct {
	server   string
	cn       string
	orgs     []string
	ous      []string
	notAfter string
	caPEM    string
}

func parseMinted(data []byte) (kubeconfigFacts, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return kubeconfigFacts{}, err
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return kubeconfigFacts{}, fmt.Errorf("no current context")
	}
	user := cfg.AuthInfos[ctx.AuthInfo]
	base := cfg.Clusters["base"]
	if user == nil || base == nil {
		return kubeconfigFacts{}, fmt.Errorf("no user or no base cluster")
	}
	block, _ := pem.Decode(user.ClientCertificateData)
	if block == nil {
		return kubeconfigFacts{}, fmt.Errorf("client certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return kubeconfigFacts{}, err
	}
	return kubeconfigFacts{
		server: base.Server, cn: cert.Subject.CommonName, orgs: cert.Subject.Organization,
		ous: cert.Subject.OrganizationalUnit, notAfter: cert.NotAfter.UTC().Format("2006-01-02T15:04:05Z07:00"),
		caPEM: string(base.CertificateAuthorityData),
	}, nil
}

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
