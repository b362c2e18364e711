package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The Kubernetes provider's create (pulumi-kubernetes provider/v4, pkg/await/await.go
// Creation) is a server-side apply of the object's inputs, as YAML, with the field manager
// fieldManagerName (pkg/provider/provider.go) returns: the annotation
// pulumi.com/patchFieldManager, else one from the state, else pulumi-kubernetes-<random>;
// and with force only if the annotation pulumi.com/patchForce is "true". This file
// applies the program's objects exactly so, to show what happens when a create reaches
// the API server but not the state (an up interrupted or killed while the create was in
// flight) and the next up creates the object again. The annotations are
// naming.AnnotationPatchFieldManager and naming.AnnotationPatchForce.

// providerApply applies obj as the provider's create does, with manager and force.
func (c *client) providerApply(ctx context.Context, obj *unstructured.Unstructured, manager string, force bool) error {
	ri, err := c.resourceFor(ctx, obj)
	if err != nil {
		return err
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		FieldManager: manager, Force: &force, FieldValidation: metav1.FieldValidationWarn,
	})
	return err
}

// asTheProviderApplies returns the manager and force the provider uses for obj, given
// that the state holds no manager for it (a create).
func asTheProviderApplies(obj *unstructured.Unstructured, random string) (string, bool) {
	a := obj.GetAnnotations()
	manager := a[naming.AnnotationPatchFieldManager]
	if manager == "" {
		manager = "pulumi-kubernetes-" + random
	}
	return manager, a[naming.AnnotationPatchForce] == "true"
}

// withoutFieldManagerAnnotations is obj as the program declared it before it set a
// field manager: no patchFieldManager, and patchForce only where it was set by hand
// (kubeadm's Corefile then).
func withoutFieldManagerAnnotations(obj *unstructured.Unstructured, wasForced bool) *unstructured.Unstructured {
	out := obj.DeepCopy()
	a := out.GetAnnotations()
	delete(a, naming.AnnotationPatchFieldManager)
	delete(a, naming.AnnotationPatchForce)
	if wasForced {
		a[naming.AnnotationPatchForce] = "true"
	}
	if len(a) == 0 {
		a = nil
	}
	out.SetAnnotations(a)
	return out
}

// TestReapplyAfterAnInterruptedCreate proves the cause of the "Server-Side Apply field
// conflict" after an interrupted up, and that the program's fixed field manager removes
// it, on a real kube-apiserver with the upstream CRDs, for both stacks:
//   - the cause: an object created by one random manager and applied again, unchanged,
//     by another conflicts wherever the API server stores a defaulted value in a list it
//     treats as one value (atomic): a Gateway API route's parentRefs and rules. A
//     manager that owns a field may change it; a second manager may only agree with its
//     value, and the live value (with defaults) is not the applied one (without);
//   - every object, applied as the program declares it now, can be created twice (the
//     re-create after an interrupted create) with no conflict;
//   - a stack created before the fixed manager (random managers) takes the program's
//     objects on its next up, and a later change to a route applies too: the old random
//     manager, which still co-owns the fields, does not block it.
func TestReapplyAfterAnInterruptedCreate(t *testing.T) {
	servers, root := requireServers(t)
	crds, err := testenv.LoadCRDs(testenv.CRDsDir(root))
	if err != nil {
		t.Fatalf("reading the upstream CRDs: %v", err)
	}
	var plans []rendered
	for _, stack := range stacks {
		p, err := renderStack(root, stack)
		if err != nil {
			t.Fatalf("stack %s: %v", stack, err)
		}
		plans = append(plans, p)
	}
	for _, p := range plans {
		t.Run(p.stack, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			_, cfg := startAPIServer(t, ctx, servers, p.serviceCIDR.String())
			cl, err := newClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.installCRDs(ctx, crds); err != nil {
				t.Fatalf("installing the upstream CRDs: %v", err)
			}
			if err := preCreate(ctx, cl, p); err != nil {
				t.Fatalf("creating what the cluster already has: %v", err)
			}
			objs, err := planObjects(p.objects)
			if err != nil {
				t.Fatal(err)
			}
			applyAll := func(what string, manager func(*unstructured.Unstructured) (*unstructured.Unstructured, string, bool)) map[string]error {
				failed := map[string]error{}
				for _, o := range objs {
					obj, m, force := manager(o.object)
					if err := cl.providerApply(ctx, obj, m, force); err != nil {
						failed[describe(o.object)] = err
					}
				}
				t.Logf("%s: %d objects applied, %d refused", what, len(objs)-len(failed), len(failed))
				return failed
			}
			isRoute := func(kind string) bool { return kind == "TLSRoute" || kind == "HTTPRoute" }

			// 1. A stack created before the fixed manager: each object created by its own
			// random manager, the patches of kubeadm's CoreDNS forced as they must be (the
			// ConfigMap by hand as it was; the Deployment's config-volume is kubeadm's field).
			if failed := applyAll("created as before the fixed field manager", func(o *unstructured.Unstructured) (*unstructured.Unstructured, string, bool) {
				kubeadms := (o.GetKind() == "ConfigMap" && o.GetName() == naming.CoreDNSConfigMap) ||
					(o.GetKind() == "Deployment" && o.GetName() == naming.CoreDNSDeployment)
				old := withoutFieldManagerAnnotations(o, kubeadms)
				m, force := asTheProviderApplies(old, "first-"+strings.ToLower(o.GetKind()))
				return old, m, force
			}); len(failed) > 0 {
				t.Fatalf("the first create failed: %v", failed)
			}

			// 2. The cause: the same objects created again by new random managers.
			conflicts := applyAll("created again by other random managers (the cause)", func(o *unstructured.Unstructured) (*unstructured.Unstructured, string, bool) {
				old := withoutFieldManagerAnnotations(o, false)
				m, force := asTheProviderApplies(old, "second-"+strings.ToLower(o.GetKind()))
				return old, m, force
			})
			routes := 0
			for _, o := range objs {
				err := conflicts[describe(o.object)]
				if isRoute(o.object.GetKind()) {
					routes++
					if !apierrors.IsConflict(err) {
						t.Errorf("%s re-created by another manager: want a field conflict, got %v", describe(o.object), err)
					}
				}
				if err != nil {
					t.Logf("  %s: %s", describe(o.object), message(err))
				}
			}
			if routes == 0 {
				t.Fatalf("the %s plan has no routes: the cause is not exercised", p.stack)
			}

			// 3. The program's next up on that stack, and 4. its re-create after an
			// interrupt: every object with the fixed manager, twice.
			asDeclared := func(o *unstructured.Unstructured) (*unstructured.Unstructured, string, bool) {
				m, force := asTheProviderApplies(o, "unused")
				want := naming.FieldManager
				if o.GetKind() == "Secret" && o.GetName() == config.DefaultHubSecretName {
					want = naming.HubSecretFieldManager // its own, for the data an earlier version applied
				}
				if m != want {
					t.Errorf("%s is applied by %q, not by the program's field manager %q", describe(o), m, want)
				}
				return o, m, force
			}
			for _, what := range []string{"the program's objects over the old stack", "the program's objects created again (after an interrupted create)"} {
				for obj, err := range applyAll(what, asDeclared) {
					t.Errorf("%s: %s: %s", what, obj, message(err))
				}
			}

			// 5. A later change: each route moves to another hostname.
			for _, o := range objs {
				if !isRoute(o.object.GetKind()) {
					continue
				}
				moved := o.object.DeepCopy()
				if err := unstructured.SetNestedStringSlice(moved.Object, []string{"moved." + o.object.GetName() + ".example.com"}, "spec", "hostnames"); err != nil {
					t.Fatal(err)
				}
				m, force := asTheProviderApplies(moved, "unused")
				if err := cl.providerApply(ctx, moved, m, force); err != nil {
					t.Errorf("a changed %s after the old managers: %s", describe(moved), message(err))
				}
			}
			t.Log(fmt.Sprintf("stack %s: %d routes checked", p.stack, routes))
		})
	}
}
