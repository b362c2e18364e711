package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
	"github.com/railgrid/railgrid-kcp/tests/internal/testenv"
)

// The Envoy Gateway control plane, run for real: the kind stack's edge objects are
// reconciled by envoy-gateway v1.9.0 (hack/build-tools.sh envoy-gateway) as a process
// against the simulated cluster. The kind stack is told Envoy Gateway is present
// (kind.envoyGatewayPresent), as on a kind cluster where it was installed beforehand, and
// the test installs what that installation consists of, from the real Helm chart of the
// module version the stack pins (charts/gateway-helm in the Go module cache), rendered by
// the Helm CLI (hack/build-tools.sh helm): the ServiceAccounts, the RBAC, the
// EnvoyGateway configuration and the CRDs the cluster does not have yet. Its Deployment
// would be a simulated pod, so the binary runs outside it, as the chart's ServiceAccount
// (its kubeconfig impersonates it), so a permission the chart does not grant fails here
// as it would in the cluster. Its certificates come from `envoy-gateway certgen`, run as
// the chart's certgen Job runs it (as the certgen ServiceAccount, into the cluster's
// Secrets), and are mounted at /certs as the chart's Deployment mounts its Secret.
//
// Envoy Gateway reads /certs (fixed), binds fixed ports on every address (xDS 18000,
// health 8081, wasm 18002, metrics 19001, webhook 9443) and 127.0.0.1:19000 (admin), so
// it runs in a mount namespace of its own (a private root holding /certs, nothing on the
// host) and a network namespace of its own: every server of these tests listens on
// loopback only, and two e2e runs on one machine would otherwise fight over the ports.
// The API server's port is forwarded into that namespace by a listener the test opens
// inside it (envoygateway_linux_test.go).

const (
	// envoyGatewayRelease is the Helm release name the kind stack installs the chart as
	// (components/platform_kind.go).
	envoyGatewayRelease = "envoy-gateway"
	// envoyGatewaySA is the ServiceAccount the chart's RBAC binds (envoy-gateway-rbac.yaml).
	envoyGatewaySA = "envoy-gateway"
	// envoyGatewayControllerName is the controller name in the chart's configuration and
	// in the kind stack's GatewayClass.
	envoyGatewayControllerName = "gateway.envoyproxy.io/gatewayclass-controller"
	// envoyGatewayCertsSecret is the Secret certgen writes and the chart's Deployment
	// mounts at /certs.
	envoyGatewayCertsSecret = "envoy-gateway"
)

// envoyGatewayChartKinds are the kinds of the chart's manifests the test installs. Not
// installed: the Deployment and its Service, HPA and PodDisruptionBudget (the binary runs
// outside the cluster), the certgen Job (the test runs certgen itself) and the Gateway
// API's ValidatingAdmissionPolicy (the safe-upgrade guard of the CRDs subchart).
var envoyGatewayChartKinds = map[string]bool{
	"ServiceAccount": true, "Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"ConfigMap": true, "CustomResourceDefinition": true,
}

// envoyGateway is the running control plane.
type envoyGateway struct {
	proc    *testenv.Process
	user    string // the ServiceAccount it runs as
	version string
	config  string // the EnvoyGateway configuration it runs with
	// forwarded counts the API server connections made through the namespace's listener.
	forwarded func() int
}

// envoyGatewayBinaries are envoy-gateway and helm, on PATH.
func envoyGatewayBinaries(t *testing.T) (eg, helm string) {
	t.Helper()
	var missing []string
	for _, name := range []string{"envoy-gateway", "helm"} {
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, name)
		}
		if name == "helm" {
			helm = p
		} else {
			eg = p
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the e2e test needs %s on PATH: eval \"$(hack/build-tools.sh env envoy-gateway helm)\"; set %s=1 to skip this test",
			strings.Join(missing, ", "), envSkip)
	}
	return eg, helm
}

// startEnvoyGateway installs the chart's ServiceAccounts, RBAC, configuration and CRDs,
// issues the certificates with certgen and starts the control plane in namespaces of its
// own. It fails the test if the binary was not built from the version the kind stack
// installs.
func startEnvoyGateway(t *testing.T, ctx context.Context, c *cluster, root, dir string) *envoyGateway {
	t.Helper()
	start := time.Now()
	egBin, helmBin := envoyGatewayBinaries(t)
	cfg, err := config.ParseStackFile(filepath.Join(root, "Pulumi.kind.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	version := cfg.Versions.EnvoyGateway
	if built, err := builtModuleVersion(ctx, egBin, testenv.EnvoyGatewayModule); err != nil {
		t.Fatal(err)
	} else if built != version {
		t.Fatalf("the kind stack installs Envoy Gateway %s (versions.envoyGateway) but %s was built from %s %s", version, egBin, testenv.EnvoyGatewayModule, built)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	manifests, err := renderEnvoyGatewayChart(ctx, helmBin, version, dir)
	if err != nil {
		t.Fatalf("rendering the Envoy Gateway chart: %v", err)
	}
	egConfig, installed, err := installEnvoyGatewayChart(ctx, c, manifests)
	if err != nil {
		t.Fatalf("installing the Envoy Gateway chart's objects: %v", err)
	}

	// certgen, as the chart's pre-install Job runs it: as the certgen ServiceAccount,
	// writing the control plane's, the proxies' and the rate limiter's certificates and
	// the OIDC HMAC secret into Secrets of the controller namespace.
	certgenKubeconfig := filepath.Join(dir, "certgen.kubeconfig")
	certgenSA := envoyGatewayRelease + "-gateway-helm-certgen" // <release>-<chart>-certgen (certgen-rbac.yaml)
	for _, sa := range []string{certgenSA, envoyGatewaySA} {
		if _, err := c.kube.CoreV1().ServiceAccounts(naming.NamespaceEnvoyGateway).Get(ctx, sa, metav1.GetOptions{}); err != nil {
			t.Fatalf("the chart did not install ServiceAccount %s/%s: %v", naming.NamespaceEnvoyGateway, sa, err)
		}
	}
	if err := writeImpersonatingKubeconfig(c, naming.NamespaceEnvoyGateway, certgenSA, c.host, certgenKubeconfig); err != nil {
		t.Fatal(err)
	}
	certgen := exec.CommandContext(ctx, egBin, "certgen", "--disable-topology-injector")
	certgen.Env = append(os.Environ(), "KUBECONFIG="+certgenKubeconfig,
		"ENVOY_GATEWAY_NAMESPACE="+naming.NamespaceEnvoyGateway, "KUBERNETES_CLUSTER_DOMAIN=cluster.local")
	if out, err := certgen.CombinedOutput(); err != nil {
		t.Fatalf("envoy-gateway certgen (as %s): %v\n%s", certgenSA, err, out)
	}
	secret, err := c.kube.CoreV1().Secrets(naming.NamespaceEnvoyGateway).Get(ctx, envoyGatewayCertsSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("certgen did not write Secret %s/%s: %v", naming.NamespaceEnvoyGateway, envoyGatewayCertsSecret, err)
	}
	certs := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if len(secret.Data[key]) == 0 {
			t.Fatalf("Secret %s/%s has no %s", naming.NamespaceEnvoyGateway, envoyGatewayCertsSecret, key)
		}
		if err := os.WriteFile(filepath.Join(certs, key), secret.Data[key], 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The configuration the chart's ConfigMap holds, and a kubeconfig as its
	// ServiceAccount, mounted at /config in the private root.
	confDir := filepath.Join(dir, "config")
	if err := os.MkdirAll(confDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "envoy-gateway.yaml"), []byte(egConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// Inside its network namespace the API server is forwarded to loopback, at the same
	// port (the serving certificate holds 127.0.0.1); the same identity is checked from here.
	_, apiPort, _ := net.SplitHostPort(strings.TrimPrefix(c.host, "https://"))
	inside := net.JoinHostPort(testenv.Loopback, apiPort)
	if err := writeImpersonatingKubeconfig(c, naming.NamespaceEnvoyGateway, envoyGatewaySA, "https://"+inside, filepath.Join(confDir, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	hostSide := filepath.Join(dir, "envoy-gateway.host.kubeconfig")
	if err := writeImpersonatingKubeconfig(c, naming.NamespaceEnvoyGateway, envoyGatewaySA, c.host, hostSide); err != nil {
		t.Fatal(err)
	}
	if err := checkImpersonation(ctx, hostSide); err != nil {
		t.Fatal(err)
	}
	eg := &envoyGateway{user: serviceAccountUser(naming.NamespaceEnvoyGateway, envoyGatewaySA), version: version, config: egConfig}
	eg.proc, eg.forwarded, err = launchInPrivateNamespaces(ctx, privateLaunch{
		name: "envoy-gateway", bin: egBin, dir: dir, certs: certs, config: confDir,
		apiServer: strings.TrimPrefix(c.host, "https://"), inside: inside,
		env: []string{"KUBECONFIG=/config/kubeconfig", "ENVOY_GATEWAY_NAMESPACE=" + naming.NamespaceEnvoyGateway,
			"KUBERNETES_CLUSTER_DOMAIN=cluster.local"},
		args: []string{"server", "--config-path=/config/envoy-gateway.yaml"},
	})
	if err != nil {
		t.Fatalf("starting Envoy Gateway: %v", err)
	}
	c.procs = append(c.procs, eg.proc)
	t.Cleanup(func() {
		eg.proc.Stop()
		if t.Failed() || os.Getenv(envVerbose) == "1" {
			t.Logf("envoy-gateway (as %s) log (last lines):\n%s", eg.user, eg.proc.Tail(25))
		}
	})
	t.Logf("Envoy Gateway %s started in %s as %s, in its own mount and network namespaces; chart objects installed:%s",
		version, time.Since(start).Round(time.Millisecond), eg.user, indent(installed))
	return eg
}

// builtModuleVersion returns the version of module a Go binary was built from, as
// `go version -m` reports it (see moduleVersionInBuildInfo).
func builtModuleVersion(ctx context.Context, bin, module string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "version", "-m", bin).Output()
	if err != nil {
		return "", fmt.Errorf("go version -m %s: %w", bin, err)
	}
	v, err := moduleVersionInBuildInfo(string(out), module)
	if err != nil {
		return "", fmt.Errorf("%s: %w", bin, err)
	}
	return v, nil
}

// moduleVersionInBuildInfo finds module in the output of `go version -m`: the main module
// or a dependency (hack/build-tools.sh builds the controllers as dependencies of
// tools/controllers). A replaced module counts only when a module version replaced it; a
// directory says nothing about the version.
func moduleVersionInBuildInfo(buildInfo, module string) (string, error) {
	lines := strings.Split(buildInfo, "\n")
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) < 3 || (f[0] != "mod" && f[0] != "dep") || f[1] != module {
			continue
		}
		if i+1 < len(lines) {
			if r := strings.Fields(lines[i+1]); len(r) >= 2 && r[0] == "=>" {
				if len(r) < 3 || !strings.HasPrefix(r[2], "v") {
					return "", fmt.Errorf("built from %s replaced by %s, which has no version", module, r[1])
				}
				return r[2], nil
			}
		}
		return f[2], nil
	}
	return "", fmt.Errorf("not built from module %s:\n%s", module, buildInfo)
}

// renderEnvoyGatewayChart renders the chart of the module's source as its release
// process packages it (testenv.EnvoyGatewayChart) with `helm template`, as the kind
// stack's release envoy-gateway in envoy-gateway-system, with the CRDs.
//
// One value differs from the kind stack's install: topologyInjector.enabled=false. The
// topology injector is an admission webhook on pod bindings, served by the control
// plane through the chart's Service; the simulated cluster's API server cannot call a
// process outside it. The chart then also leaves the webhook's RBAC out and tells the
// control plane (proxyTopologyInjector.disabled) and certgen (--disable-topology-injector).
func renderEnvoyGatewayChart(ctx context.Context, helmBin, version, dir string) ([]*unstructured.Unstructured, error) {
	chart, err := testenv.EnvoyGatewayChart(ctx, version, filepath.Join(dir, "chart"))
	if err != nil {
		return nil, err
	}
	helm := testenv.Helm{Bin: helmBin, Home: filepath.Join(dir, "helm")}
	out, err := helm.Run(ctx, "template", envoyGatewayRelease, chart,
		"--namespace", naming.NamespaceEnvoyGateway, "--include-crds", "--set", "topologyInjector.enabled=false")
	if err != nil {
		return nil, err
	}
	dec := yamlutil.NewYAMLOrJSONDecoder(bytes.NewReader(out), 64<<10)
	var docs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, fmt.Errorf("helm template output: %w", err)
		}
		if len(m) > 0 {
			docs = append(docs, &unstructured.Unstructured{Object: m})
		}
	}
}

// installEnvoyGatewayChart applies the chart's objects of envoyGatewayChartKinds (CRDs
// only where the cluster has none of that name: the ones the plan's kinds need were
// installed from the reference CRDs, which the conformance test checks) and returns the
// EnvoyGateway configuration from the chart's ConfigMap.
func installEnvoyGatewayChart(ctx context.Context, c *cluster, docs []*unstructured.Unstructured) (string, []string, error) {
	mapper, err := newMapper(c)
	if err != nil {
		return "", nil, err
	}
	var egConfig string
	var installed, crds []string
	for _, doc := range docs {
		kind := doc.GetKind()
		if !envoyGatewayChartKinds[kind] {
			continue
		}
		if kind == "CustomResourceDefinition" {
			if _, err := c.dyn.Resource(crdGVR).Get(ctx, doc.GetName(), metav1.GetOptions{}); err == nil {
				continue
			} else if !apierrors.IsNotFound(err) {
				return "", nil, err
			}
			crds = append(crds, doc.GetName())
		}
		if kind == "ConfigMap" && doc.GetName() == "envoy-gateway-config" {
			egConfig, _, _ = unstructured.NestedString(doc.Object, "data", "envoy-gateway.yaml")
		}
		gvk := doc.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return "", nil, fmt.Errorf("%s %s: %w", kind, doc.GetName(), err)
		}
		ns := doc.GetNamespace()
		if mapping.Scope.Name() == "namespace" && ns == "" {
			ns = naming.NamespaceEnvoyGateway
		}
		if _, err := c.dyn.Resource(mapping.Resource).Namespace(ns).Apply(ctx, doc.GetName(), doc,
			metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return "", nil, fmt.Errorf("applying %s %s: %w", kind, doc.GetName(), err)
		}
		if kind != "CustomResourceDefinition" {
			installed = append(installed, fmt.Sprintf("%s %s", kind, strings.TrimPrefix(ns+"/"+doc.GetName(), "/")))
		}
	}
	for _, name := range crds {
		if err := testenv.WaitEstablished(ctx, c.dyn, c.apiserver, time.Minute, name); err != nil {
			return "", nil, err
		}
	}
	if egConfig == "" {
		return "", nil, fmt.Errorf("the chart has no ConfigMap envoy-gateway-config with key envoy-gateway.yaml")
	}
	installed = append(installed, fmt.Sprintf("%d CRDs the cluster lacked: %s", len(crds), strings.Join(crds, ", ")))
	return egConfig, installed, nil
}

func serviceAccountUser(ns, name string) string { return "system:serviceaccount:" + ns + ":" + name }

// writeImpersonatingKubeconfig writes a kubeconfig for server that authenticates with the
// test's admin token and impersonates the ServiceAccount ns/name with the groups the
// API server gives every ServiceAccount token.
func writeImpersonatingKubeconfig(c *cluster, ns, name, server, path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.caPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{
		Token:             c.token,
		Impersonate:       serviceAccountUser(ns, name),
		ImpersonateGroups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: name}
	cfg.CurrentContext = name
	return clientcmd.WriteToFile(*cfg, path)
}

// The Gateway API and Envoy Gateway resources of the kind edge.
var (
	clientPolicyGVR  = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "clienttrafficpolicies"}
	backendPolicyGVR = schema.GroupVersionResource{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Resource: "backendtrafficpolicies"}
)

// edgeCondition is one condition Envoy Gateway must have set on one of the stack's edge
// objects, for the object's current generation.
type edgeCondition struct {
	what string
	gvr  schema.GroupVersionResource
	ns   string
	name string
	// path to the conditions: status.conditions, or a parent's or ancestor's list.
	conditions func(obj *unstructured.Unstructured) []map[string]any
	types      []string
}

func ownConditions(obj *unstructured.Unstructured) []map[string]any {
	return condMaps(obj.Object, "status", "conditions")
}

// parentConditions are the conditions Envoy Gateway's controller wrote for the route's
// or policy's parent or ancestor (status.parents[] or status.ancestors[]).
func parentConditions(list string) func(obj *unstructured.Unstructured) []map[string]any {
	return func(obj *unstructured.Unstructured) []map[string]any {
		entries, _, _ := unstructured.NestedSlice(obj.Object, "status", list)
		var out []map[string]any
		for _, e := range entries {
			m, _ := e.(map[string]any)
			if m["controllerName"] == envoyGatewayControllerName {
				out = append(out, condMaps(m, "conditions")...)
			}
		}
		return out
	}
}

func condMaps(obj map[string]any, path ...string) []map[string]any {
	list, _, _ := unstructured.NestedSlice(obj, path...)
	var out []map[string]any
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// edgeConditions lists what Envoy Gateway must report on the kind edge: the
// GatewayClass Accepted, the Gateway Accepted and Programmed (and given an address),
// every TLSRoute Accepted with its backend resolved, both traffic policies Accepted.
func edgeConditions(routes []string) []edgeCondition {
	out := []edgeCondition{
		{"GatewayClass", gwClassGVR, "", naming.EdgeGatewayName, ownConditions, []string{"Accepted"}},
		{"Gateway", gatewayGVR, naming.NamespaceKcp, naming.EdgeGatewayName, ownConditions, []string{"Accepted", "Programmed"}},
	}
	for _, r := range routes {
		out = append(out, edgeCondition{"TLSRoute", tlsRouteGVR, naming.NamespaceKcp, r, parentConditions("parents"), []string{"Accepted", "ResolvedRefs"}})
	}
	out = append(out,
		edgeCondition{"ClientTrafficPolicy", clientPolicyGVR, naming.NamespaceKcp, naming.EdgeGatewayName, parentConditions("ancestors"), []string{"Accepted"}},
		edgeCondition{"BackendTrafficPolicy", backendPolicyGVR, naming.NamespaceKcp, naming.EdgeGatewayName, parentConditions("ancestors"), []string{"Accepted"}},
	)
	return out
}

// unmetEdgeConditions returns, for each expected condition, why it is not met: missing,
// not True, or observed for an older generation than the object's.
func unmetEdgeConditions(ctx context.Context, c *cluster, want []edgeCondition) []string {
	var unmet []string
	for _, w := range want {
		id := fmt.Sprintf("%s %s", w.what, strings.TrimPrefix(w.ns+"/"+w.name, "/"))
		obj, err := c.dyn.Resource(w.gvr).Namespace(w.ns).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			unmet = append(unmet, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		conds := w.conditions(obj)
		for _, typ := range w.types {
			var found map[string]any
			for _, m := range conds {
				if m["type"] == typ {
					found = m
				}
			}
			gen, _ := found["observedGeneration"].(int64)
			switch {
			case found == nil:
				unmet = append(unmet, fmt.Sprintf("%s: no %s condition from %s", id, typ, envoyGatewayControllerName))
			case found["status"] != "True":
				unmet = append(unmet, fmt.Sprintf("%s: %s=%v (%v: %v)", id, typ, found["status"], found["reason"], found["message"]))
			case gen != obj.GetGeneration():
				unmet = append(unmet, fmt.Sprintf("%s: %s=True observed generation %d, the object is at %d", id, typ, gen, obj.GetGeneration()))
			}
		}
		if w.what == "Gateway" {
			if addrs, _, _ := unstructured.NestedSlice(obj.Object, "status", "addresses"); len(addrs) == 0 {
				unmet = append(unmet, id+": no status.addresses")
			}
		}
	}
	return unmet
}

// conditionTime returns when condition typ of obj last became what it is.
func conditionTime(obj *unstructured.Unstructured, typ string) (time.Time, bool) {
	for _, m := range ownConditions(obj) {
		if m["type"] == typ {
			s, _ := m["lastTransitionTime"].(string)
			ts, err := time.Parse(time.RFC3339, s)
			return ts, err == nil
		}
	}
	return time.Time{}, false
}

// checkEdgeProgrammed waits for Envoy Gateway to report the kind edge accepted and
// programmed (every condition for the object's current generation), logs how long the
// Gateway took to be programmed, and checks that the Envoy proxy objects Envoy Gateway
// wrote for the Gateway are its own: written by its field manager and none by the
// Kubernetes provider, so the search for unplanned objects (step 3), which looks only
// at objects the provider wrote, rightly leaves them out.
func checkEdgeProgrammed(t *testing.T, ctx context.Context, e *env) {
	t.Helper()
	var routes []string
	for _, o := range e.plan.objects {
		if o.Manifest["kind"] == "TLSRoute" {
			md, _ := o.Manifest["metadata"].(map[string]any)
			routes = append(routes, fmt.Sprint(md["name"]))
		}
	}
	if len(routes) == 0 {
		t.Fatal("the offline plan has no TLSRoute")
	}
	want := edgeConditions(routes)
	// The up awaited the Gateway (pulumi.com/waitFor: condition=Programmed), so Envoy
	// Gateway has programmed it by now; the routes and policies are not awaited.
	if unmet := unmetEdgeConditions(ctx, e.c, want[:2]); len(unmet) > 0 {
		t.Errorf("up returned before Envoy Gateway accepted and programmed the edge:%s", indent(unmet))
	}
	start := time.Now()
	var unmet []string
	err := testenv.WaitFor(ctx, 3*time.Minute, e.eg.proc, func() (bool, error) {
		unmet = unmetEdgeConditions(ctx, e.c, want)
		return len(unmet) == 0, nil
	})
	if err != nil {
		t.Fatalf("Envoy Gateway did not accept and program the kind edge (%v):%s", err, indent(unmet))
	}
	gw, err := e.c.dyn.Resource(gatewayGVR).Namespace(naming.NamespaceKcp).Get(ctx, naming.EdgeGatewayName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	programmed, _ := conditionTime(gw, "Programmed")
	addrs, _, _ := unstructured.NestedSlice(gw.Object, "status", "addresses")
	t.Logf("Envoy Gateway: GatewayClass Accepted, Gateway Accepted and Programmed (address %v), %d TLSRoutes Accepted with ResolvedRefs, "+
		"ClientTrafficPolicy and BackendTrafficPolicy Accepted; the Gateway was programmed %s after it was created (%s after up returned); "+
		"%d API server connections through its namespace",
		compact(addrs), len(routes), programmed.Sub(gw.GetCreationTimestamp().Time).Round(time.Second),
		time.Since(start).Round(time.Second), e.eg.forwarded())

	// The proxy Envoy Gateway runs for the Gateway: its Deployment and Service, which
	// kwok runs as a simulated pod.
	var own []string
	for _, gvr := range []schema.GroupVersionResource{deploymentGVR, serviceGVR} {
		list, err := e.c.dyn.Resource(gvr).Namespace(naming.NamespaceEnvoyGateway).List(ctx, metav1.ListOptions{LabelSelector: envoyProxySelector})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 0 {
			t.Errorf("Envoy Gateway wrote no %s for the Gateway in %s", gvr.Resource, naming.NamespaceEnvoyGateway)
		}
		for _, o := range list.Items {
			var managers []string
			for _, m := range o.GetManagedFields() {
				managers = append(managers, m.Manager)
			}
			if managedByPulumi(&o) {
				t.Errorf("%s %s/%s, written by Envoy Gateway, has a %s* field manager: %v", gvr.Resource, o.GetNamespace(), o.GetName(), pulumiManager, managers)
			}
			own = append(own, fmt.Sprintf("%s %s/%s (field managers %v)", gvr.Resource, o.GetNamespace(), o.GetName(), managers))
		}
	}
	class, err := e.c.dyn.Resource(gwClassGVR).Get(ctx, naming.EdgeGatewayName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Envoy Gateway's own objects for the Gateway:%s\nfinalizers on GatewayClass %s: %v",
		indent(own), naming.EdgeGatewayName, class.GetFinalizers())
}

// envoyProxySelector selects the objects Envoy Gateway runs for the kind Gateway.
const envoyProxySelector = "gateway.envoyproxy.io/owning-gateway-name=" + naming.EdgeGatewayName +
	",gateway.envoyproxy.io/owning-gateway-namespace=" + naming.NamespaceKcp

// checkEnvoyProxyRemoved checks, after destroy, that Envoy Gateway removed the Envoy
// proxy it ran for the Gateway: it saw the Gateway go, so it ran through destroy.
func checkEnvoyProxyRemoved(t *testing.T, ctx context.Context, e *env) {
	t.Helper()
	var left []string
	err := testenv.WaitFor(ctx, 90*time.Second, e.eg.proc, func() (bool, error) {
		left = nil
		for _, gvr := range []schema.GroupVersionResource{deploymentGVR, serviceGVR} {
			list, err := e.c.dyn.Resource(gvr).Namespace(naming.NamespaceEnvoyGateway).List(ctx, metav1.ListOptions{LabelSelector: envoyProxySelector})
			if err != nil {
				return false, err
			}
			for _, o := range list.Items {
				left = append(left, gvr.Resource+" "+o.GetName())
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("Envoy Gateway did not remove the Envoy proxy of the destroyed Gateway (%v): %v", err, left)
		return
	}
	t.Logf("Envoy Gateway removed the Envoy proxy Deployment and Service of the destroyed Gateway")
}

// checkImpersonation asks the API server, with Envoy Gateway's kubeconfig, what it may
// do: write a Gateway's status (the chart grants it) but not the Gateway itself (the
// chart grants only reads), so Envoy Gateway runs with the chart's RBAC, not the test's.
func checkImpersonation(ctx context.Context, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		verb, subresource string
		want              bool
	}{{"update", "status", true}, {"update", "", false}, {"delete", "", false}} {
		review, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: naming.NamespaceKcp, Verb: c.verb, Group: gatewayGVR.Group, Resource: gatewayGVR.Resource, Subresource: c.subresource,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("access review with Envoy Gateway's kubeconfig: %w", err)
		}
		if review.Status.Allowed != c.want {
			return fmt.Errorf("Envoy Gateway's kubeconfig: %s gateways/%s allowed=%v, the chart's RBAC says %v", c.verb, c.subresource, review.Status.Allowed, c.want)
		}
	}
	return nil
}
