package conformance

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Envoy's proxy pods go to kwok's nodes and Envoy Gateway's control plane, in the same
// namespace, to the real node, with nothing changed in what the program or the chart
// declares. The API server runs as the end-to-end test runs it: the PodNodeSelector
// plugin gives every pod the real node's selector by default (tests/e2e/node_test.go
// names the nodes by these labels), and the proxies' placement policy
// (testenv.InstallEnvoyProxyPlacement) is installed. A proxy pod then asks for kwok's
// nodes only; the control plane's pod keeps the real node's selector.
func TestEnvoyProxiesGoToKwokNodesAndTheControlPlaneToTheRealNode(t *testing.T) {
	servers, _ := requireServers(t)
	const realNodeLabel, realNodeValue = "railgrid.test/runtime", "containerd"
	kwokNodes := map[string]string{"type": "kwok"}
	servers.DefaultNodeSelector = realNodeLabel + "=" + realNodeValue
	servers.MutatingAdmissionPolicies = true
	ctx := testContext(t)
	_, cfg := startAPIServer(t, ctx, servers, "10.96.0.0/16")
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	// The namespace as the chart's release creates it, without a node selector of its
	// own; and the ServiceAccounts a pod needs, which no controller-manager creates here.
	ns := naming.NamespaceEnvoyGateway
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{metav1.NamespaceDefault, ns} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: n}}
		if _, err := kube.CoreV1().ServiceAccounts(n).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := testenv.InstallEnvoyProxyPlacement(ctx, kube, kwokNodes); err != nil {
		t.Fatal(err)
	}

	// The labels Envoy Gateway v1.9.0 puts on the pods: a proxy Deployment's template
	// (EnvoyAppLabel and the owning Gateway's) and the chart's control plane.
	proxyLabels := map[string]string{
		"gateway.envoyproxy.io/owning-gateway-name":      "kcp",
		"gateway.envoyproxy.io/owning-gateway-namespace": "kcp-system",
	}
	maps.Copy(proxyLabels, testenv.EnvoyProxyLabels)
	controlPlaneLabels := map[string]string{
		"control-plane":              "envoy-gateway",
		"app.kubernetes.io/name":     "gateway-helm",
		"app.kubernetes.io/instance": "envoy-gateway",
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   map[string]string
	}{
		{"envoy-kcp-proxy", proxyLabels, kwokNodes},
		{"envoy-gateway", controlPlaneLabels, map[string]string{realNodeLabel: realNodeValue}},
	} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: ns, Labels: c.labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: testenv.PauseImageRef}}},
		}
		got, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("pod %s/%s was refused: %v", ns, c.name, err)
			continue
		}
		if !maps.Equal(got.Spec.NodeSelector, c.want) {
			t.Errorf("pod %s/%s (labels %v) has node selector %v, want %v", ns, c.name, c.labels, got.Spec.NodeSelector, c.want)
		}
	}
}
