//go:build linux

package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var certificateRequestGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificaterequests"}

// certificateNameAnnotation is where cert-manager records the Certificate a request
// belongs to (cert-manager v1.20 pkg/apis/certmanager/v1, CertificateNameKey).
const certificateNameAnnotation = "cert-manager.io/certificate-name"

// requestApprover approves cert-manager's CertificateRequests in place of cert-manager's
// own approver, which the controller then runs without
// (--controllers=*,-certificaterequests-approver), so that the test can hold one
// Certificate's issuance. That is cert-manager's documented mode for an external
// approver such as approver-policy (https://cert-manager.io/docs/usage/certificaterequest/#approval):
// a request is signed only once its Approved condition is True. killed-up holds the hub
// Kubeconfig's certificate across kills 2 and 3, so those kills land before the
// Kubeconfig's create can finish, whichever of the shard and the front proxy becomes
// Available first; the other runs keep cert-manager's own approver.
type requestApprover struct {
	mu       sync.Mutex
	held     string   // Certificate whose requests wait; "" holds nothing
	approved []string // namespace/name of every request approved, in order
}

func startRequestApprover(t *testing.T, ctx context.Context, c *cluster) *requestApprover {
	a := &requestApprover{}
	t.Cleanup(poll(ctx, 100*time.Millisecond, func(ctx context.Context) {
		if err := a.sync(ctx, c); err != nil && ctx.Err() == nil {
			t.Logf("request approver: %v", err)
		}
	}))
	return a
}

// hold keeps the requests of Certificate name unapproved until release.
func (a *requestApprover) hold(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held = name
}

func (a *requestApprover) release() { a.hold("") }

func (a *requestApprover) sync(ctx context.Context, c *cluster) error {
	list, err := c.dyn.Resource(certificateRequestGVR).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	a.mu.Lock()
	held := a.held
	a.mu.Unlock()
	for i := range list.Items {
		cr := &list.Items[i]
		if decided(cr) || (held != "" && cr.GetAnnotations()[certificateNameAnnotation] == held) {
			continue
		}
		conditions, _, _ := unstructured.NestedSlice(cr.Object, "status", "conditions")
		conditions = append(conditions, map[string]any{
			"type":               "Approved",
			"status":             "True",
			"reason":             "RailgridE2E",
			"message":            "approved by the end-to-end test's request approver",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		})
		if err := unstructured.SetNestedSlice(cr.Object, conditions, "status", "conditions"); err != nil {
			return err
		}
		if _, err := c.dyn.Resource(certificateRequestGVR).Namespace(cr.GetNamespace()).UpdateStatus(ctx, cr, metav1.UpdateOptions{}); err != nil {
			return err // a conflict: the next pass sees the new version
		}
		a.mu.Lock()
		a.approved = append(a.approved, cr.GetNamespace()+"/"+cr.GetName())
		a.mu.Unlock()
	}
	return nil
}

// decided reports whether a request already carries an Approved or Denied condition.
func decided(cr *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(cr.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && (m["type"] == "Approved" || m["type"] == "Denied") {
			return true
		}
	}
	return false
}

// approvedRequests returns the requests approved so far.
func (a *requestApprover) approvedRequests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.approved...)
}
