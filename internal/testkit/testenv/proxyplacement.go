package testenv

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// EnvoyProxyLabels are the labels Envoy Gateway v1.9.0 gives the Envoy proxy pods it
// creates (EnvoyAppLabel in internal/infrastructure/kubernetes/proxy/resource.go, the
// labels of its proxy Deployments' pod template), and which its own control plane's pods
// do not carry (the chart labels those control-plane=envoy-gateway and
// app.kubernetes.io/name=gateway-helm).
var EnvoyProxyLabels = map[string]string{
	"app.kubernetes.io/name":       "envoy",
	"app.kubernetes.io/component":  "proxy",
	"app.kubernetes.io/managed-by": "envoy-gateway",
}

// EnvoyProxyPlacementPolicy names the MutatingAdmissionPolicy and its binding that
// InstallEnvoyProxyPlacement creates.
const EnvoyProxyPlacementPolicy = "railgrid-test-envoy-proxy-placement"

// InstallEnvoyProxyPlacement makes every pod created with EnvoyProxyLabels ask for the
// nodes of nodeSelector, and only for them, without a change to the program or the
// chart: no Envoy binary is built here, so Envoy's proxies run on kwok's nodes while
// Envoy Gateway's control plane, in the same namespace, runs on the real node.
//
// It is a MutatingAdmissionPolicy (the API server needs
// APIServerOptions.MutatingAdmissionPolicies) whose JSON patch sets the pod's
// spec.nodeSelector to nodeSelector. How it meets the PodNodeSelector plugin
// (APIServerOptions.DefaultNodeSelector) in kube-apiserver v1.34:
//   - PodNodeSelector mutates first (pkg/kubeapiserver/options/plugins.go orders it
//     before MutatingAdmissionPolicy) and merges the namespace's selector (its
//     scheduler.alpha.kubernetes.io/node-selector annotation, or the cluster's default)
//     into the pod's; the policy then replaces the whole selector.
//   - A policy that changed the object makes the API server run every in-tree mutating
//     plugin a second time (k8s.io/apiserver's admission/reinvocation.go), so
//     PodNodeSelector merges the default in again; with reinvocationPolicy IfNeeded the
//     policy runs again after it, and its selector is the one that stays. (With Never,
//     the pod asks for both nodes' labels and fits neither.)
//   - PodNodeSelector's validation, after every mutation, refuses only a label that the
//     namespace's selector gives another value.
//
// So the proxies' namespace must keep the cluster's default (or a selector of other
// labels than nodeSelector's) rather than name the kwok nodes, or the control plane would
// go there too.
//
// It returns once the API server applies the policy: a server-side dry run of a proxy
// pod in the default namespace (whose default ServiceAccount must exist) gets the
// selector.
func InstallEnvoyProxyPlacement(ctx context.Context, kube kubernetes.Interface, nodeSelector map[string]string) error {
	if len(nodeSelector) == 0 {
		return fmt.Errorf("the Envoy proxies' placement needs a node selector")
	}
	// Label keys and values are plain ASCII, so each quotes as a CEL string as in Go.
	if errs := metavalidation.ValidateLabels(nodeSelector, field.NewPath("nodeSelector")); len(errs) > 0 {
		return errs.ToAggregate()
	}
	var entries []string
	for _, k := range slices.Sorted(maps.Keys(nodeSelector)) {
		entries = append(entries, strconv.Quote(k)+": "+strconv.Quote(nodeSelector[k]))
	}
	// "add" replaces a member that exists (RFC 6902), here PodNodeSelector's.
	patch := `[JSONPatch{op: "add", path: "/spec/nodeSelector", value: {` + strings.Join(entries, ", ") + `}}]`
	fail := admissionv1beta1.Fail
	policy := &admissionv1beta1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: EnvoyProxyPlacementPolicy},
		Spec: admissionv1beta1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1beta1.MatchResources{
				ObjectSelector: &metav1.LabelSelector{MatchLabels: EnvoyProxyLabels},
				ResourceRules: []admissionv1beta1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1beta1.RuleWithOperations{
						Operations: []admissionv1beta1.OperationType{admissionv1beta1.Create},
						Rule:       admissionv1beta1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
					},
				}},
			},
			Mutations: []admissionv1beta1.Mutation{{
				PatchType: admissionv1beta1.PatchTypeJSONPatch,
				JSONPatch: &admissionv1beta1.JSONPatch{Expression: patch},
			}},
			// A proxy pod that escaped the policy would be bound to the real node and
			// never start there (no Envoy image): better refused, and retried by its
			// ReplicaSet.
			FailurePolicy: &fail,
			// Again after PodNodeSelector's second run (see above).
			ReinvocationPolicy: admissionv1beta1.IfNeededReinvocationPolicy,
		},
	}
	binding := &admissionv1beta1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: EnvoyProxyPlacementPolicy},
		Spec:       admissionv1beta1.MutatingAdmissionPolicyBindingSpec{PolicyName: EnvoyProxyPlacementPolicy},
	}
	admission := kube.AdmissionregistrationV1beta1()
	if _, err := admission.MutatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating MutatingAdmissionPolicy %s: %w", policy.Name, err)
	}
	if _, err := admission.MutatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating MutatingAdmissionPolicyBinding %s: %w", binding.Name, err)
	}

	// The API server loads policies from its informers, a moment after they are created.
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "envoy-proxy-placement-probe", Namespace: metav1.NamespaceDefault, Labels: EnvoyProxyLabels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "envoy", Image: PauseImageRef}}},
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := kube.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
			// The ServiceAccount not there yet, or a selector the namespace refuses.
			last = err.Error()
			return false, nil
		case err != nil:
			return false, err
		}
		last = fmt.Sprintf("a dry-run proxy pod got node selector %v", got.Spec.NodeSelector)
		return maps.Equal(got.Spec.NodeSelector, nodeSelector), nil
	})
	if err != nil {
		return fmt.Errorf("the Envoy proxies' placement policy did not take effect: %w (%s)", err, last)
	}
	return nil
}
