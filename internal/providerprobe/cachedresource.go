package providerprobe

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cached-resource path, the way the hub's infrastructure provider publishes its
// templates: the provider workspace holds flavors (a CRD of its own), a
// ClusterCachedResource replicates them into kcp's cache server, and an APIExport
// serves them to consumers as a virtual resource from a
// ClusterCachedResourceEndpointSlice. Consumers and the provider read them; nobody
// writes them but the provider, in its own workspace.

// cacheAPIsHint is what a 404 on cache.kcp.io means.
const cacheAPIsHint = "kcp serves cache.kcp.io only with the CacheAPIs feature gate: --feature-gates=CacheAPIs=true on every shard"

// checkCachedPublish makes the source of the cached resource in the provider workspace
// and publishes it: the flavors CRD and one Flavor, its APIResourceSchema, the
// ClusterCachedResource (waiting for its identity hash), the APIExport with the virtual
// resource and the ClusterCachedResourceEndpointSlice it names.
func (p *providerPath) checkCachedPublish(ctx context.Context, c *check) (string, error) {
	c.url = workspaceURL(p.front, p.paths.provider)
	dyn, err := p.client(c.url, false)
	if err != nil {
		return "", err
	}
	crd := customResourceDefinition{
		TypeMeta:   typeMeta(gvrCRD, "CustomResourceDefinition"),
		ObjectMeta: metav1.ObjectMeta{Name: flavors + "." + probeGroup},
	}
	crd.Spec = crdSpec{
		Group: probeGroup, Scope: "Cluster",
		Names: resourceNames{Plural: flavors, Singular: "flavor", Kind: "Flavor", ListKind: "FlavorList"},
		Versions: []crdVersion{{Name: probeVersion, Served: true, Storage: true,
			Schema: crdSchema{OpenAPIV3Schema: json.RawMessage(objectSchema)}}},
	}
	if _, err := create(ctx, dyn, gvrCRD, crd); err != nil {
		return "", err
	}
	if _, err := poll(ctx, p.o.Wait, p.o.Interval, func(ctx context.Context) (bool, string, error) {
		u, err := dyn.Resource(gvrCRD).Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		var got customResourceDefinition
		if err := fromUnstructured(u, &got); err != nil {
			return false, "", err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == "Established" && cond.Status == "True" {
				return true, "Established", nil
			}
		}
		return false, conditionsText(got.Status.Conditions), nil
	}); err != nil {
		return "", fmt.Errorf("CRD %s is not Established: %w", crd.Name, err)
	}
	// Made before the cache watches: replication must carry what exists, not only news.
	if err := p.makeFlavor(ctx, p.names.provider+"-a"); err != nil {
		return "", err
	}
	if _, err := create(ctx, dyn, gvrAPIResourceSchema, resourceSchema(flavors, "Flavor")); err != nil {
		return "", err
	}

	cached := clusterCachedResource{
		TypeMeta:   typeMeta(gvrClusterCachedResource, "ClusterCachedResource"),
		ObjectMeta: metav1.ObjectMeta{Name: flavors},
	}
	cached.Spec.Group, cached.Spec.Version, cached.Spec.Resource = probeGroup, probeVersion, flavors
	if _, err := create(ctx, dyn, gvrClusterCachedResource, cached); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%w; %s", err, cacheAPIsHint)
		}
		return "", err
	}
	if _, err := poll(ctx, p.o.Wait, p.o.Interval, func(ctx context.Context) (bool, string, error) {
		u, err := dyn.Resource(gvrClusterCachedResource).Get(ctx, flavors, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		var got clusterCachedResource
		if err := fromUnstructured(u, &got); err != nil {
			return false, "", err
		}
		p.identityHash = got.Status.IdentityHash
		return got.Status.IdentityHash != "" && got.Status.Phase == clusterCachedResourceReady,
			fmt.Sprintf("phase %q, identity hash set: %t, %s", got.Status.Phase, got.Status.IdentityHash != "", conditionsText(got.Status.Conditions)), nil
	}); err != nil {
		return "", fmt.Errorf("ClusterCachedResource %s is not Ready with an identity: %w", flavors, err)
	}

	// The export before the slice that names it: a slice whose export does not exist yet
	// only makes kcp's controllers log "not found" until it does.
	export := apiExport{
		TypeMeta:   typeMeta(gvrAPIExport, "APIExport"),
		ObjectMeta: metav1.ObjectMeta{Name: flavors},
		Spec: apiExportSpec{Resources: []exportedResource{{
			Name: flavors, Group: probeGroup, Schema: schemaName(flavors),
			Storage: resourceStorage{Virtual: &virtualStorage{
				Reference:    typedReference{APIGroup: gvrCachedResourceEndpoints.Group, Kind: kindClusterCachedEndpoints, Name: flavors},
				IdentityHash: p.identityHash,
			}},
		}}},
	}
	if _, err := create(ctx, dyn, gvrAPIExport, export); err != nil {
		return "", err
	}
	slice := clusterCachedResourceEndpointSlice{
		TypeMeta:   typeMeta(gvrCachedResourceEndpoints, kindClusterCachedEndpoints),
		ObjectMeta: metav1.ObjectMeta{Name: flavors},
	}
	slice.Spec.ClusterCachedResource.Name = flavors
	slice.Spec.Export = exportReference{Name: flavors}
	if _, err := create(ctx, dyn, gvrCachedResourceEndpoints, slice); err != nil {
		return "", err
	}
	return fmt.Sprintf("in %s: CRD %s.%s with Flavor %s-a, APIResourceSchema %s, ClusterCachedResource %s (cache.kcp.io/v1alpha1, Ready, identity hash %s...), APIExport %s serving it as a virtual resource from ClusterCachedResourceEndpointSlice %s",
		p.paths.provider, flavors, probeGroup, p.names.provider, schemaName(flavors), flavors, short(p.identityHash), flavors, flavors), nil
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// makeFlavor makes a Flavor in the provider workspace through the front proxy: the
// source the cache replicates.
func (p *providerPath) makeFlavor(ctx context.Context, name string) error {
	dyn, err := p.client(workspaceURL(p.front, p.paths.provider), false)
	if err != nil {
		return err
	}
	_, err = create(ctx, dyn, gvrFlavors, probeObject(gvrFlavors, "Flavor", name))
	return err
}

func (p *providerPath) checkCachedBind(ctx context.Context, c *check) (string, error) {
	return p.bind(ctx, c, flavors)
}

// checkCachedEndpointSlice waits for the ClusterCachedResourceEndpointSlice to list the
// shard's replication URL: a shard adds it once it holds a binding to the export.
func (p *providerPath) checkCachedEndpointSlice(ctx context.Context, c *check) (string, error) {
	found, msg, err := p.waitForSliceURL(ctx, c, gvrCachedResourceEndpoints, kindClusterCachedEndpoints, flavors,
		"/services/replication/"+p.clusters.provider+"/"+flavors)
	p.cachedSliceURL = found
	return msg, err
}

// checkCachedList lists flavors at the replication URL in the consumer's logical cluster
// until the provider's Flavor has reached the cache. The replication virtual workspace
// serves one bound workspace at a time: it answers a wildcard (/clusters/*) with 400
// "Wildcard request not supported", and shows the cached objects as if they were the
// consumer's own (kcp.io/cluster is the consumer's logical cluster).
func (p *providerPath) checkCachedList(ctx context.Context, c *check) (string, error) {
	base := clusterURL(p.cachedSliceURL, p.clusters.consumer)
	c.url = collectionURL(base, gvrFlavors)
	dyn, err := p.client(base, true)
	if err != nil {
		return "", err
	}
	want := p.names.provider + "-a"
	var count int
	if _, err := poll(ctx, p.o.Wait, p.o.Interval, func(ctx context.Context) (bool, string, error) {
		list, err := dyn.Resource(gvrFlavors).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", fmt.Errorf("list: %w", err)
		}
		p.cachedListRV, count = list.GetResourceVersion(), len(list.Items)
		return listed(list, want, p.clusters.consumer), "listed " + itemNames(list), nil
	}); err != nil {
		return "", fmt.Errorf("the replication virtual workspace does not list Flavor %s in logical cluster %s: %w", want, p.clusters.consumer, err)
	}
	return fmt.Sprintf("lists %d Flavor(s) from kcp's cache in logical cluster %s, %s among them", count, p.clusters.consumer, want), nil
}

// checkCachedWatch watches flavors at the replication URL in the consumer's logical
// cluster and makes another Flavor in the provider workspace after the watch opened:
// its event comes through the cache.
func (p *providerPath) checkCachedWatch(ctx context.Context, c *check) (string, error) {
	base := clusterURL(p.cachedSliceURL, p.clusters.consumer)
	c.url = collectionURL(base, gvrFlavors) + "?watch=true"
	name := p.names.provider + "-b"
	return p.watchFor(ctx, base, gvrFlavors, p.cachedListRV, name, func(ctx context.Context) error {
		return p.makeFlavor(ctx, name)
	})
}

// checkCachedConsumerRead lists flavors in the consumer workspace through the front
// proxy: the shard serves the virtual resource by calling the slice's URL itself, so
// this is the shard following its own public URL.
func (p *providerPath) checkCachedConsumerRead(ctx context.Context, c *check) (string, error) {
	base := workspaceURL(p.front, p.paths.consumer)
	c.url = collectionURL(base, gvrFlavors)
	dyn, err := p.client(base, false)
	if err != nil {
		return "", err
	}
	want := []string{p.names.provider + "-a", p.names.provider + "-b"}
	if _, err := poll(ctx, p.o.Wait, p.o.Interval, func(ctx context.Context) (bool, string, error) {
		list, err := dyn.Resource(gvrFlavors).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", fmt.Errorf("list: %w", err)
		}
		return listed(list, want[0], "") && listed(list, want[1], ""), "listed " + itemNames(list), nil
	}); err != nil {
		return "", fmt.Errorf("the consumer workspace does not list Flavors %v: %w; shard %s serves them by calling %s itself, so look at its log for that call",
			want, err, p.o.Shard, p.cachedSliceURL)
	}
	return fmt.Sprintf("the consumer workspace lists Flavors %s and %s, which shard %s fetched from %s", want[0], want[1], p.o.Shard, p.cachedSliceURL), nil
}

// checkCachedWriteRefused tries to create a Flavor in the consumer's logical cluster
// through the replication URL: the cache is read-only for everyone, so kcp must refuse.
func (p *providerPath) checkCachedWriteRefused(ctx context.Context, c *check) (string, error) {
	base := clusterURL(p.cachedSliceURL, p.clusters.consumer)
	c.url = collectionURL(base, gvrFlavors)
	dyn, err := p.client(base, true)
	if err != nil {
		return "", err
	}
	name := p.names.consumer + "-written"
	_, err = create(ctx, dyn, gvrFlavors, probeObject(gvrFlavors, "Flavor", name))
	switch {
	case err == nil:
		return "", fmt.Errorf("kcp accepted a Flavor written through the replication virtual workspace; cached resources are read-only")
	case apierrors.IsForbidden(err), apierrors.IsMethodNotSupported(err):
		return fmt.Sprintf("refused as it must be: %v", err), nil
	}
	return "", fmt.Errorf("the write failed, but not as a refusal: %w", err)
}
