//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The operator.kcp.io resources the test reads.
var (
	rootShardGVR   = kcpGVR("rootshards")
	shardGVR       = kcpGVR("shards")
	frontProxyGVR  = kcpGVR("frontproxies")
	kubeconfigGVR  = kcpGVR("kubeconfigs")
	certificateGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	crbGVR         = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
)

func kcpGVR(resource string) schema.GroupVersionResource {
	gv := schema.FromAPIVersionAndKind(kcpapi.APIVersion, "").GroupVersion()
	return gv.WithResource(resource)
}

// shardFinalizer is the finalizer the kcp-operator puts on every Shard: on delete it
// removes the shard from the root shard's kcp API, which no simulated pod serves.
const shardFinalizer = "operator.kcp.io/cleanup-shard"

// controllers are the controllers the test runs itself rather than the stack's charts:
// only killed-up's cert-manager controller, a process with the cluster's admin
// credentials (as the chart's broad RBAC lets cert-manager do anything it needs), run
// without its own approver (approver_test.go). Every other controller (the kcp-operator,
// cert-manager and Envoy Gateway elsewhere) is the pod of its chart's Deployment, on the
// real node, installed by the stack's own Helm release.
type controllers struct {
	c           *cluster
	certManager *testenv.Process
}

// startControllers starts cert-manager's controller. With externalApprover, it runs
// without its CertificateRequest approver and the test's requestApprover approves in its
// place.
func startControllers(t *testing.T, ctx context.Context, c *cluster, bins binaries, dir string, externalApprover bool) *controllers {
	t.Helper()
	ctl := &controllers{c: c}
	// Its health endpoint has no flag; the config file keeps it on loopback.
	cmConfig := filepath.Join(dir, "cert-manager.yaml")
	if err := os.WriteFile(cmConfig, []byte("apiVersion: controller.config.cert-manager.io/v1alpha1\n"+
		"kind: ControllerConfiguration\nhealthzListenAddress: "+testenv.Loopback+":0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config=" + cmConfig,
		"--kubeconfig=" + c.kubeconfig,
		"--leader-elect=false",
		"--namespace=",
		"--cluster-resource-namespace=" + naming.NamespaceCertManager,
		"--metrics-listen-address=" + testenv.Loopback + ":0",
		"--enable-profiling=false",
		"--v=2",
	}
	if externalApprover {
		args = append(args, "--controllers=*,-certificaterequests-approver")
	}
	ctl.certManager = testenv.StartProcess(t, "cert-manager-controller", bins.certManager, filepath.Join(dir, "cert-manager.log"), args...)
	c.procs = append(c.procs, ctl.certManager)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv(envVerbose) == "1" {
			t.Logf("cert-manager-controller log (last lines):\n%s", ctl.certManager.Tail(15))
		}
	})
	return ctl
}

// addOnNamespaces are the namespaces of the controllers the stack's charts install.
var addOnNamespaces = []string{naming.NamespaceOperator, naming.NamespaceCertManager, naming.NamespaceEnvoyGateway}

// chartNamespaces are the add-ons' namespaces where the charts run pods: cert-manager's
// only when the stack installs it.
func (c *cluster) chartNamespaces() []string {
	if c.certManagerPresent {
		return slices.DeleteFunc(slices.Clone(addOnNamespaces), func(ns string) bool { return ns == naming.NamespaceCertManager })
	}
	return addOnNamespaces
}

// logAddOnPods logs the problems of the pods in the add-ons' namespaces and the last
// lines of each one's log, read through the API server and the kubelet.
func logAddOnPods(t *testing.T, c *cluster) {
	ctx := context.Background()
	for _, ns := range addOnNamespaces {
		t.Logf("pods of %s:\n%s", ns, testenv.PodProblems(ctx, c.kube, ns))
		t.Logf("logs of %s (last lines):\n%s", ns, podLogTails(ctx, c, ns, 20))
	}
}

// podLogTails returns the last lines of the log of each container of each pod in ns
// that runs on the real node, read through the API server and the kubelet.
func podLogTails(ctx context.Context, c *cluster, ns string, lines int64) string {
	pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		if p.Spec.NodeName != realNodeName {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			data, err := c.kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name, TailLines: &lines}).DoRaw(ctx)
			fmt.Fprintf(&b, "pod %s container %s (%v):\n%s\n", p.Name, ctr.Name, err, data)
		}
	}
	return b.String()
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// isAvailable reports whether a kcp object's Available condition is True (for its
// current generation, when the condition says which generation it observed).
func isAvailable(obj *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" && m["status"] == "True" {
			gen, _ := m["observedGeneration"].(int64)
			return gen == 0 || gen == obj.GetGeneration()
		}
	}
	return false
}

// imageOf returns "<repository>:<tag>" of an image spec at path.
func imageOf(obj map[string]any, path ...string) string {
	repo, _, _ := unstructured.NestedString(obj, append(path, "repository")...)
	tag, _, _ := unstructured.NestedString(obj, append(path, "tag")...)
	if repo == "" {
		repo = "ghcr.io/kcp-dev/kcp"
	}
	if tag == "" {
		tag = "operator-default" // what a missing pin would run: visible in the checks
	}
	return repo + ":" + tag
}
