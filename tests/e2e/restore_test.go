//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/railgrid/railgrid-kcp/internal/testkit/planjobs"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The disaster-recovery step follows docs/operations.md, "Restoring etcd from a
// snapshot", with the kubectl commands it gives: the gke stack's snapshot job against
// the kind stack's root-shard etcd, with fake-gcs-server on the machine as the bucket
// (reached by pods on the node bridge's address), then the member and its volume lost,
// then cmd/etcdrestore's Jobs.

// restoreWorkspace holds the restore's objects, on the root shard: the shard restored.
const restoreWorkspace = "e2e-restore"

// gcsEmulator starts fake-gcs-server on the node bridge's address, where pods reach it,
// and checks the node network's rules again with its port.
func gcsEmulator(t *testing.T, c *cluster, bin string) *testenv.GCSEmulator {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(c.network.Gateway.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	gcs, err := testenv.StartGCSEmulator(bin, c.network.Gateway.String(), port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gcs.Stop)
	if err := c.network.Check(c.apiPort, c.node.KubeletPort, port); err != nil {
		t.Fatalf("with the bucket's emulator on the bridge: %v", err)
	}
	return gcs
}

// runJob creates a Job and waits until it completes; a failed Job fails with its pods'
// logs.
func runJob(ctx context.Context, c *cluster, kubectlBin, manifest string) error {
	cmd := exec.CommandContext(ctx, kubectlBin, "--kubeconfig", c.kubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply: %v\n%s", err, out)
	}
	return nil
}

// waitJobs waits for every Job with the label to complete (kubectl wait, as the
// runbook says), and returns their logs when they do not.
func waitJobs(ctx context.Context, e *env, kubectlBin, selector string, timeout time.Duration) error {
	_, err := kubectl(ctx, kubectlBin, e.c.kubeconfig, "-n", naming.NamespaceEtcd, "wait", "--for=condition=complete",
		"--timeout="+timeout.String(), "job", "-l", selector)
	if err != nil {
		logs, _ := kubectl(ctx, kubectlBin, e.c.kubeconfig, "-n", naming.NamespaceEtcd, "logs", "-l", selector, "--all-containers", "--prefix", "--tail=40")
		return fmt.Errorf("%v\nthe Jobs' logs:\n%s", err, logs)
	}
	return nil
}

// workspacePhase is a workspace of root's phase, read through the front proxy.
func workspacePhase(ctx context.Context, e *env, name string) (string, error) {
	cfg, err := kcpConfig(ctx, e, "root")
	if err != nil {
		return "", err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	ws, err := dyn.Resource(workspaceGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	phase, _, _ := unstructured.NestedString(ws.Object, "status", "phase")
	return phase, nil
}

// goneFromKcp is nil once the object is not found in its workspace.
func goneFromKcp(ctx context.Context, e *env, o kcpObject) error {
	kube, err := kcpClient(ctx, e, "root:"+o.workspace)
	if err != nil {
		return err
	}
	got, err := kube.CoreV1().ConfigMaps("default").Get(ctx, o.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%s is still there (uid %s)", o, got.UID)
}

// claimUID is the UID of an etcd member's claim, "" when there is none.
func claimUID(ctx context.Context, c *cluster, name string) string {
	pvc, err := c.kube.CoreV1().PersistentVolumeClaims(naming.NamespaceEtcd).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return string(pvc.UID)
}

// snapshotJobManifest renders the gke plan's snapshot job for the root shard as a Job
// for this cluster: the plan's containers, scripts and images, with the emulator's
// environment for gcloud and the namespace's default ServiceAccount (the gke stack's,
// bound to a Google account, exists only there).
func snapshotJobManifest(p *planjobs.Plan, gcsURL string) (manifest, bucket string, err error) {
	job, err := p.SnapshotJob(naming.RootShardName, planjobs.Options{Name: "e2e-snapshot-root",
		Env: testenv.GCSEmulatorEnv(gcsURL), ServiceAccount: "default"})
	if err != nil {
		return "", "", err
	}
	job.Labels = map[string]string{"railgrid.io/e2e": "snapshot"}
	job.APIVersion, job.Kind = "batch/v1", "Job"
	data, err := yaml.Marshal(job)
	return string(data), planjobs.Bucket(job), err
}
