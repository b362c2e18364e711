package conformance

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Environment variables the test reads, besides testenv.EnvCRDsDir.
const (
	envKubeAPIServer = "KUBE_APISERVER"
	envEtcd          = "ETCD"
	envSkip          = "RAILGRID_SKIP_CONFORMANCE"
)

// fallbackKubeVersion is the kube-apiserver version expected when tools/kube/go.mod
// cannot be read; normally the version comes from there (what hack/build-tools.sh builds).
const fallbackKubeVersion = "v1.34.4"

// stacks are the shipped stacks, each applied to its own fresh API server (both use the
// same object names).
var stacks = []string{"kind", "gke"}

// rendered is one stack's offline plan.
type rendered struct {
	stack       string
	cfg         *config.Config
	rec         *mockstack.Recording
	objects     []plan.Object
	serviceCIDR netip.Prefix
}

// TestStacksApplyToAPIServer renders the kind and gke stacks with the plan code and
// server-side applies every Kubernetes object, in the plan's order, to a real
// kube-apiserver that has the upstream CRDs installed and a Service range equal to the
// stack's network.serviceCIDR. Every rejected object is reported with the server's
// message. Each stack then checks that the harness does reject a misspelled RootShard
// field and a ClusterIP outside the Service range.
func TestStacksApplyToAPIServer(t *testing.T) {
	servers, root := requireServers(t)
	dir := testenv.CRDsDir(root)
	crds, err := testenv.LoadCRDs(dir)
	if err != nil {
		t.Fatalf("reading the upstream CRDs (set %s to another directory): %v", testenv.EnvCRDsDir, err)
	}
	t.Logf("kube-apiserver %s, etcd %s, %d CRDs from %s", servers.KubeAPIServer, servers.Etcd, len(crds), dir)
	wantVersion := expectedKubeVersion(root)

	// Render both plans first (sequentially: one mock engine at a time), so that a stack
	// that does not evaluate fails before any server starts.
	var plans []rendered
	for _, stack := range stacks {
		start := time.Now()
		p, err := renderStack(root, stack)
		if err != nil {
			t.Fatalf("stack %s: %v", stack, err)
		}
		t.Logf("stack %s: %d Kubernetes objects rendered in %s", stack, len(p.objects), time.Since(start).Round(time.Millisecond))
		plans = append(plans, p)
	}

	for _, p := range plans {
		t.Run(p.stack, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			start := time.Now()
			server, cfg := startAPIServer(t, ctx, servers, p.serviceCIDR.String())
			cl, err := newClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			version, err := cl.discovery.ServerVersion()
			if err != nil {
				t.Fatalf("reading /version: %v", err)
			}
			if version.GitVersion != wantVersion {
				t.Errorf("kube-apiserver is %s, want %s (k8s.io/kubernetes in tools/kube/go.mod): rebuild with hack/build-tools.sh kube", version.GitVersion, wantVersion)
			}
			t.Logf("kube-apiserver %s ready on %s with Service range %s in %s", version.GitVersion, server.Host, p.serviceCIDR, time.Since(start).Round(time.Millisecond))

			start = time.Now()
			if err := cl.installCRDs(ctx, crds); err != nil {
				t.Fatalf("installing the upstream CRDs: %v", err)
			}
			t.Logf("%d CRDs established in %s", len(crds), time.Since(start).Round(time.Millisecond))

			start = time.Now()
			if err := preCreate(ctx, cl, p); err != nil {
				t.Fatalf("creating what the cluster already has: %v", err)
			}

			objs, err := planObjects(p.objects)
			if err != nil {
				t.Fatal(err)
			}
			rejected := cl.applyAll(ctx, objs)
			if len(rejected) > 0 {
				var b strings.Builder
				fmt.Fprintf(&b, "stack %s: kube-apiserver %s rejected %d of %d objects:\n", p.stack, version.GitVersion, len(rejected), len(objs))
				for _, r := range rejected {
					fmt.Fprintf(&b, "  - %s\n", r)
				}
				t.Error(b.String())
			} else {
				t.Logf("stack %s: all %d objects applied in %s", p.stack, len(objs), time.Since(start).Round(time.Millisecond))
			}

			t.Run("harness-rejects", func(t *testing.T) { testRejections(t, ctx, cl, p) })
		})
	}
}

// startAPIServer starts an etcd and a kube-apiserver with the given Service range in a
// fresh temporary directory and returns the server and its admin client configuration.
func startAPIServer(t *testing.T, ctx context.Context, servers testenv.APIServerOptions, serviceCIDR string) (*testenv.APIServer, *rest.Config) {
	t.Helper()
	servers.Dir, servers.ServiceCIDR = t.TempDir(), serviceCIDR
	server := testenv.StartAPIServer(t, ctx, servers)
	cfg := server.RESTConfig()
	cfg.QPS, cfg.Burst, cfg.UserAgent = 200, 400, "railgrid-kcp-conformance"
	return server, cfg
}

// testContext ends a minute before the test binary's -timeout, so that a hang is
// reported by the test (and the servers stopped by its cleanups) rather than by a panic.
func testContext(t *testing.T) context.Context {
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(25 * time.Minute)
	} else if time.Until(deadline) > 2*time.Minute {
		deadline = deadline.Add(-time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// renderStack runs the stack's real composition under mocks and returns its plan.
func renderStack(root, stack string) (rendered, error) {
	path := filepath.Join(root, "Pulumi."+stack+".yaml")
	cfg, err := config.ParseStackFile(path)
	if err != nil {
		return rendered{}, err
	}
	cidr, err := netip.ParsePrefix(cfg.Network.ServiceCIDR)
	if err != nil || !cidr.Addr().Is4() {
		return rendered{}, fmt.Errorf("network.serviceCIDR %q is not an IPv4 prefix", cfg.Network.ServiceCIDR)
	}
	opts := mockstack.Options{}
	if cfg.Platform == config.PlatformGKE {
		// The mocked GKE cluster lookup reports the range the API server is started with.
		opts.GKEServiceCIDR = cidr.String()
	}
	rec, err := mockstack.RunStackFile(stack, path, opts)
	if err != nil {
		return rendered{}, err
	}
	objs := plan.KubernetesObjects(rec)
	if len(objs) == 0 {
		return rendered{}, fmt.Errorf("the plan has no Kubernetes object")
	}
	return rendered{stack: stack, cfg: cfg, rec: rec, objects: objs, serviceCIDR: cidr.Masked()}, nil
}

// planObjects turns the plan into apply requests, in the plan's order; patches of
// objects the cluster already has are forced, as `kubectl apply --server-side
// --force-conflicts` and Pulumi's Patch resources do.
func planObjects(objects []plan.Object) ([]toApply, error) {
	var out []toApply
	for _, o := range objects {
		obj, err := toUnstructured(o.Manifest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Resource, err)
		}
		what := fmt.Sprintf("%s (Pulumi %s)", describe(obj), o.Resource)
		if o.Patch {
			what += " [server-side apply patch, forced]"
		}
		out = append(out, toApply{what: what, object: obj, force: o.Patch})
	}
	return out, nil
}

// preCreate creates what the target cluster has before the stack runs: the namespaces
// the Helm releases create (their charts are not applied here), kube-dns's Service and,
// on kind, kubeadm's CoreDNS ConfigMap and Deployment, which the stack patches.
func preCreate(ctx context.Context, cl *client, p rendered) error {
	declared := map[string]bool{}
	for _, o := range p.objects {
		if o.Manifest["kind"] == "Namespace" && o.Manifest["apiVersion"] == "v1" {
			if meta, ok := o.Manifest["metadata"].(map[string]any); ok {
				declared[fmt.Sprint(meta["name"])] = true
			}
		}
	}
	namespaces := []string{"cert-manager", "envoy-gateway-system"}
	for _, res := range p.rec.Resources {
		if strings.HasPrefix(res.Type, "kubernetes:helm.sh/") && strings.HasSuffix(res.Type, ":Release") {
			if ns, ok := plan.Redact(res.Inputs)["namespace"].(string); ok && ns != "" {
				namespaces = append(namespaces, ns)
			}
		}
	}
	var docs []string
	seen := map[string]bool{}
	for _, ns := range namespaces {
		if !declared[ns] && !seen[ns] {
			seen[ns] = true
			docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns))
		}
	}
	docs = append(docs, fmt.Sprintf(testenv.KubeadmKubeDNSService, nthAddr(p.serviceCIDR, 10)))
	if p.cfg.Platform == config.PlatformKind {
		docs = append(docs, kubeadmCoreDNSConfigMap, testenv.KubeadmCoreDNSDeployment)
	}

	// kube-system is created by the API server shortly after it is ready.
	if err := testenv.WaitFor(ctx, time.Minute, nil, func() (bool, error) {
		_, err := cl.dynamic.Resource(namespaceGVR).Get(ctx, naming.NamespaceKubeSystem, getOptions)
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("namespace kube-system: %w", err)
	}
	for _, doc := range docs {
		obj, err := decodeOne(doc)
		if err != nil {
			return err
		}
		if obj.GetKind() == "ConfigMap" {
			if err := unstructured.SetNestedField(obj.Object, mockstack.KindCorefile, "data", naming.CorefileKey); err != nil {
				return err
			}
		}
		if err := cl.create(ctx, obj); err != nil {
			return fmt.Errorf("%s: %s", describe(obj), message(err))
		}
	}
	return nil
}

// testRejections proves the harness fails when it should: strict validation rejects a
// RootShard with an unknown field and one with a misspelled field, and the Service
// allocator rejects a ClusterIP outside the Service range, all reported by applyAll in
// one run. Controls (the same objects without the defect) are accepted.
func testRejections(t *testing.T, ctx context.Context, cl *client, p rendered) {
	rootShard := findObject(t, p.objects, "RootShard", func(*unstructured.Unstructured) bool { return true })
	service := findObject(t, p.objects, "Service", func(o *unstructured.Unstructured) bool {
		ip, _, _ := unstructured.NestedString(o.Object, "spec", "clusterIP")
		return ip != "" && ip != "None"
	})

	unknownField := renamed(rootShard, "conformance-unknown-field")
	if err := unstructured.SetNestedField(unknownField.Object, "https://root.example.com:6443", "spec", "shardBaseURLs"); err != nil {
		t.Fatal(err)
	}
	misspelled := renamed(rootShard, "conformance-misspelled-field")
	etcd, ok, _ := unstructured.NestedFieldNoCopy(misspelled.Object, "spec", "etcd")
	if !ok {
		t.Fatalf("the plan's RootShard has no spec.etcd")
	}
	unstructured.RemoveNestedField(misspelled.Object, "spec", "etcd")
	if err := unstructured.SetNestedField(misspelled.Object, etcd, "spec", "etdc"); err != nil {
		t.Fatal(err)
	}
	outsideIP := nthAddr(p.serviceCIDR, uint32(1)<<(32-p.serviceCIDR.Bits())+10).String()
	outside := renamed(service, "conformance-outside-range")
	setClusterIP(t, outside, outsideIP)

	bad := []toApply{
		{what: "RootShard with spec.shardBaseURLs", object: unknownField},
		{what: "RootShard with spec.etdc instead of spec.etcd", object: misspelled},
		{what: "Service with clusterIP " + outsideIP + " outside " + p.serviceCIDR.String(), object: outside},
	}
	want := [][]string{{"shardBaseURLs"}, {"etdc"}, {"clusterIP", outsideIP}}
	rejected := cl.applyAll(ctx, bad)
	got := map[string]rejection{}
	for _, r := range rejected {
		got[r.what] = r
		t.Logf("rejected as expected: %s", r)
	}
	for i, b := range bad {
		r, ok := got[b.what]
		if !ok {
			t.Errorf("%s was accepted; the harness must reject it", b.what)
			continue
		}
		for _, s := range want[i] {
			if !strings.Contains(message(r.err), s) {
				t.Errorf("%s: the server's message does not mention %q: %s", b.what, s, message(r.err))
			}
		}
	}

	// Controls: the same objects without the defect apply.
	insideIP := freeServiceIP(p)
	inside := renamed(service, "conformance-inside-range")
	setClusterIP(t, inside, insideIP.String())
	controls := []toApply{
		{what: "control: the plan's RootShard under another name", object: renamed(rootShard, "conformance-control")},
		{what: "control: Service with clusterIP " + insideIP.String() + " inside " + p.serviceCIDR.String(), object: inside},
	}
	for _, r := range cl.applyAll(ctx, controls) {
		t.Errorf("%s was rejected: %s", r.what, message(r.err))
	}
}

func findObject(t *testing.T, objects []plan.Object, kind string, match func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objects {
		if o.Manifest["kind"] != kind || o.Patch {
			continue
		}
		obj, err := toUnstructured(o.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		if match(obj) {
			return obj
		}
	}
	t.Fatalf("the plan has no suitable %s", kind)
	return nil
}

// renamed is a copy of obj under another name.
func renamed(obj *unstructured.Unstructured, name string) *unstructured.Unstructured {
	out := obj.DeepCopy()
	out.SetName(name)
	return out
}

func setClusterIP(t *testing.T, svc *unstructured.Unstructured, ip string) {
	t.Helper()
	unstructured.RemoveNestedField(svc.Object, "spec", "clusterIPs")
	if err := unstructured.SetNestedField(svc.Object, ip, "spec", "clusterIP"); err != nil {
		t.Fatal(err)
	}
}

// freeServiceIP is an address inside the Service range that no plan object, the
// kubernetes Service (first address) or kube-dns (tenth) uses.
func freeServiceIP(p rendered) netip.Addr {
	used := map[string]bool{}
	for _, o := range p.objects {
		if spec, ok := o.Manifest["spec"].(map[string]any); ok {
			if ip, ok := spec["clusterIP"].(string); ok {
				used[ip] = true
			}
		}
	}
	for n := uint32(200); ; n++ {
		if a := nthAddr(p.serviceCIDR, n); !used[a.String()] {
			return a
		}
	}
}

// nthAddr is the n-th address after the prefix's first address.
func nthAddr(prefix netip.Prefix, n uint32) netip.Addr {
	b := prefix.Masked().Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += n
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// expectedKubeVersion is the k8s.io/kubernetes version tools/kube/go.mod requires.
func expectedKubeVersion(root string) string {
	f, err := os.Open(filepath.Join(root, "tools", "kube", "go.mod"))
	if err != nil {
		return fallbackKubeVersion
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && fields[0] == "k8s.io/kubernetes" && strings.HasPrefix(fields[1], "v") {
			return fields[1]
		}
	}
	return fallbackKubeVersion
}

// requireServers skips the test under -short or with the skip variable set, and
// otherwise returns how to start the API servers (the executables, from $KUBE_APISERVER
// and $ETCD or PATH) and the repository root, failing when either is missing.
func requireServers(t *testing.T) (testenv.APIServerOptions, string) {
	t.Helper()
	testenv.SkipIfShortOrDisabled(t, envSkip, "conformance starts etcd and kube-apiserver")
	var exe testenv.Executables
	servers := testenv.APIServerOptions{
		KubeAPIServer: exe.Find("kube-apiserver", envKubeAPIServer),
		Etcd:          exe.Find("etcd", envEtcd),
		Name:          "conformance",
	}
	exe.Require(t, "conformance", "Build kube-apiserver and etcd and run the test with hack/conformance.sh "+
		"(or: eval \"$(hack/build-tools.sh env kube etcd)\")", envSkip)
	return servers, testenv.RepoRoot(t)
}
