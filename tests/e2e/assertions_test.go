package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/railgrid/railgrid-kcp/components"
	"github.com/railgrid/railgrid-kcp/naming"
	"github.com/railgrid/railgrid-kcp/tests/internal/testenv"
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

// checkOrder checks, from the engine's events, that every kcp object's create started
// only after what it needs had finished (and, for kcp objects, was reported Available).
func checkOrder(t *testing.T, p rendered, log *eventLog) {
	t.Helper()
	steps := log.steps()
	rs := p.urnOf("RootShard", naming.RootShardName)
	sh := p.urnOf("Shard", "alpha")
	fp := p.urnOf("FrontProxy", naming.FrontProxyName)
	// The Kubeconfig of the config's re-mint generation (interruptedUp runs after two).
	kc := p.urnOf("Kubeconfig", naming.KubeconfigObjectName(p.cfg.Hub.RemintGeneration))
	hub := p.urnOf("Secret", p.cfg.Hub.SecretName)
	rules := []struct {
		dependent string
		needs     []string
	}{
		{rs, []string{p.releaseURN(), p.urnOf("Issuer", naming.SelfSignedIssuer), p.urnOf("StatefulSet", naming.EtcdName(naming.RootShardName))}},
		{sh, []string{rs, p.urnOf("StatefulSet", naming.EtcdName("alpha"))}},
		{fp, []string{rs}},
		{kc, []string{fp}},
		{hub, []string{kc}},
	}
	// The add-ons the stack installs (none in killed-up's plan for cert-manager): the
	// issuer needs cert-manager's webhook serving, the edge Envoy Gateway's CRDs.
	if cm := p.releaseURNOf("cert-manager"); cm != "" {
		rules = append(rules, struct {
			dependent string
			needs     []string
		}{p.urnOf("Issuer", naming.SelfSignedIssuer), []string{cm}})
	}
	if eg := p.releaseURNOf("envoy-gateway"); eg != "" {
		rules = append(rules, struct {
			dependent string
			needs     []string
		}{p.urnOf("Gateway", naming.EdgeGatewayName), []string{eg}})
	}
	var timeline []string
	for _, r := range rules {
		d := steps[r.dependent]
		if r.dependent == "" || d == nil || d.pre == 0 {
			t.Errorf("no create of %s in the up's events", shortURN(r.dependent))
			continue
		}
		for _, need := range r.needs {
			n := steps[need]
			switch {
			case need == "":
				t.Errorf("%s: a dependency is missing from the offline plan", shortURN(r.dependent))
			case n == nil || n.out == 0:
				t.Errorf("%s was created, but %s never finished", shortURN(r.dependent), shortURN(need))
			case n.out > d.pre:
				t.Errorf("%s was created (event %d) before %s had finished (event %d)", shortURN(r.dependent), d.pre, shortURN(need), n.out)
			default:
				timeline = append(timeline, fmt.Sprintf("%s finished (event %d) before %s started (event %d)", shortURN(need), n.out, shortURN(r.dependent), d.pre))
			}
		}
	}
	// The engine recorded each kcp object as Available: its wait did hold.
	for _, urn := range []string{rs, sh, fp, kc} {
		st := steps[urn]
		if st == nil || st.outputs == nil {
			continue
		}
		obj := &unstructured.Unstructured{Object: st.outputs}
		if !isAvailable(obj) {
			t.Errorf("%s finished without being Available: status %s", shortURN(urn), compact(st.outputs["status"]))
		}
	}
	t.Logf("order:%s", indent(timeline))
}

// checkHubSecret checks the hub Secret against the credential the operator wrote and the
// stack outputs.
func checkHubSecret(t *testing.T, ctx context.Context, e *env, p rendered, minted credential) {
	t.Helper()
	hub := p.cfg.Hub
	secret, err := e.c.kube.CoreV1().Secrets(hub.Namespace).Get(ctx, hub.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the hub Secret %s/%s: %v", hub.Namespace, hub.SecretName, err)
	}
	var keys []string
	for k := range secret.Data {
		keys = append(keys, k)
	}
	if len(keys) != 1 || keys[0] != hub.SecretKey {
		t.Errorf("the hub Secret has keys %v, want exactly %s", keys, hub.SecretKey)
	}
	got := secret.Data[hub.SecretKey]
	if !bytes.Equal(got, minted.Kubeconfig) {
		t.Errorf("the hub Secret's %s is not the kubeconfig the operator wrote into %s (serial %x)", hub.SecretKey, minted.Secret, minted.Cert.SerialNumber)
	}
	facts, err := parseMinted(got)
	if err != nil {
		t.Fatalf("the hub Secret's kubeconfig: %v", err)
	}
	wantServer := fmt.Sprintf("https://%s:%d", naming.OperatorServiceHost(naming.FrontProxyDeployment(naming.FrontProxyName)), naming.KcpPort)
	if facts.server != wantServer {
		t.Errorf("the hub kubeconfig's server is %s, want the in-cluster front proxy %s", facts.server, wantServer)
	}
	if facts.cn != components.KubeconfigUsername || !slices.Contains(facts.orgs, components.KubeconfigAdminGroup) {
		t.Errorf("the hub credential is CN=%s O=%v, want CN=%s and O %s", facts.cn, facts.orgs, components.KubeconfigUsername, components.KubeconfigAdminGroup)
	}
	validity := p.cfg.KubeconfigValidity()
	if d := minted.Cert.NotAfter.Sub(minted.Cert.NotBefore); d < validity-2*time.Minute || d > validity+2*time.Minute {
		t.Errorf("the hub credential is valid for %s, want %s", d, validity)
	}
	outs, err := e.stack.stack.Outputs(ctx)
	if err != nil {
		t.Fatalf("stack outputs: %v", err)
	}
	if v := outs["hubKubeconfigExpiresAt"]; v.Value != facts.notAfter {
		t.Errorf("output hubKubeconfigExpiresAt is %v, the certificate expires %s", v.Value, facts.notAfter)
	}
	if v := outs["kcpRootServerCA"]; v.Value != facts.caPEM || v.Secret {
		t.Errorf("output kcpRootServerCA (secret %v) is not the kubeconfig's CA", v.Secret)
	}
	ca, err := e.c.kube.CoreV1().Secrets(naming.NamespaceKcp).Get(ctx, naming.RootShardName+"-server-ca", metav1.GetOptions{})
	if err != nil || string(ca.Data["tls.crt"]) != facts.caPEM {
		t.Errorf("the kubeconfig's CA is not kcp-system/root-server-ca (%v)", err)
	}
	if v := outs["hubSecretName"]; v.Value != hub.SecretName {
		t.Errorf("output hubSecretName is %v, want %s", v.Value, hub.SecretName)
	}
}

// checkNoPlaintext checks that `pulumi stack export` holds none of the minted
// credentials in plaintext (nor base64 of it, at any depth), while it does hold the hub
// Secret, encrypted.
func checkNoPlaintext(t *testing.T, ctx context.Context, e *env, mints []credential) {
	t.Helper()
	d := e.stack.export(ctx)
	var needles []string
	for _, m := range mints {
		needles = append(needles, m.Marker)
		cfg, err := parseMintedRaw(m.Kubeconfig)
		if err == nil {
			needles = append(needles, cfg.clientKeyB64, cfg.clientCertB64)
		}
	}
	// The search must be able to see a leak: the hub Secret as the API returns it
	// (base64 of the kubeconfig) has to light up.
	probe := fmt.Sprintf(`{"data":{"admin.kubeconfig":%q}}`, base64.StdEncoding.EncodeToString(mints[len(mints)-1].Kubeconfig))
	if len(leakSearch([]byte(probe), mints[len(mints)-1].Marker)) == 0 {
		t.Fatalf("the leak search does not find the certificate's serial in the hub Secret's own data; it proves nothing")
	}
	leaked := false
	search := newLeakSearcher(needles...)
	if leaks := search.search(d.raw); len(leaks) > 0 {
		leaked = true
		t.Errorf("pulumi stack export holds the hub credential in plaintext:%s", indent(leaks))
	}
	files, err := e.stack.stateFiles()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if leaks := search.search(data); len(leaks) > 0 {
			leaked = true
			t.Errorf("the backend's %s holds the hub credential in plaintext:%s", name, indent(leaks))
		}
	}
	hubURN := e.plan.urnOf("Secret", e.plan.cfg.Hub.SecretName)
	found := false
	for _, r := range d.Resources {
		if r.URN != hubURN {
			continue
		}
		found = true
		data, _ := r.Outputs["data"].(map[string]any)
		if data == nil || data[secretSig] != secretSigValue || data["ciphertext"] == nil || data["plaintext"] != nil {
			t.Errorf("the hub Secret's data is not an encrypted secret in the state: %s", compact(r.Outputs["data"]))
		}
	}
	if !found {
		t.Errorf("the hub Secret %s is not in the state", shortURN(hubURN))
	}
	if !leaked {
		t.Logf("pulumi stack export (%d bytes, %d resources) and the %d files of the backend hold none of the %d credentials (marker, certificate, key)",
			len(d.raw), len(d.Resources), len(files), len(mints))
	}
}

// The signature Pulumi marks a secret value with in the state.
const (
	secretSig      = "4dabf18193072939515e22adb298388d"
	secretSigValue = "1b47061264138c4ac30d75fd1eb44270"
)

type rawKubeconfig struct{ clientCertB64, clientKeyB64 string }

// parseMintedRaw returns the base64 certificate and key data as written in the kubeconfig.
func parseMintedRaw(data []byte) (rawKubeconfig, error) {
	var out rawKubeconfig
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "client-certificate-data: "); ok {
			out.clientCertB64 = v
		}
		if v, ok := strings.CutPrefix(line, "client-key-data: "); ok {
			out.clientKeyB64 = v
		}
	}
	if out.clientCertB64 == "" || out.clientKeyB64 == "" {
		return out, fmt.Errorf("no client certificate or key data")
	}
	return out, nil
}

// drift is what step 5 found changing when nothing was changed (a program bug it
// reports); the later "no changes" checks tolerate exactly those resources, so that one
// bug fails one step.
var drift = &knownDrift{urns: map[string]bool{}}

type knownDrift struct {
	mu   sync.Mutex
	urns map[string]bool
}

func (d *knownDrift) add(changed map[string][]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for urn := range changed {
		d.urns[urn] = true
	}
}

func (d *knownDrift) has(urn string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.urns[urn]
}

// changedURNs returns the resources a preview or update changes, with their operations.
func changedURNs(log *eventLog) map[string][]string {
	out := map[string][]string{}
	for urn, ops := range log.opsByURN() {
		for _, op := range ops {
			if op != "same" && op != "read" {
				out[urn] = append(out[urn], op)
			}
		}
	}
	return out
}

func describe(changed map[string][]string) []string {
	var out []string
	for urn, ops := range changed {
		out = append(out, strings.Join(ops, ",")+" "+shortURN(urn))
	}
	slices.Sort(out)
	return out
}

// checkNoChanges runs a preview that must report no changes, other than the perpetual
// diffs step 5 reported.
func checkNoChanges(t *testing.T, ctx context.Context, s *e2eStack, label string) {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, previewTimeout)
	defer cancel()
	res, log, err := s.preview(pctx, optpreview.ExpectNoChanges(), optpreview.Diff())
	changed := changedURNs(log)
	var known []string
	for urn := range changed {
		if drift.has(urn) {
			known = append(known, shortURN(urn))
			delete(changed, urn)
		}
	}
	if len(changed) > 0 || (err != nil && len(known) == 0) {
		t.Errorf("the %s preview expected no changes (%v):%s%s\n%s", label, firstLine(fmt.Sprint(err)), indent(describe(changed)),
			indent(log.diagnostics()), changedLines(res.StdOut+stdoutOf(err)))
		return
	}
	if len(known) > 0 {
		t.Logf("%s preview: no changes apart from the perpetual diff reported by step 5 (%v)", label, known)
		return
	}
	t.Logf("%s preview: %s", label, changeCounts(res.ChangeSummary))
}

func changedOps[K ~string](m map[K]int) []string {
	var out []string
	for op, n := range m {
		if op != "same" && op != "read" && n > 0 {
			out = append(out, fmt.Sprintf("%s=%d", op, n))
		}
	}
	slices.Sort(out)
	return out
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

// checkImages checks that every kcp object and every Deployment the operator runs for
// them use the kcp version, and that the objects are Available for their current spec
// once those Deployments have rolled out.
func checkImages(t *testing.T, ctx context.Context, c *cluster, version string) {
	t.Helper()
	want := "ghcr.io/kcp-dev/kcp:" + version
	kcpObjects := []struct {
		gvr  schema.GroupVersionResource
		name string
		path [][]string
	}{
		{rootShardGVR, naming.RootShardName, [][]string{{"spec", "image"}, {"spec", "proxy", "image"}}},
		{shardGVR, "alpha", [][]string{{"spec", "image"}}},
		{frontProxyGVR, naming.FrontProxyName, [][]string{{"spec", "image"}}},
	}
	for _, o := range kcpObjects {
		obj, err := c.dyn.Resource(o.gvr).Namespace(naming.NamespaceKcp).Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s %s: %v", o.gvr.Resource, o.name, err)
			continue
		}
		for _, path := range o.path {
			if got := imageOf(obj.Object, path...); got != want {
				t.Errorf("%s %s %s is %s, want %s", o.gvr.Resource, o.name, strings.Join(path, "."), got, want)
			}
		}
	}
	// The up waited for these rollouts (components/kcprollout.go): each has rolled out the
	// moment it returns.
	for _, name := range []string{
		naming.RootShardDeployment(naming.RootShardName), naming.RootShardName + "-proxy",
		naming.ShardDeployment("alpha"), naming.FrontProxyDeployment(naming.FrontProxyName),
	} {
		if pending := deploymentRollout(ctx, c, name, want); pending != "" {
			t.Errorf("the up returned before Deployment %s had rolled out: %s", name, pending)
		}
	}
	for _, o := range kcpObjects {
		err := testenv.WaitFor(ctx, 2*time.Minute, nil, func() (bool, error) {
			obj, err := c.dyn.Resource(o.gvr).Namespace(naming.NamespaceKcp).Get(ctx, o.name, metav1.GetOptions{})
			return err == nil && isAvailable(obj), nil
		})
		if err != nil {
			t.Errorf("%s %s is not Available for its current spec once its Deployments rolled out: %v", o.gvr.Resource, o.name, err)
		}
	}
}

// checkAfterDestroy: the data, the CRDs and the namespaces the README says stay are kept
// (and said so), with what the add-ons' charts leave (checkAddOnsAfterDestroy); the rest
// is gone.
// addOnCRDsBefore are the add-ons' CRDs before destroy, which it must keep.
func checkAfterDestroy(t *testing.T, ctx context.Context, e *env, p rendered, pvcsBefore, addOnCRDsBefore []string) {
	t.Helper()
	c := e.c
	var kept []string
	pvcs, err := countObjects(ctx, c, pvcGVR, naming.NamespaceEtcd)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pvcs, pvcsBefore) {
		t.Errorf("destroy did not keep the etcd volume claims: %v, were %v", pvcs, pvcsBefore)
	}
	for _, name := range pvcs {
		ns, n, _ := strings.Cut(name, "/")
		pvc, err := c.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, n, metav1.GetOptions{})
		if err == nil && pvc.DeletionTimestamp == nil && pvc.Status.Phase == "Bound" {
			kept = append(kept, fmt.Sprintf("PersistentVolumeClaim %s (Bound to %s)", name, pvc.Spec.VolumeName))
		} else {
			t.Errorf("etcd volume claim %s is not kept bound (%v)", name, err)
		}
	}
	for _, res := range []string{"rootshards", "shards", "frontproxies", "kubeconfigs", "cacheservers"} {
		name := res + ".operator.kcp.io"
		crd, err := c.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil || crd.GetDeletionTimestamp() != nil {
			t.Errorf("destroy removed the operator's CRD %s (%v)", name, err)
			continue
		}
		kept = append(kept, "CustomResourceDefinition "+name)
	}
	for _, ns := range []string{naming.NamespaceEtcd, p.cfg.Hub.Namespace} {
		n, err := c.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil || n.DeletionTimestamp != nil {
			t.Errorf("destroy removed the retained namespace %s (%v)", ns, err)
			continue
		}
		kept = append(kept, "Namespace "+ns)
	}
	// CoreDNS keeps working: its pods still read the retained Corefile, whose hosts
	// stanza now reads an absent file.
	checkCoreDNSReadsOurCorefile(t, ctx, e, p, false)
	kept = append(kept, "ConfigMap kube-system/"+naming.SplitHorizonCorefileConfigMap+" (the Corefile CoreDNS mounts; its hosts file is gone)")

	// Gone: kcp objects, owned Services, the hub Secret, the hosts ConfigMap, etcd, the edge.
	gone := []struct {
		what string
		gvr  schema.GroupVersionResource
		ns   string
		name string
	}{
		{"RootShard", rootShardGVR, "", ""}, {"Shard", shardGVR, "", ""}, {"FrontProxy", frontProxyGVR, "", ""}, {"Kubeconfig", kubeconfigGVR, "", ""},
		{"Service", serviceGVR, naming.NamespaceKcp, ""},
		{"Secret", secretGVR, p.cfg.Hub.Namespace, p.cfg.Hub.SecretName},
		{"ConfigMap", configMapGVR, naming.NamespaceKubeSystem, naming.SplitHorizonHostsConfigMap},
		{"StatefulSet", statefulSetGVR, naming.NamespaceEtcd, ""},
		{"Deployment", deploymentGVR, naming.NamespaceKcp, ""},
		{"Gateway", gatewayGVR, naming.NamespaceKcp, ""},
		{"GatewayClass", gwClassGVR, "", naming.EdgeGatewayName},
		{"EnvoyProxy", envoyProxyGVR, naming.NamespaceEnvoyGateway, naming.EdgeGatewayName},
		{"Namespace", namespaceGVR, "", naming.NamespaceKcp},
	}
	var removed []string
	for _, g := range gone {
		var left []string
		var listErr error
		// What the operator created (Deployments, owned by its Compiled* objects) goes
		// by garbage collection after destroy returns: give it a while, then fail.
		_ = testenv.WaitFor(ctx, 90*time.Second, nil, func() (bool, error) {
			names, err := countObjects(ctx, c, g.gvr, g.ns)
			left, listErr = nil, err
			for _, n := range names {
				short := n[strings.LastIndex(n, "/")+1:]
				if g.name == "" || short == g.name {
					left = append(left, n)
				}
			}
			if g.gvr == namespaceGVR && len(left) > 0 {
				// A namespace that is terminating is being removed.
				if ns, err := c.kube.CoreV1().Namespaces().Get(ctx, g.name, metav1.GetOptions{}); err == nil && ns.DeletionTimestamp != nil {
					left = nil
				}
			}
			return err == nil && len(left) == 0, nil
		})
		if listErr != nil {
			t.Errorf("listing %s: %v", g.what, listErr)
			continue
		}
		if len(left) > 0 {
			t.Errorf("destroy left %s %v", g.what, left)
			continue
		}
		target := g.what
		if g.name != "" {
			target += " " + g.name
		} else if g.ns != "" {
			target += "s in " + g.ns
		} else {
			target += "s"
		}
		removed = append(removed, target)
	}
	kept = append(kept, checkAddOnsAfterDestroy(t, ctx, c, addOnCRDsBefore)...)
	t.Logf("destroy kept on purpose:%s", indent(kept))
	t.Logf("destroy removed:%s", indent(removed))
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
