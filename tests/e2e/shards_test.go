//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

// tlsRouteGVR is the kind edge's route kind (Gateway API v1, as the program writes it).
var tlsRouteGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "tlsroutes"}

// edgeRouteName is the kind edge's TLSRoute of a shard (components/edge_kind.go); the
// steps find it in the offline plan, so a renamed route fails them there.
func edgeRouteName(shard string) string { return "kcp-" + shard }

// The shard the day-two steps add and retire.
var beta = map[string]any{"name": "beta", "hostname": "beta.kcp.localhost", "clusterIP": "10.96.0.103", "replicas": 1}

// sharedUpdates are the only existing objects that adding or retiring a shard may
// update, because one object serves every shard: the CoreDNS hosts ConfigMap (the DNS
// answers) and, on kind, the BackendTrafficPolicy that targets every route. The kind
// Gateway has one TLS passthrough listener for every hostname, so it must not change.
// Any other update, and any replace, fails the step.
var sharedUpdates = []struct{ kind, name string }{
	{"ConfigMap", naming.SplitHorizonHostsConfigMap},
	{"BackendTrafficPolicy", naming.EdgeGatewayName},
}

// addShard runs preview and up after a shard was added to the config (before: the plan
// without it, after: with it) and checks what the issue asks of an added shard.
func addShard(t *testing.T, ctx context.Context, e *env, before, after rendered, label string) {
	s := e.stack
	added := added(before, after)
	name := "beta"
	for _, want := range []struct{ kind, name string }{
		{"StatefulSet", naming.EtcdName(name)}, {"Shard", name}, {"Service", naming.OwnedServiceName(name)},
		{"TLSRoute", edgeRouteName(name)},
	} {
		if urn := after.urnOf(want.kind, want.name); urn == "" || !added[urn] {
			t.Errorf("the offline plan does not add %s %s", want.kind, want.name)
		}
	}

	pctx, cancel := context.WithTimeout(ctx, previewTimeout)
	defer cancel()
	_, plog, err := s.preview(pctx, optpreview.Diff())
	if err != nil {
		t.Fatalf("%s preview failed: %v\n%s", label, err, indent(plog.diagnostics()))
	}
	checkOnlyPlannedChanges(t, label+" preview", plog, before, after)

	snap := takeSnapshot(t, ctx, e)
	uctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	start := time.Now()
	res, log, err := s.up(uctx, nil)
	if err != nil {
		t.Fatalf("%s up failed after %s: %v\n%s", label, time.Since(start).Round(time.Second), err, indent(log.diagnostics()))
	}
	t.Logf("%s up (beta): %s in %s", label, changeCounts(summaryOf(res.Summary)), time.Since(start).Round(time.Second))
	checkOnlyPlannedChanges(t, label+" up", log, before, after)
	checkAddOrder(t, after, log, name)
	snap.checkUntouched(t, ctx, e, name, nil)

	// What the cluster now has: the Shard Available, its DNS answer, its route.
	sh, err := e.c.dyn.Resource(shardGVR).Namespace(naming.NamespaceKcp).Get(ctx, name, metav1.GetOptions{})
	if err != nil || !isAvailable(sh) {
		t.Errorf("Shard %s after the %s up: available=%v, %v", name, label, err == nil && isAvailable(sh), err)
	}
	hosts := hostsAnswers(t, ctx, e)
	if !slices.Contains(hosts, fmt.Sprintf("%s %s", beta["clusterIP"], beta["hostname"])) {
		t.Errorf("the CoreDNS hosts ConfigMap does not answer %s with %s: %v", beta["hostname"], beta["clusterIP"], hosts)
	}
	if _, err := e.c.dyn.Resource(tlsRouteGVR).Namespace(naming.NamespaceKcp).Get(ctx, edgeRouteName(name), metav1.GetOptions{}); err != nil {
		t.Errorf("the edge route of %s: %v", name, err)
	}
	// kcp itself: the shard registered with the running root shard.
	waitForKcpShards(t, ctx, e, label, kcpShardsOf(after))
	checkNoChanges(t, ctx, s, "post-"+label)
}

// kcpShardsOf are the names under which kcp's root workspace lists the shards of a plan.
func kcpShardsOf(p rendered) []string {
	var names []string
	for _, s := range p.cfg.Kcp.AllShards() {
		names = append(names, naming.KcpShardName(s.Name))
	}
	slices.Sort(names)
	return names
}

// retireShard runs up after the shard was taken out of kcp.shards and listed in
// kcp.retiredShards, and checks that its Shard, Service, route and DNS answer go, its
// etcd claims stay, the stack output says where they are, and nothing else changes. It
// returns the kept claims and their UIDs.
func retireShard(t *testing.T, ctx context.Context, e *env, before rendered, name, label string) map[string]string {
	s := e.stack
	after := s.render()
	pctx, cancel := context.WithTimeout(ctx, previewTimeout)
	defer cancel()
	_, plog, err := s.preview(pctx, optpreview.Diff())
	if err != nil {
		t.Fatalf("%s preview failed: %v\n%s", label, err, indent(plog.diagnostics()))
	}
	checkOnlyPlannedChanges(t, label+" preview", plog, before, after)
	claims := claimUIDs(t, ctx, e, name)
	if len(claims) != after.cfg.Etcd.Members {
		t.Fatalf("%s has claims %v before the %s, want %d", name, claims, label, after.cfg.Etcd.Members)
	}

	snap := takeSnapshot(t, ctx, e)
	uctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	start := time.Now()
	res, log, err := s.up(uctx, nil)
	took := time.Since(start).Round(time.Second)
	if err != nil {
		t.Fatalf("%s up failed after %s: %v\n%s", label, took, err, indent(log.diagnostics()))
	}
	t.Logf("%s up (%s): %s in %s", label, name, changeCounts(summaryOf(res.Summary)), took)
	checkOnlyPlannedChanges(t, label+" up", log, before, after)
	snap.checkUntouched(t, ctx, e, name, map[string]bool{name: true})

	// Gone: the Shard, its Service, its route, its DNS answer, its etcd StatefulSet.
	gone := []struct {
		what string
		get  func() error
	}{
		{"Shard " + name, func() error {
			_, err := e.c.dyn.Resource(shardGVR).Namespace(naming.NamespaceKcp).Get(ctx, name, metav1.GetOptions{})
			return err
		}},
		{"Service " + naming.OwnedServiceName(name), func() error {
			_, err := e.c.kube.CoreV1().Services(naming.NamespaceKcp).Get(ctx, naming.OwnedServiceName(name), metav1.GetOptions{})
			return err
		}},
		{"TLSRoute " + edgeRouteName(name), func() error {
			_, err := e.c.dyn.Resource(tlsRouteGVR).Namespace(naming.NamespaceKcp).Get(ctx, edgeRouteName(name), metav1.GetOptions{})
			return err
		}},
		{"StatefulSet " + naming.EtcdName(name), func() error {
			_, err := e.c.kube.AppsV1().StatefulSets(naming.NamespaceEtcd).Get(ctx, naming.EtcdName(name), metav1.GetOptions{})
			return err
		}},
	}
	for _, g := range gone {
		if err := g.get(); !apierrors.IsNotFound(err) {
			t.Errorf("%s is still there after the %s (%v)", g.what, label, err)
		}
	}
	for _, line := range hostsAnswers(t, ctx, e) {
		if strings.HasSuffix(line, " "+beta["hostname"].(string)) {
			t.Errorf("the CoreDNS hosts ConfigMap still answers for the retired shard: %q", line)
		}
	}

	// Kept: the claims, with the same UIDs, and the output says where they are.
	after2 := claimUIDs(t, ctx, e, name)
	if !mapsEqual(after2, claims) {
		t.Errorf("the %s did not keep %s's claims: %v, were %v", label, name, after2, claims)
	}
	checkRetiredOutput(t, ctx, e, name, claims)
	// kcp itself: the operator removed the shard from the running root shard (the
	// Shard's finalizer), and nobody lifted that finalizer.
	waitForKcpShards(t, ctx, e, label, kcpShardsOf(after))
	checkNoChanges(t, ctx, s, "post-"+label)
	return claims
}

// checkRetiredOutput checks the stack output retiredShardVolumes against the cluster: the
// retired shard's namespace, each claim and the volume bound to it.
func checkRetiredOutput(t *testing.T, ctx context.Context, e *env, name string, claims map[string]string) {
	t.Helper()
	outs, err := e.stack.stack.Outputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := outs["retiredShardVolumes"].Value.(map[string]any)
	entry, _ := all[name].(map[string]any)
	if entry["namespace"] != naming.NamespaceEtcd {
		t.Errorf("retiredShardVolumes.%s.namespace = %v, want %s (output: %s)", name, entry["namespace"], naming.NamespaceEtcd, compact(all))
	}
	listed, _ := entry["claims"].(map[string]any)
	if len(listed) != len(claims) {
		t.Errorf("retiredShardVolumes.%s.claims = %s, want the %d kept claims %v", name, compact(listed), len(claims), claims)
	}
	for claim := range claims {
		pvc, err := e.c.kube.CoreV1().PersistentVolumeClaims(naming.NamespaceEtcd).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			t.Errorf("kept claim %s: %v", claim, err)
			continue
		}
		if pvc.Spec.VolumeName == "" || listed[claim] != pvc.Spec.VolumeName {
			t.Errorf("retiredShardVolumes.%s.claims[%s] = %v, but the claim is bound to volume %q", name, claim, listed[claim], pvc.Spec.VolumeName)
		}
	}
	t.Logf("stack output retiredShardVolumes: %s", compact(all))
}

// checkOnlyPlannedChanges fails for any operation of the engine other than: a create of
// what the after plan adds, a delete of what it drops, an update of a shared object
// (sharedUpdates), or the perpetual diff step 5 reported. Each planned create and delete
// must happen, and so must the hosts ConfigMap's update.
func checkOnlyPlannedChanges(t *testing.T, label string, log *eventLog, before, after rendered) {
	t.Helper()
	adds, drops := added(before, after), added(after, before)
	shared := map[string]bool{}
	for _, u := range sharedUpdates {
		if urn := after.urnOf(u.kind, u.name); urn != "" {
			shared[urn] = true
		}
	}
	hostsURN := after.urnOf("ConfigMap", naming.SplitHorizonHostsConfigMap)
	corefileURN := ""
	for _, o := range after.objects {
		if o.Patch && o.Manifest["kind"] == "ConfigMap" && mockstack.MetadataName(o.Resource) == naming.CoreDNSConfigMap {
			corefileURN = o.Resource.URN
		}
	}
	seen := map[string]bool{}
	var wrong, updated []string
	for urn, ops := range log.opsByURN() {
		for _, op := range ops {
			switch {
			case op == "same" || op == "read" || op == "refresh":
			case op == "create" && adds[urn], (op == "delete" || op == "discard") && drops[urn]:
				seen[urn] = true
			case op == "update" && shared[urn]:
				seen[urn] = true
				updated = append(updated, shortURN(urn))
			case op == "update" && urn == corefileURN && strings.HasSuffix(label, " preview"):
				// Only in the preview: the Corefile patch is computed from a read of the live
				// Corefile that waits for the new or retired shard's objects, so the preview
				// cannot know it and shows an update; the up must not change it.
				t.Logf("%s: the Corefile patch shows as an update: its input waits on the shard's objects (unknown in a preview)", label)
			case drift.has(urn):
				t.Logf("%s: %s %s is the perpetual diff step 5 reported", label, op, shortURN(urn))
			default:
				wrong = append(wrong, op+" "+shortURN(urn))
			}
		}
	}
	slices.Sort(wrong)
	if len(wrong) > 0 {
		t.Errorf("%s: changes the test does not allow (only creates of the new shard's objects, deletes of the retired one's, and updates of %v):%s",
			label, sharedUpdates, indent(wrong))
	}
	var missing []string
	for urn := range adds {
		if !seen[urn] && !readOnly(after, urn) {
			missing = append(missing, "create "+shortURN(urn))
		}
	}
	for urn := range drops {
		if !seen[urn] && !readOnly(before, urn) {
			missing = append(missing, "delete "+shortURN(urn))
		}
	}
	if !seen[hostsURN] {
		missing = append(missing, "update "+shortURN(hostsURN))
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("%s: the offline plan's changes that did not happen:%s", label, indent(missing))
	}
	t.Logf("%s: %d creates, %d deletes as planned; shared updates %v", label, len(adds), len(drops), updated)
}

// added is the URNs after declares and before does not.
func added(before, after rendered) map[string]bool {
	had := map[string]bool{}
	for _, r := range before.rec.Resources {
		had[r.URN] = true
	}
	out := map[string]bool{}
	for _, r := range after.rec.Resources {
		if !had[r.URN] {
			out[r.URN] = true
		}
	}
	return out
}

// readOnly reports whether the plan only reads urn (the engine shows a read, not a create).
func readOnly(p rendered, urn string) bool {
	for _, r := range p.rec.Resources {
		if r.URN == urn {
			return r.Read
		}
	}
	return false
}

// checkAddOrder checks, from the engine's events, the design's order for an added shard:
// its etcd (and the root shard, which already runs) before its Shard, and the Shard
// Available before its route and DNS answer.
func checkAddOrder(t *testing.T, p rendered, log *eventLog, name string) {
	t.Helper()
	steps := log.steps()
	etcd, shard := steps[p.urnOf("StatefulSet", naming.EtcdName(name))], steps[p.urnOf("Shard", name)]
	route, hosts := steps[p.urnOf("TLSRoute", edgeRouteName(name))], steps[p.urnOf("ConfigMap", naming.SplitHorizonHostsConfigMap)]
	root := steps[p.urnOf("RootShard", naming.RootShardName)]
	if etcd == nil || shard == nil || route == nil || hosts == nil {
		t.Fatalf("the up's events lack a step: etcd %v, Shard %v, route %v, hosts %v", etcd != nil, shard != nil, route != nil, hosts != nil)
	}
	if root != nil && root.op != "same" {
		t.Errorf("the root shard was %s while a shard was added", root.op)
	}
	order := []struct {
		first, then *engineStep
		what        string
	}{
		{etcd, shard, "etcd-" + name + " before Shard " + name},
		{shard, route, "Shard " + name + " Available before its route"},
		{shard, hosts, "Shard " + name + " Available before its DNS answer"},
	}
	for _, o := range order {
		if o.first.out == 0 || o.then.pre == 0 || o.first.out > o.then.pre {
			t.Errorf("not %s: finished at event %d, next started at event %d", o.what, o.first.out, o.then.pre)
		} else {
			t.Logf("%s (events %d < %d)", o.what, o.first.out, o.then.pre)
		}
	}
	if shard.outputs != nil && !isAvailable(&unstructured.Unstructured{Object: shard.outputs}) {
		t.Errorf("the engine recorded Shard %s without Available: %s", name, compact(shard.outputs["status"]))
	}
}

// snapshot is what must not change while a shard is added or retired.
type snapshot struct {
	generations map[string]int64          // Deployments and StatefulSets: kind ns/name -> generation
	templates   map[string]corev1.PodSpec // Deployments: pod template spec
	uids        map[string]string         // data holders and kcp objects -> UID
	hubSecret   []byte
}

func takeSnapshot(t *testing.T, ctx context.Context, e *env) snapshot {
	t.Helper()
	s := snapshot{generations: map[string]int64{}, templates: map[string]corev1.PodSpec{}, uids: dataHolders(t, ctx, e.c)}
	deps, err := e.c.kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		s.generations["Deployment "+d.Namespace+"/"+d.Name] = d.Generation
		s.templates["Deployment "+d.Namespace+"/"+d.Name] = d.Spec.Template.Spec
	}
	sts, err := e.c.kube.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range sts.Items {
		s.generations["StatefulSet "+d.Namespace+"/"+d.Name] = d.Generation
	}
	hub := e.plan.cfg.Hub
	secret, err := e.c.kube.CoreV1().Secrets(hub.Namespace).Get(ctx, hub.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.hubSecret = secret.Data[hub.SecretKey]
	return s
}

// checkUntouched fails when an object of the snapshot changed generation or UID, or the
// hub Secret's content changed; objects of the shards in leaving may go. The one change
// it lets through is the kcp-operator's own: with service-account authentication (the
// design's auth.serviceAccount.enabled), the operator mounts every shard's
// service-account certificate into every kcp Deployment (kcp-operator
// internal/resources/utils/authentication.go, applyServiceAccountAuthentication), so
// adding or retiring a shard changes the root shard's, the other shards' and the front
// proxy's pod templates by exactly that volume, mount and --service-account-key-file
// flag, and they roll. Any other difference fails.
func (s snapshot) checkUntouched(t *testing.T, ctx context.Context, e *env, shard string, leaving map[string]bool) {
	t.Helper()
	now := takeSnapshot(t, ctx, e)
	var rolled []string
	ofLeaving := func(key string) bool {
		for name := range leaving {
			for _, part := range []string{"/" + naming.EtcdName(name), "/" + naming.ShardDeployment(name), "/" + naming.OwnedServiceName(name), "/" + name} {
				if strings.HasSuffix(key, part) || strings.Contains(key, part+"-") {
					return true
				}
			}
		}
		return false
	}
	for key, gen := range s.generations {
		got, ok := now.generations[key]
		switch {
		case !ok && ofLeaving(key):
		case !ok:
			t.Errorf("%s is gone", key)
		case got != gen && strings.HasPrefix(key, "Deployment "+naming.NamespaceKcp+"/") && onlyShardCertDiffers(s.templates[key], now.templates[key], shard):
			rolled = append(rolled, fmt.Sprintf("%s (generation %d -> %d)", key, gen, got))
		case got != gen:
			before, _ := json.Marshal(s.templates[key])
			after, _ := json.Marshal(now.templates[key])
			t.Errorf("%s was changed: generation %d, was %d; pod template before %s\nafter %s", key, got, gen, before, after)
		}
	}
	if len(rolled) > 0 {
		slices.Sort(rolled)
		t.Logf("the kcp-operator rolled these to mount or unmount %s's service-account certificate (volume, mount, --service-account-key-file), and changed nothing else in them:%s", shard, indent(rolled))
	}
	for key, uid := range s.uids {
		got, ok := now.uids[key]
		switch {
		case strings.HasPrefix(key, "persistentvolumeclaims ") && got != uid:
			t.Errorf("%s was deleted or replaced: uid %q, was %q", key, got, uid)
		case !ok && ofLeaving(key):
		case !ok:
			t.Errorf("%s is gone", key)
		case got != uid:
			t.Errorf("%s was replaced (uid %s, was %s)", key, got, uid)
		}
	}
	if !bytes.Equal(now.hubSecret, s.hubSecret) || len(s.hubSecret) == 0 {
		t.Errorf("the hub Secret's %s changed (or is empty)", e.plan.cfg.Hub.SecretKey)
	}
	t.Logf("unchanged: %d Deployments and StatefulSets (generation), %d data holders and kcp objects (UID), the hub Secret", len(s.generations), len(s.uids))
}

// onlyShardCertDiffers reports whether two pod specs differ, and only by what the
// operator adds for the shard's service-account certificate: the volume
// <shard>-service-account, its mount, and the flag
// --service-account-key-file=/etc/kcp/tls/<shard>/service-account/tls.crt.
func onlyShardCertDiffers(before, after corev1.PodSpec, shard string) bool {
	strip := func(p corev1.PodSpec) (corev1.PodSpec, int) {
		p = *p.DeepCopy()
		n := 0
		ofShard := func(name string) bool { return strings.HasPrefix(name, shard+"-service-account") }
		p.Volumes = slices.DeleteFunc(p.Volumes, func(v corev1.Volume) bool {
			if ofShard(v.Name) {
				n++
				return true
			}
			return false
		})
		keyFile := "--service-account-key-file=/etc/kcp/tls/" + shard + "/service-account/"
		for i := range p.Containers {
			p.Containers[i].VolumeMounts = slices.DeleteFunc(p.Containers[i].VolumeMounts, func(m corev1.VolumeMount) bool { return ofShard(m.Name) })
			p.Containers[i].Args = slices.DeleteFunc(p.Containers[i].Args, func(a string) bool { return strings.HasPrefix(a, keyFile) })
		}
		return p, n
	}
	b, nb := strip(before)
	a, na := strip(after)
	return nb+na > 0 && equality.Semantic.DeepEqual(a, b)
}

// claimUIDs are the shard's etcd claims and their UIDs.
func claimUIDs(t *testing.T, ctx context.Context, e *env, shard string) map[string]string {
	t.Helper()
	list, err := e.c.kube.CoreV1().PersistentVolumeClaims(naming.NamespaceEtcd).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, pvc := range list.Items {
		if strings.HasPrefix(pvc.Name, "data-"+naming.EtcdName(shard)+"-") {
			out[pvc.Name] = string(pvc.UID)
		}
	}
	return out
}

// hostsAnswers are the lines of the CoreDNS hosts ConfigMap.
func hostsAnswers(t *testing.T, ctx context.Context, e *env) []string {
	t.Helper()
	cm, err := e.c.kube.CoreV1().ConfigMaps(naming.NamespaceKubeSystem).Get(ctx, naming.SplitHorizonHostsConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range cm.Data {
		for _, line := range strings.Split(v, "\n") {
			if line = strings.Join(strings.Fields(line), " "); line != "" {
				out = append(out, line)
			}
		}
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// withoutShard is the shards list without the named shard.
func withoutShard(shards []any, name string) []any {
	var out []any
	for _, s := range shards {
		if m, ok := s.(map[string]any); ok && m["name"] == name {
			continue
		}
		out = append(out, s)
	}
	return out
}

// editKcp changes the stack's railgrid-kcp:kcp section in its stack file, as an operator
// edits Pulumi.<stack>.yaml, and returns the plan of the config before the edit.
func (s *e2eStack) editKcp(edit func(kcp map[string]any)) rendered {
	s.t.Helper()
	before := s.render()
	data, err := os.ReadFile(s.cfgFile)
	if err != nil {
		s.t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.Unmarshal(data, &file); err != nil {
		s.t.Fatal(err)
	}
	cfg, _ := file["config"].(map[string]any)
	kcp, ok := cfg[config.Project+":kcp"].(map[string]any)
	if !ok {
		s.t.Fatalf("%s has no %s:kcp mapping", s.cfgFile, config.Project)
	}
	edit(kcp)
	out, err := yaml.Marshal(file)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(s.cfgFile, out, 0o600); err != nil {
		s.t.Fatal(err)
	}
	return before
}
