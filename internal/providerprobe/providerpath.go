package providerprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// The provider path's checks, in the order they run.
const (
	CheckWorkspaces          = "workspaces"
	CheckPublish             = "publish"
	CheckBind                = "bind"
	CheckEndpointSlice       = "endpoint-slice"
	CheckCreate              = "create"
	CheckList                = "list"
	CheckWatch               = "watch"
	CheckCachedPublish       = "cached-publish"
	CheckCachedBind          = "cached-bind"
	CheckCachedEndpointSlice = "cached-endpoint-slice"
	CheckCachedList          = "cached-list"
	CheckCachedWatch         = "cached-watch"
	CheckCachedConsumerRead  = "cached-consumer-read"
	CheckCachedWriteRefused  = "cached-write-refused"
	CheckCleanup             = "cleanup"
)

// ProviderPathChecks lists the provider path's checks in order.
var ProviderPathChecks = []string{
	CheckWorkspaces, CheckPublish, CheckBind, CheckEndpointSlice, CheckCreate, CheckList, CheckWatch,
	CheckCachedPublish, CheckCachedBind, CheckCachedEndpointSlice, CheckCachedList, CheckCachedWatch,
	CheckCachedConsumerRead, CheckCachedWriteRefused, CheckCleanup,
}

// The API the probe publishes: one group, a resource bound with CRD storage (widgets)
// and one served from kcp's cache (flavors), both cluster-scoped so that no namespace
// has to exist in the consumer's workspace.
const (
	probeGroup   = "probe.railgrid.dev"
	probeVersion = "v1"
	widgets      = "widgets"
	flavors      = "flavors"
)

// objectSchema is the OpenAPI schema of both resources: a spec with one string field.
const objectSchema = `{"type":"object","properties":{"spec":{"type":"object","properties":{"size":{"type":"string"}}}}}`

var (
	gvrWidgets = schema.GroupVersionResource{Group: probeGroup, Version: probeVersion, Resource: widgets}
	gvrFlavors = schema.GroupVersionResource{Group: probeGroup, Version: probeVersion, Resource: flavors}
)

// providerPath is the state of one run of the provider path.
type providerPath struct {
	o     *Options
	front string // the front proxy, as the kubeconfig names it, without a path

	names      struct{ provider, consumer string }
	paths      struct{ provider, consumer string } // root:<name>
	clusters   struct{ provider, consumer string } // logical cluster names
	made       []string                            // workspaces created, for clean-up
	shardVWURL string                              // the Shard's virtualWorkspaceURL

	sliceURL, cachedSliceURL string
	listRV, cachedListRV     string
	identityHash             string

	// The first failed check of each chain: what a later check needs and lacks.
	blockedBasic, blockedCached string
}

func runProviderPath(ctx context.Context, o *Options) {
	p := &providerPath{o: o}
	run := o.NamePrefix + "-" + randomSuffix()
	p.names.provider, p.names.consumer = run+"-provider", run+"-consumer"
	p.paths.provider, p.paths.consumer = "root:"+p.names.provider, "root:"+p.names.consumer

	front, err := frontProxyBase(o.Client.Credential.Server)
	if err != nil { // LoadCredential checked it already
		p.blockedBasic, p.blockedCached = "the kubeconfig's server", "the kubeconfig's server"
	}
	p.front = front

	p.do(ctx, CheckWorkspaces, &p.blockedBasic, p.checkWorkspaces)
	p.blockedCached = p.blockedBasic
	p.do(ctx, CheckPublish, &p.blockedBasic, p.checkPublish)
	p.do(ctx, CheckBind, &p.blockedBasic, p.checkBind)
	p.do(ctx, CheckEndpointSlice, &p.blockedBasic, p.checkEndpointSlice)
	p.do(ctx, CheckCreate, &p.blockedBasic, p.checkCreate)
	p.do(ctx, CheckList, &p.blockedBasic, p.checkList)
	p.do(ctx, CheckWatch, &p.blockedBasic, p.checkWatch)

	p.do(ctx, CheckCachedPublish, &p.blockedCached, p.checkCachedPublish)
	p.do(ctx, CheckCachedBind, &p.blockedCached, p.checkCachedBind)
	p.do(ctx, CheckCachedEndpointSlice, &p.blockedCached, p.checkCachedEndpointSlice)
	p.do(ctx, CheckCachedList, &p.blockedCached, p.checkCachedList)
	p.do(ctx, CheckCachedWatch, &p.blockedCached, p.checkCachedWatch)
	p.do(ctx, CheckCachedConsumerRead, &p.blockedCached, p.checkCachedConsumerRead)
	p.do(ctx, CheckCachedWriteRefused, &p.blockedCached, p.checkCachedWriteRefused)

	// The clean-up runs whatever happened, also after the run's time is up.
	cleanupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Wait)
	defer cancel()
	none := ""
	p.do(cleanupCtx, CheckCleanup, &none, p.checkCleanup)
}

// do runs one check unless an earlier one it needs failed, and reports it.
func (p *providerPath) do(ctx context.Context, name string, blocked *string, fn func(ctx context.Context, c *check) (string, error)) {
	c := &check{step: StepProviderPath, name: name, credential: p.o.Client.Credential.Subject, started: time.Now()}
	if *blocked != "" {
		p.o.Report.Add(c.line(NotRun, fmt.Sprintf("not run: it needs what %s would have made", *blocked), nil))
		return
	}
	msg, err := fn(ctx, c)
	if err != nil {
		*blocked = name
		p.o.Report.Add(c.line(Fail, msg, err))
		return
	}
	p.o.Report.Add(c.line(Pass, msg, nil))
}

// client is a dynamic client for a URL used as written; sliceURL says it is an
// endpoint-slice URL, on which only the default port is allowed.
func (p *providerPath) client(raw string, sliceURL bool) (dynamic.Interface, error) {
	cfg, err := p.o.Client.Config(raw, sliceURL)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}

func (p *providerPath) watchClient(raw string) (dynamic.Interface, error) {
	cfg, err := p.o.Client.WatchConfig(raw, true)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}

// create creates obj with a dynamic client.
func create(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj any) (*unstructured.Unstructured, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	out, err := dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create %s %s: %w", gvr.Resource, u.GetName(), err)
	}
	return out, nil
}

// checkWorkspaces makes the provider and the consumer workspace in the root workspace,
// each placed on the shard by spec.location.selector (kcp's scheduler matches it against
// the labels of the Shard objects; each shard labels its own name=<shard>), and waits
// until both are Ready on that shard.
func (p *providerPath) checkWorkspaces(ctx context.Context, c *check) (string, error) {
	c.url = workspaceURL(p.front, "root")
	dyn, err := p.client(c.url, false)
	if err != nil {
		return "", err
	}
	for _, name := range []string{p.names.provider, p.names.consumer} {
		ws := workspace{
			TypeMeta:   typeMeta(gvrWorkspace, "Workspace"),
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: workspaceSpec{Location: &workspaceLocation{Selector: &metav1.LabelSelector{
				MatchLabels: map[string]string{shardNameLabel: p.o.Shard},
			}}},
		}
		if _, err := create(ctx, dyn, gvrWorkspace, ws); err != nil {
			return "", err
		}
		p.made = append(p.made, name)
	}
	clusters := map[string]string{}
	for _, name := range p.made {
		var ws workspace
		state, err := poll(ctx, p.o.Wait, p.o.Interval, func(ctx context.Context) (bool, string, error) {
			u, err := dyn.Resource(gvrWorkspace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			ws = workspace{}
			if err := fromUnstructured(u, &ws); err != nil {
				return false, "", err
			}
			state := fmt.Sprintf("phase %q, shard %q, %s", ws.Status.Phase, ws.Annotations[shardAnnotation], conditionsText(ws.Status.Conditions))
			return ws.Status.Phase == workspacePhaseReady, state, nil
		})
		if err != nil {
			return "", fmt.Errorf("workspace root:%s is not Ready: %w", name, err)
		}
		if got := ws.Annotations[shardAnnotation]; got != p.o.Shard {
			return "", fmt.Errorf("workspace root:%s is on shard %q (annotation %s), not %q (%s)", name, got, shardAnnotation, p.o.Shard, state)
		}
		if ws.Spec.Cluster == "" {
			return "", fmt.Errorf("workspace root:%s is Ready but names no logical cluster (spec.cluster)", name)
		}
		clusters[name] = ws.Spec.Cluster
	}
	p.clusters.provider, p.clusters.consumer = clusters[p.names.provider], clusters[p.names.consumer]
	return fmt.Sprintf("workspaces %s (logical cluster %s) and %s (logical cluster %s) are Ready on shard %s, placed by spec.location.selector %s=%s",
		p.paths.provider, p.clusters.provider, p.paths.consumer, p.clusters.consumer, p.o.Shard, shardNameLabel, p.o.Shard), nil
}

func resourceSchema(plural, kind string) apiResourceSchema {
	return apiResourceSchema{
		TypeMeta:   typeMeta(gvrAPIResourceSchema, "APIResourceSchema"),
		ObjectMeta: metav1.ObjectMeta{Name: schemaName(plural)},
		Spec: apiResourceSchemaSpec{
			Group: probeGroup,
			Names: resourceNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Scope: "Cluster",
			Versions: []apiResourceSchemaVersion{{
				Name: probeVersion, Served: true, Storage: true, Schema: json.RawMessage(objectSchema),
			}},
		},
	}
}

// schemaName is an APIResourceSchema's name: <prefix>.<plural>.<group>.
func schemaName(plural string) string { return probeVersion + "." + plural + "." + probeGroup }

// checkPublish publishes widgets from the provider workspace: an APIResourceSchema and
// an APIExport of it with CRD storage.
func (p *providerPath) checkPublish(ctx context.Context, c *check) (string, error) {
	c.url = workspaceURL(p.front, p.paths.provider)
	dyn, err := p.client(c.url, false)
	if err != nil {
		return "", err
	}
	if _, err := create(ctx, dyn, gvrAPIResourceSchema, resourceSchema(widgets, "Widget")); err != nil {
		return "", err
	}
	export := apiExport{
		TypeMeta:   typeMeta(gvrAPIExport, "APIExport"),
		ObjectMeta: metav1.ObjectMeta{Name: widgets},
		Spec: apiExportSpec{Resources: []exportedResource{{
			Name: widgets, Group: probeGroup, Schema: schemaName(widgets), Storage: resourceStorage{CRD: &struct{}{}},
		}}},
	}
	if _, err := create(ctx, dyn, gvrAPIExport, export); err != nil {
		return "", err
	}
	return fmt.Sprintf("APIResourceSchema %s (apis.kcp.io/v1alpha1) and APIExport %s (apis.kcp.io/v1alpha2) in %s", schemaName(widgets), widgets, p.paths.provider), nil
}

// bind binds an export of the provider workspace in the consumer workspace and waits
// until the binding is Bound.
func (p *providerPath) bind(ctx context.Context, c *check, export string) (string, error) {
	c.url = workspaceURL(p.front, p.paths.consumer)
	dyn, err := p.client(c.url, false)
	if err != nil {
		return "", err
	}
	binding := apiBinding{
		TypeMeta:   typeMeta(gvrAPIBinding, "APIBinding"),
		ObjectMeta: metav1.ObjectMeta{Name: export},
		Spec:       apiBindingSpec{Reference: bindingReference{Export: &exportReference{Path: p.paths.provider, Name: export}}},
	}
	if _, err := create(ctx, dyn, gvrAPIBinding, binding); err != nil {
		return "", err
	}
	if _, err := poll(ctx, p.o.Wait, p.o.Interval, func(ctx context.Context) (bool, string, error) {
		u, err := dyn.Resource(gvrAPIBinding).Get(ctx, export, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		var b apiBinding
		if err := fromUnstructured(u, &b); err != nil {
			return false, "", err
		}
		return b.Status.Phase == bindingPhaseBound, fmt.Sprintf("phase %q, %s", b.Status.Phase, conditionsText(b.Status.Conditions)), nil
	}); err != nil {
		return "", fmt.Errorf("APIBinding %s in %s is not Bound: %w", export, p.paths.consumer, err)
	}
	return fmt.Sprintf("APIBinding %s (apis.kcp.io/v1alpha2) in %s to export %s:%s is Bound", export, p.paths.consumer, p.paths.provider, export), nil
}

func (p *providerPath) checkBind(ctx context.Context, c *check) (string, error) {
	return p.bind(ctx, c, widgets)
}

// shardVirtualWorkspaceURL reads the kcp Shard the workspaces are on from the root
// workspace: its virtualWorkspaceURL is the base of every URL it adds to a slice.
func (p *providerPath) shardVirtualWorkspaceURL(ctx context.Context) (string, error) {
	if p.shardVWURL != "" {
		return p.shardVWURL, nil
	}
	dyn, err := p.client(workspaceURL(p.front, "root"), false)
	if err != nil {
		return "", err
	}
	u, err := dyn.Resource(gvrShard).Get(ctx, p.o.Shard, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading kcp Shard %s in the root workspace: %w", p.o.Shard, err)
	}
	var s kcpShard
	if err := fromUnstructured(u, &s); err != nil {
		return "", err
	}
	vw := s.Spec.VirtualWorkspaceURL
	if vw == "" {
		vw = s.Spec.BaseURL // kcp's default when --shard-virtual-workspace-url is not set
	}
	if urlHost(vw) != p.o.ShardHostname {
		return "", fmt.Errorf("kcp Shard %s advertises virtual workspaces at %q (spec.virtualWorkspaceURL %q, baseURL %q), not on its public hostname %s: the shard needs --shard-virtual-workspace-url=https://%s",
			p.o.Shard, vw, s.Spec.VirtualWorkspaceURL, s.Spec.BaseURL, p.o.ShardHostname, p.o.ShardHostname)
	}
	p.shardVWURL = vw
	return vw, nil
}

// waitForSliceURL reads an endpoint slice in the provider workspace until it lists the
// shard's URL, and checks that URL: https on the shard's public hostname, no port but
// 443, no address, and the path kcp builds for this export or cached resource.
func (p *providerPath) waitForSliceURL(ctx context.Context, c *check, gvr schema.GroupVersionResource, kind, name, wantPath string) (string, string, error) {
	vw, err := p.shardVirtualWorkspaceURL(ctx)
	if err != nil {
		c.url = workspaceURL(p.front, "root")
		return "", "", err
	}
	c.url = workspaceURL(p.front, p.paths.provider)
	dyn, err := p.client(c.url, false)
	if err != nil {
		return "", "", err
	}
	prefix := strings.TrimSuffix(vw, "/") + "/"
	var found string
	var all []string
	if _, err := poll(ctx, p.o.Wait, p.o.Interval, func(ctx context.Context) (bool, string, error) {
		u, err := dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		var s endpointSlice
		if err := fromUnstructured(u, &s); err != nil {
			return false, "", err
		}
		all = all[:0]
		for _, e := range s.Status.Endpoints {
			all = append(all, e.URL)
			if strings.HasPrefix(e.URL, prefix) {
				found = e.URL
			}
		}
		if len(all) == 0 {
			return false, "no endpoints; " + conditionsText(s.Status.Conditions), nil
		}
		return found != "", "endpoints " + strings.Join(all, ", "), nil
	}); err != nil {
		return "", "", fmt.Errorf("%s %s in %s lists no URL of shard %s (under %s): %w; a slice lists a shard only once that shard holds an APIBinding to the export",
			kind, name, p.paths.provider, p.o.Shard, prefix, err)
	}
	c.url = found
	if err := SliceURLProblem(found, p.o.ShardHostname, wantPath); err != nil {
		return found, "", fmt.Errorf("%s %s advertises %w", kind, name, err)
	}
	return found, fmt.Sprintf("%s %s lists %s for shard %s (all endpoints: %s)", kind, name, found, p.o.Shard, strings.Join(all, ", ")), nil
}

// SliceURLProblem says what is wrong with an endpoint-slice URL for a provider in the
// cluster, nil when nothing is: it must be https on the shard's public hostname, with
// no port but 443 and no address (HTTPSURL), and have the path kcp builds for it.
func SliceURLProblem(raw, hostname, wantPath string) error {
	u, err := HTTPSURL(raw, true)
	switch {
	case err != nil:
		return err
	case u.Hostname() != hostname:
		return fmt.Errorf("%q, whose host %s is not the shard's public hostname %s", raw, u.Hostname(), hostname)
	case u.Path != wantPath || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q, whose path is not %s", raw, wantPath)
	}
	return nil
}

// checkEndpointSlice waits for the export's APIExportEndpointSlice (kcp makes one per
// APIExport, with the export's name) to list the shard's URL.
func (p *providerPath) checkEndpointSlice(ctx context.Context, c *check) (string, error) {
	found, msg, err := p.waitForSliceURL(ctx, c, gvrAPIExportEndpointSlice, "APIExportEndpointSlice", widgets,
		"/services/apiexport/"+p.clusters.provider+"/"+widgets)
	p.sliceURL = found
	return msg, err
}

// clusterURL is a slice URL followed by one logical cluster ("*": all of them).
func clusterURL(sliceURL, cluster string) string {
	return strings.TrimSuffix(sliceURL, "/") + "/clusters/" + cluster
}

// collectionURL is where a request for gvr under base goes, for the report.
func collectionURL(base string, gvr schema.GroupVersionResource) string {
	return strings.TrimSuffix(base, "/") + "/apis/" + gvr.Group + "/" + gvr.Version + "/" + gvr.Resource
}

func probeObject(gvr schema.GroupVersionResource, kind, name string) map[string]any {
	return map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"size": "small"},
	}
}

// checkCreate creates a Widget in the consumer's logical cluster through the export's
// virtual workspace at the slice URL.
func (p *providerPath) checkCreate(ctx context.Context, c *check) (string, error) {
	base := clusterURL(p.sliceURL, p.clusters.consumer)
	c.url = collectionURL(base, gvrWidgets)
	dyn, err := p.client(base, true)
	if err != nil {
		return "", err
	}
	name := p.names.consumer + "-a"
	if _, err := create(ctx, dyn, gvrWidgets, probeObject(gvrWidgets, "Widget", name)); err != nil {
		return "", err
	}
	return fmt.Sprintf("created Widget %s in logical cluster %s through the virtual workspace", name, p.clusters.consumer), nil
}

// checkList lists widgets across every bound workspace and finds the one made.
func (p *providerPath) checkList(ctx context.Context, c *check) (string, error) {
	base := clusterURL(p.sliceURL, "*")
	c.url = collectionURL(base, gvrWidgets)
	dyn, err := p.client(base, true)
	if err != nil {
		return "", err
	}
	list, err := dyn.Resource(gvrWidgets).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list: %w", err)
	}
	p.listRV = list.GetResourceVersion()
	want := p.names.consumer + "-a"
	if !listed(list, want, p.clusters.consumer) {
		return "", fmt.Errorf("lists %d Widget(s) (%s), not %s of logical cluster %s", len(list.Items), itemNames(list), want, p.clusters.consumer)
	}
	return fmt.Sprintf("lists %d Widget(s) across workspaces, %s of logical cluster %s among them", len(list.Items), want, p.clusters.consumer), nil
}

// listed reports whether list holds the object name of a logical cluster (any cluster
// when cluster is "").
func listed(list *unstructured.UnstructuredList, name, cluster string) bool {
	return slices.ContainsFunc(list.Items, func(u unstructured.Unstructured) bool {
		return u.GetName() == name && (cluster == "" || u.GetAnnotations()[logicalClusterAnnotationKey] == cluster)
	})
}

func itemNames(list *unstructured.UnstructuredList) string {
	var names []string
	for _, u := range list.Items {
		names = append(names, u.GetAnnotations()[logicalClusterAnnotationKey]+"|"+u.GetName())
	}
	return orNothing(strings.Join(names, ", "))
}

// watchFor opens a watch on gvr at base from resourceVersion, then runs make, and waits
// for the ADDED event of name: the event of an object made after the watch opened.
func (p *providerPath) watchFor(ctx context.Context, base string, gvr schema.GroupVersionResource, resourceVersion, name string, makeIt func(ctx context.Context) error) (string, error) {
	dyn, err := p.watchClient(base)
	if err != nil {
		return "", err
	}
	wctx, cancel := context.WithTimeout(ctx, p.o.Wait)
	defer cancel()
	w, err := dyn.Resource(gvr).Watch(wctx, metav1.ListOptions{ResourceVersion: resourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		return "", fmt.Errorf("open the watch: %w", err)
	}
	defer w.Stop()
	opened := time.Now()
	if err := makeIt(ctx); err != nil {
		return "", fmt.Errorf("the watch opened, but making %s failed: %w", name, err)
	}
	made := time.Now()
	var seen []string
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return "", fmt.Errorf("the watch closed after %s without the event of %s (events: %s)", time.Since(opened).Round(time.Millisecond), name, orNothing(strings.Join(seen, ", ")))
			}
			if ev.Type == watch.Error {
				return "", fmt.Errorf("the watch sent an error: %v", apierrors.FromObject(ev.Object))
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type == watch.Bookmark {
				continue
			}
			seen = append(seen, string(ev.Type)+" "+u.GetName())
			if ev.Type == watch.Added && u.GetName() == name {
				return fmt.Sprintf("watch opened, then %s was made; its ADDED event (logical cluster %s) came %s after it was made",
					name, orNothing(u.GetAnnotations()[logicalClusterAnnotationKey]), time.Since(made).Round(time.Millisecond)), nil
			}
		case <-wctx.Done():
			return "", fmt.Errorf("no ADDED event of %s within %s of making it (events: %s)", name, p.o.Wait, orNothing(strings.Join(seen, ", ")))
		}
	}
}

// checkWatch watches widgets across workspaces at the slice URL and creates another
// Widget through the virtual workspace after the watch opened.
func (p *providerPath) checkWatch(ctx context.Context, c *check) (string, error) {
	base := clusterURL(p.sliceURL, "*")
	c.url = collectionURL(base, gvrWidgets) + "?watch=true"
	name := p.names.consumer + "-b"
	creator, err := p.client(clusterURL(p.sliceURL, p.clusters.consumer), true)
	if err != nil {
		return "", err
	}
	return p.watchFor(ctx, base, gvrWidgets, p.listRV, name, func(ctx context.Context) error {
		_, err := create(ctx, creator, gvrWidgets, probeObject(gvrWidgets, "Widget", name))
		return err
	})
}

// checkCleanup deletes the scratch workspaces (kcp deletes what is in them), unless
// asked to keep them.
func (p *providerPath) checkCleanup(ctx context.Context, c *check) (string, error) {
	c.url = workspaceURL(p.front, "root")
	if len(p.made) == 0 {
		return "no workspace was made", nil
	}
	// The consumer first: it binds the provider's exports.
	var paths []string
	for _, n := range slices.Backward(p.made) {
		paths = append(paths, "root:"+n)
	}
	if p.o.Keep {
		return "kept (asked to): " + strings.Join(paths, ", "), nil
	}
	dyn, err := p.client(c.url, false)
	if err != nil {
		return "", err
	}
	var errs []error
	for _, n := range slices.Backward(p.made) {
		if err := dyn.Resource(gvrWorkspace).Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete workspace root:%s: %w", n, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	return "deleted " + strings.Join(paths, ", "), nil
}
