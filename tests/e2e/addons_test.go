//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The add-ons the kind stack installs with Helm releases of its own
// (components/platform_kind.go), and the kcp-operator's release: each release's name, its
// namespace and the Deployments its chart runs on the real node. destroy uninstalls the
// add-ons, whose namespaces Helm created and leaves. It does not uninstall the operator's
// release (docs/operations.md, "What pulumi destroy keeps": its CRDs are templates), but
// deletes the operator's namespace, which the program declares, and with it the
// release's Deployment and Helm record; its cluster-wide objects stay.
type addOnRelease struct {
	name, namespace string
	deployments     []string
	// programNamespace: the program declares the namespace, and destroy deletes it.
	programNamespace bool
}

var addOnReleases = []addOnRelease{
	{"cert-manager", naming.NamespaceCertManager, []string{"cert-manager", "cert-manager-cainjector", "cert-manager-webhook"}, false},
	{"envoy-gateway", naming.NamespaceEnvoyGateway, []string{"envoy-gateway"}, false},
	{naming.OperatorReleaseName, naming.NamespaceOperator, []string{naming.OperatorDeployment}, true},
}

// addOnCRDGroups are the API groups of the CRDs the add-on charts install: cert-manager's
// as templates with helm.sh/resource-policy keep (the stack sets crds.keep), Envoy
// Gateway's and the Gateway API's from gateway-helm's crds/ directory, which Helm
// installs and never deletes.
var addOnCRDGroups = []string{"cert-manager.io", "acme.cert-manager.io", "gateway.networking.k8s.io", "gateway.envoyproxy.io"}

// addOnLeftovers are what the add-ons leave besides their CRDs and namespaces when
// their releases are uninstalled, and why: Helm does not track a hook's objects as part of
// the release, and what a controller writes at run time is not the chart's. The
// kcp-operator's release is not uninstalled, and leaves its cluster-wide RBAC.
var addOnLeftovers = map[string]string{
	"ServiceAccount envoy-gateway-system/envoy-gateway-gateway-helm-certgen":            "gateway-helm's certgen RBAC, a pre-install hook (its Job goes 30 s after it finished)",
	"Role envoy-gateway-system/envoy-gateway-gateway-helm-certgen":                      "gateway-helm's certgen RBAC, a pre-install hook",
	"RoleBinding envoy-gateway-system/envoy-gateway-gateway-helm-certgen":               "gateway-helm's certgen RBAC, a pre-install hook",
	"ClusterRole envoy-gateway-gateway-helm-certgen:envoy-gateway-system":               "gateway-helm's certgen RBAC, a pre-install hook",
	"ClusterRoleBinding envoy-gateway-gateway-helm-certgen:envoy-gateway-system":        "gateway-helm's certgen RBAC, a pre-install hook",
	"MutatingWebhookConfiguration envoy-gateway-topology-injector.envoy-gateway-system": "the topology injector, a pre-install hook (failurePolicy Ignore)",
	"Secret envoy-gateway-system/envoy":                                                 "written by certgen",
	"Secret envoy-gateway-system/envoy-gateway":                                         "written by certgen",
	"Secret envoy-gateway-system/envoy-rate-limit":                                      "written by certgen",
	"Secret envoy-gateway-system/envoy-oidc-hmac":                                       "written by certgen",
	"Secret cert-manager/cert-manager-webhook-ca":                                       "written by cert-manager's webhook for its serving certificate",
	// The kcp-operator chart's templates/rbac.yaml names these <namespace>:<fullname> and
	// <namespace>:<fullname>:<service account>; the fullname and the service account are
	// the release's name.
	"ClusterRole " + naming.NamespaceOperator + ":" + naming.OperatorReleaseName:                                           operatorRBACKept,
	"ClusterRoleBinding " + naming.NamespaceOperator + ":" + naming.OperatorReleaseName + ":" + naming.OperatorReleaseName: operatorRBACKept,
}

const operatorRBACKept = "the kcp-operator release's cluster-wide RBAC: destroy does not uninstall that release, it deletes the operator's namespace"

// leftoverKinds are the kinds destroy's search for what the add-ons leave looks at: in
// the add-ons' namespaces everything of these kinds, cluster-wide the objects whose name
// holds the add-on's or the kcp-operator's name.
var leftoverKinds = []struct {
	kind       string
	gvr        schema.GroupVersionResource
	namespaced bool
}{
	{"Deployment", deploymentGVR, true},
	{"Service", serviceGVR, true},
	{"Job", schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, true},
	{"ServiceAccount", schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, true},
	{"Secret", secretGVR, true},
	{"ConfigMap", configMapGVR, true},
	{"Role", schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, true},
	{"RoleBinding", schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, true},
	{"ClusterRole", schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, false},
	{"ClusterRoleBinding", crbGVR, false},
	{"MutatingWebhookConfiguration", schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}, false},
	{"ValidatingWebhookConfiguration", schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}, false},
}

// addOnObjects lists the objects of leftoverKinds that belong to the add-ons as
// "<Kind> <ns>/<name>": every one in cert-manager's and Envoy Gateway's namespaces but
// what every namespace holds (the default ServiceAccount, the kube-root-ca.crt
// ConfigMap), and every cluster-wide one whose name holds cert-manager, envoy-gateway or
// kcp-operator.
func addOnObjects(ctx context.Context, c *cluster) ([]string, error) {
	var out []string
	for _, k := range leftoverKinds {
		namespaces := []string{""}
		if k.namespaced {
			namespaces = []string{naming.NamespaceCertManager, naming.NamespaceEnvoyGateway}
		}
		for _, ns := range namespaces {
			list, err := c.dyn.Resource(k.gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", k.gvr.Resource, err)
			}
			for _, o := range list.Items {
				name := o.GetName()
				switch {
				case k.namespaced && (k.kind == "ServiceAccount" && name == "default" || k.kind == "ConfigMap" && name == "kube-root-ca.crt"):
					continue
				case !k.namespaced && !strings.Contains(name, "cert-manager") && !strings.Contains(name, "envoy-gateway") && !strings.Contains(name, "kcp-operator"):
					continue
				}
				if ns != "" {
					name = ns + "/" + name
				}
				out = append(out, k.kind+" "+name)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// addOnCRDs lists the CRDs of addOnCRDGroups.
func addOnCRDs(ctx context.Context, c *cluster) ([]string, error) {
	list, err := c.dyn.Resource(crdGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, crd := range list.Items {
		_, group, _ := strings.Cut(crd.GetName(), ".")
		if slices.Contains(addOnCRDGroups, group) && crd.GetDeletionTimestamp() == nil {
			out = append(out, crd.GetName())
		}
	}
	slices.Sort(out)
	return out, nil
}

// checkAddOnsAfterDestroy checks what destroy leaves of the add-ons and the kcp-operator's
// release: their CRDs (crdsBefore, every one kept; the operator's checkAfterDestroy
// checks), the namespaces Helm created, and of their other objects only
// addOnLeftovers; every Deployment of the three releases and every Helm record is
// gone, and so is the operator's namespace. It returns what stays, each with the reason.
func checkAddOnsAfterDestroy(t *testing.T, ctx context.Context, c *cluster, crdsBefore []string) (kept []string) {
	t.Helper()
	crds, err := addOnCRDs(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(crds, crdsBefore) {
		t.Errorf("destroy changed the add-ons' CRDs: %v, were %v", crds, crdsBefore)
	}
	kept = append(kept, fmt.Sprintf("%d CustomResourceDefinitions of %v (cert-manager's kept by crds.keep, the Gateway API's and Envoy Gateway's from gateway-helm's crds/, which Helm never deletes)",
		len(crds), addOnCRDGroups))
	for _, r := range addOnReleases {
		n, err := c.kube.CoreV1().Namespaces().Get(ctx, r.namespace, metav1.GetOptions{})
		switch {
		case r.programNamespace:
			// Checked below, once the namespace had time to go.
		case err != nil || n.DeletionTimestamp != nil:
			t.Errorf("destroy removed namespace %s (%v): Helm's uninstall leaves the namespace its install created", r.namespace, err)
		default:
			kept = append(kept, "Namespace "+r.namespace+" (created by its Helm release; an uninstall leaves it)")
		}
	}
	// The Deployments go with their releases, the Envoy proxy's with its Gateway; their
	// pods terminate after.
	var objects, left []string
	var listErr error
	_ = testenv.WaitFor(ctx, 90*time.Second, nil, func() (bool, error) {
		if objects, listErr = addOnObjects(ctx, c); listErr != nil {
			return false, listErr
		}
		left = nil
		for _, r := range addOnReleases {
			if r.programNamespace {
				if _, err := c.kube.CoreV1().Namespaces().Get(ctx, r.namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					left = append(left, "Namespace "+r.namespace)
				}
			}
			names, err := countObjects(ctx, c, deploymentGVR, r.namespace)
			if err != nil {
				return false, err
			}
			left = append(left, names...)
			records, err := c.kube.CoreV1().Secrets(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + r.name})
			if err != nil {
				return false, err
			}
			for _, s := range records.Items {
				left = append(left, "Helm record "+r.namespace+"/"+s.Name)
			}
		}
		return len(left) == 0, nil
	})
	if listErr != nil {
		t.Fatal(listErr)
	}
	if len(left) > 0 {
		t.Errorf("destroy left the add-ons' Deployments, Helm records or the operator's namespace:%s", indent(left))
	}
	var unexpected []string
	for _, o := range objects {
		if why, ok := addOnLeftovers[o]; ok {
			kept = append(kept, o+" ("+why+")")
		} else if !strings.HasPrefix(o, "Deployment ") {
			unexpected = append(unexpected, o)
		}
	}
	if len(unexpected) > 0 {
		t.Errorf("destroy left objects of the add-ons that nothing says stay:%s", indent(unexpected))
	}
	for o := range addOnLeftovers {
		if !slices.Contains(objects, o) {
			t.Logf("listed as left by the add-ons, but gone after destroy: %s", o)
		}
	}
	return kept
}

// checkAddOnsInstalled checks that the stack's releases installed cert-manager, Envoy
// Gateway and the kcp-operator: each release's newest Helm record is deployed, and each
// of their Deployments has rolled out.
func checkAddOnsInstalled(t *testing.T, ctx context.Context, c *cluster, label string) {
	t.Helper()
	var installed []string
	for _, r := range addOnReleases {
		status, newest := newestHelmRecord(t, ctx, c, r)
		if status != "deployed" {
			t.Errorf("%s: Helm release %s/%s is %q (revision %d), not deployed", label, r.namespace, r.name, status, newest)
		}
		for _, name := range r.deployments {
			d, err := c.kube.AppsV1().Deployments(r.namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("%s: Deployment %s/%s: %v", label, r.namespace, name, err)
				continue
			}
			if !deploymentReady(d.Generation, d.Status, d.Spec.Replicas) {
				t.Errorf("%s: Deployment %s/%s has not rolled out: %s", label, r.namespace, name, compact(d.Status))
			}
		}
		installed = append(installed, fmt.Sprintf("%s (revision %d): %v", r.name, newest, r.deployments))
	}
	t.Logf("%s: the stack's releases installed%s", label, indent(installed))
}

// checkWebhookCalledThroughItsService shows that the API server calls cert-manager's
// webhook through its Service, as on any cluster: the chart's
// ValidatingWebhookConfiguration names the Service (no URL), cainjector gave it a CA
// bundle, and a server-side dry run of an Issuer that configures no issuer, which the
// CRD's schema accepts, is refused by the webhook itself. The API server dials the
// Service's ClusterIP, which the real node's Service route and kube-proxy's rules take to
// the webhook's pod on the bridge; the node's network rules are read back afterwards and
// must still hold (nothing leaves the machine).
func checkWebhookCalledThroughItsService(t *testing.T, ctx context.Context, c *cluster) {
	t.Helper()
	const name = "cert-manager-webhook"
	vwc, err := c.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cert-manager's ValidatingWebhookConfiguration: %v", err)
	}
	var via []string
	for _, w := range vwc.Webhooks {
		svc := w.ClientConfig.Service
		switch {
		case svc == nil || w.ClientConfig.URL != nil:
			t.Errorf("webhook %s is not called through a Service: %s", w.Name, compact(w.ClientConfig))
		case len(w.ClientConfig.CABundle) == 0:
			t.Errorf("webhook %s has no CA bundle: cainjector did not inject it", w.Name)
		default:
			s, err := c.kube.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("webhook %s's Service %s/%s: %v", w.Name, svc.Namespace, svc.Name, err)
				continue
			}
			via = append(via, fmt.Sprintf("%s via Service %s/%s (ClusterIP %s)", w.Name, svc.Namespace, svc.Name, s.Spec.ClusterIP))
		}
	}
	issuer := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
		"metadata": map[string]any{"name": "railgrid-e2e-no-issuer", "namespace": naming.NamespaceKcp},
		"spec":     map[string]any{},
	}}
	issuers := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}
	_, err = c.dyn.Resource(issuers).Namespace(naming.NamespaceKcp).Create(ctx, issuer, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	const denied = `admission webhook "webhook.cert-manager.io" denied the request`
	if err == nil || !strings.Contains(err.Error(), denied) {
		t.Errorf("an Issuer with no issuer configured was not refused by cert-manager's webhook (%s): %v", denied, err)
	}
	if err := c.network.Check(c.apiPort, c.node.KubeletPort); err != nil {
		t.Errorf("after the API server called the webhooks: %v", err)
	}
	t.Logf("the API server called cert-manager's webhook through its Service (%s); the node's network rules still hold",
		strings.Join(via, "; "))
}

// newestHelmRecord returns the status and revision of the release's newest Helm record
// (a Secret of Helm's storage driver), or "" and 0 if it has none.
func newestHelmRecord(t *testing.T, ctx context.Context, c *cluster, r addOnRelease) (string, int) {
	t.Helper()
	records, err := c.kube.CoreV1().Secrets(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + r.name})
	if err != nil {
		t.Fatal(err)
	}
	newest, status := 0, ""
	for _, s := range records.Items {
		var v int
		if _, err := fmt.Sscan(s.Labels["version"], &v); err == nil && v > newest {
			newest, status = v, s.Labels["status"]
		}
	}
	return status, newest
}
