//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Envoy Gateway, as the kind stack installs it: the stack's Helm release installs
// gateway-helm v1.9.0 from the test's OCI registry, its certgen Job and its control plane
// run on the real node from the image written here (the envoy-gateway binary, built from
// that module version), with the chart's ServiceAccount and RBAC, and its topology
// injector is served through the chart's Service to the API server. Only the Envoy proxy
// pods it runs for the Gateway are kwok's (testenv.InstallEnvoyProxyPlacement): no Envoy
// binary is built here, so no TLS connection goes through the edge.

// envoyGatewayControllerName is the controller name in the chart's configuration and in
// the kind stack's GatewayClass.
const envoyGatewayControllerName = "gateway.envoyproxy.io/gatewayclass-controller"

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
	err := testenv.WaitFor(ctx, 3*time.Minute, nil, func() (bool, error) {
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
		"ClientTrafficPolicy and BackendTrafficPolicy Accepted; the Gateway was programmed %s after it was created (%s after up returned)",
		compact(addrs), len(routes), programmed.Sub(gw.GetCreationTimestamp().Time).Round(time.Second),
		time.Since(start).Round(time.Second))

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
	err := testenv.WaitFor(ctx, 90*time.Second, nil, func() (bool, error) {
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
