package conformance

import (
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/railgrid/railgrid-kcp/components"
	"github.com/railgrid/railgrid-kcp/naming"
)

// TestRemoveInterruptedHelmRecords runs the Helm record repair of the program's
// before-create and before-update hook against a real kube-apiserver. The records are
// laid out as Helm's secret storage driver writes them (helm.sh/helm/v3
// pkg/storage/driver/secrets.go: Secret sh.helm.release.v1.<release>.v<revision>, type
// helm.sh/release.v1, labels owner=helm, name, status, version); the repair reads only
// the labels. Only the pending records of the named release go: its deployed revision,
// other releases' records, and Secrets that are not Helm's stay. tests/e2e killed-up
// shows the same against records Helm itself left after a kill.
func TestRemoveInterruptedHelmRecords(t *testing.T) {
	servers, _ := requireServers(t)
	ctx := testContext(t)
	_, cfg := startAPIServer(t, ctx, servers, "10.96.0.0/16")
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	const ns = naming.NamespaceOperator
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	record := func(release string, revision int, status string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, revision),
				Labels: map[string]string{"owner": "helm", "name": release, "status": status, "version": fmt.Sprint(revision)},
			},
			Type: "helm.sh/release.v1",
			Data: map[string][]byte{"release": []byte("H4sI")},
		}
	}
	notHelms := record(naming.OperatorReleaseName, 9, "pending-install")
	notHelms.Name, notHelms.Labels["owner"] = "look-alike", "someone-else"
	for _, s := range []*corev1.Secret{
		record(naming.OperatorReleaseName, 1, "superseded"),
		record(naming.OperatorReleaseName, 2, "deployed"),
		record(naming.OperatorReleaseName, 3, "pending-upgrade"),
		record(naming.OperatorReleaseName+"-extra", 1, "pending-install"),
		record("cert-manager", 1, "pending-install"),
		notHelms,
	} {
		_, err := kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	secrets := kube.CoreV1().Secrets(ns)
	remaining := func() []string {
		list, err := secrets.List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var names []string
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		sort.Strings(names)
		return names
	}

	removed, err := components.RemoveInterruptedHelmRecords(ctx, secrets, naming.OperatorReleaseName)
	require.NoError(t, err)
	require.Equal(t, []string{"sh.helm.release.v1.kcp-operator.v3 (pending-upgrade)"}, removed, "an interrupted upgrade")
	require.Equal(t, []string{
		"look-alike",
		"sh.helm.release.v1.cert-manager.v1",
		"sh.helm.release.v1.kcp-operator-extra.v1",
		"sh.helm.release.v1.kcp-operator.v1",
		"sh.helm.release.v1.kcp-operator.v2",
	}, remaining())

	removed, err = components.RemoveInterruptedHelmRecords(ctx, secrets, naming.OperatorReleaseName)
	require.NoError(t, err)
	require.Empty(t, removed, "nothing pending is left: a second run removes nothing")

	removed, err = components.RemoveInterruptedHelmRecords(ctx, secrets, "cert-manager")
	require.NoError(t, err)
	require.Equal(t, []string{"sh.helm.release.v1.cert-manager.v1 (pending-install)"}, removed, "an interrupted install")
	require.NotContains(t, remaining(), "sh.helm.release.v1.cert-manager.v1")
	require.Contains(t, remaining(), "sh.helm.release.v1.kcp-operator-extra.v1", "another release's pending record")
}
