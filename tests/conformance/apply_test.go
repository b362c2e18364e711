package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

// fieldManager owns every field the test applies.
const fieldManager = "railgrid-kcp-conformance"

// setupManager owns what the test creates to stand for what a cluster already has.
const setupManager = "conformance-cluster-setup"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// client applies objects through the dynamic client, mapping kinds to resources with
// the server's discovery.
type client struct {
	dynamic   dynamic.Interface
	discovery discovery.DiscoveryInterface
	mapper    meta.RESTMapper
}

func newClient(cfg *rest.Config) (*client, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c := &client{dynamic: dyn, discovery: disc}
	return c, c.refreshMapper()
}

func (c *client) refreshMapper() error {
	groups, err := restmapper.GetAPIGroupResources(c.discovery)
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	c.mapper = restmapper.NewDiscoveryRESTMapper(groups)
	return nil
}

// resourceFor maps an object to its resource client. A kind discovery does not list
// yet (a CRD established a moment ago) is looked up again for a few seconds.
func (c *client) resourceFor(ctx context.Context, obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("object has no apiVersion or kind")
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
				return c.dynamic.Resource(mapping.Resource), nil
			}
			ns := obj.GetNamespace()
			if ns == "" {
				// What Pulumi's provider and kubectl do for a namespaced object without one.
				ns = metav1.NamespaceDefault
			}
			return c.dynamic.Resource(mapping.Resource).Namespace(ns), nil
		}
		if !meta.IsNoMatchError(err) || time.Now().After(deadline) {
			return nil, fmt.Errorf("the server has no resource for %s: %w", gvk, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if err := c.refreshMapper(); err != nil {
			return nil, err
		}
	}
}

// apply server-side applies obj with strict field validation: an unknown or duplicated
// field is an error, as is anything the schema, CEL rules or admission refuse.
func (c *client) apply(ctx context.Context, obj *unstructured.Unstructured, force bool) (*unstructured.Unstructured, error) {
	ri, err := c.resourceFor(ctx, obj)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	return ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		FieldManager:    fieldManager,
		Force:           &force,
		FieldValidation: metav1.FieldValidationStrict,
	})
}

// create creates obj the way Helm installs CRDs and kubeadm its objects (not an apply).
func (c *client) create(ctx context.Context, obj *unstructured.Unstructured) error {
	ri, err := c.resourceFor(ctx, obj)
	if err != nil {
		return err
	}
	_, err = ri.Create(ctx, obj, metav1.CreateOptions{FieldManager: setupManager, FieldValidation: metav1.FieldValidationStrict})
	return err
}

// toApply is one object to apply and what to call it in a report.
type toApply struct {
	what   string
	object *unstructured.Unstructured
	force  bool
}

// rejection is an object the server refused, with the server's message.
type rejection struct {
	what string
	err  error
}

func (r rejection) String() string { return r.what + ":\n      " + message(r.err) }

// message is the server's message for an API error, or the error text.
func message(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		msg := s.Message
		if s.Details != nil {
			for _, cause := range s.Details.Causes {
				if cause.Message != "" && !strings.Contains(msg, cause.Message) {
					msg += "\n      cause: " + strings.TrimSpace(cause.Field+" "+cause.Message)
				}
			}
		}
		return strings.TrimSpace(fmt.Sprintf("%s (HTTP %d %s", msg, s.Code, s.Reason)) + ")"
	}
	return err.Error()
}

// applyAll applies every object in order and returns every rejection: it does not stop
// at the first one, so one run reports all problems.
func (c *client) applyAll(ctx context.Context, objs []toApply) []rejection {
	var out []rejection
	for _, o := range objs {
		if ctx.Err() != nil {
			out = append(out, rejection{what: o.what, err: fmt.Errorf("not applied: %w", ctx.Err())})
			continue
		}
		if _, err := c.apply(ctx, o.object, o.force); err != nil {
			out = append(out, rejection{what: o.what, err: err})
		}
	}
	return out
}

// describe names an object for a report: apiVersion, kind, namespace/name.
func describe(obj *unstructured.Unstructured) string {
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%s %s %s", obj.GetAPIVersion(), obj.GetKind(), name)
}

// toUnstructured turns a plan manifest into an unstructured object with JSON values.
func toUnstructured(manifest map[string]any) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(manifest)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return obj, nil
}

// installCRDs creates the CRDs, as Helm installs a chart's crds/ directory, and waits
// until the server has established every one of them.
func (c *client) installCRDs(ctx context.Context, crds []*unstructured.Unstructured) error {
	var errs []string
	var names []string
	for _, crd := range crds {
		names = append(names, crd.GetName())
		if _, err := c.dynamic.Resource(crdGVR).Create(ctx, crd.DeepCopy(), metav1.CreateOptions{FieldManager: setupManager}); err != nil {
			errs = append(errs, fmt.Sprintf("CRD %s: %s", crd.GetName(), message(err)))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	if err := testenv.WaitEstablished(ctx, c.dynamic, nil, 2*time.Minute, names...); err != nil {
		return err
	}
	return c.refreshMapper()
}
