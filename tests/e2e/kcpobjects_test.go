//go:build linux

package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

// A workspace on alpha with an object in it, written and read through the front proxy
// with the hub's credential: what killed pods and a restore must not lose.

var workspaceGVR = schema.GroupVersionResource{Group: "tenancy.kcp.io", Version: "v1alpha1", Resource: "workspaces"}

// kcpObject is a ConfigMap in a workspace of the root workspace.
type kcpObject struct {
	workspace, name string
	uid             string
	data            map[string]string
}

func (o kcpObject) String() string {
	return fmt.Sprintf("ConfigMap %s in root:%s", o.name, o.workspace)
}

// kcpConfig is a client config for a logical cluster (a path such as "root" or
// "root:e2e-durable"), through the front proxy with the hub's credential.
func kcpConfig(ctx context.Context, e *env, cluster string) (*rest.Config, error) {
	cfg, err := verify.KubeconfigRESTConfig(hubSecretKubeconfig(ctx, e), frontProxyDial(e))
	if err != nil {
		return nil, err
	}
	// The hub's kubeconfig names the root workspace; the path is the cluster's.
	if i := strings.Index(cfg.Host, "/clusters/"); i >= 0 {
		cfg.Host = cfg.Host[:i]
	}
	cfg.Host += "/clusters/" + cluster
	cfg.Timeout = 20 * time.Second
	return cfg, nil
}

// hubSecretKubeconfig is the hub Secret's kubeconfig, or nil when it cannot be read.
func hubSecretKubeconfig(ctx context.Context, e *env) []byte {
	hub := e.plan.cfg.Hub
	s, err := e.c.kube.CoreV1().Secrets(hub.Namespace).Get(ctx, hub.SecretName, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return s.Data[hub.SecretKey]
}

// makeWorkspaceOnShard creates a workspace in root placed on a shard (kcp's scheduler
// matches spec.location.selector against the labels of the Shard objects; each shard
// labels its own name=<shard>) and waits until it is Ready there. It returns the
// workspace's logical cluster: a shard reached directly knows a workspace by it, not by
// its path (the front proxy resolves paths).
func makeWorkspaceOnShard(ctx context.Context, e *env, name, shard string) (string, error) {
	cfg, err := kcpConfig(ctx, e, "root")
	if err != nil {
		return "", err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	ws := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"location": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"name": shard}}}},
	}}
	if _, err := dyn.Resource(workspaceGVR).Create(ctx, ws, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating workspace root:%s: %w", name, err)
	}
	var state, cluster string
	err = testenv.WaitFor(ctx, 2*time.Minute, nil, func() (bool, error) {
		got, err := dyn.Resource(workspaceGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			state = err.Error()
			return false, nil
		}
		phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
		cluster, _, _ = unstructured.NestedString(got.Object, "spec", "cluster")
		on := got.GetAnnotations()["core.kcp.io/shard"]
		state = fmt.Sprintf("phase %q on shard %q", phase, on)
		if phase == "Ready" && on != shard {
			return false, fmt.Errorf("workspace root:%s is Ready on shard %q, not %q", name, on, shard)
		}
		return phase == "Ready", nil
	})
	if err != nil {
		return "", fmt.Errorf("workspace root:%s: %v (%s)", name, err, state)
	}
	return cluster, nil
}

// writeKcpObject writes a ConfigMap into a workspace through the front proxy.
func writeKcpObject(ctx context.Context, e *env, workspace, name string, data map[string]string) (kcpObject, error) {
	kube, err := kcpClient(ctx, e, "root:"+workspace)
	if err != nil {
		return kcpObject{}, err
	}
	// kcp makes a workspace's default namespace shortly after the workspace is Ready.
	var made *corev1.ConfigMap
	err = testenv.WaitFor(ctx, time.Minute, nil, func() (bool, error) {
		made, err = kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data,
		}, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		return kcpObject{}, fmt.Errorf("writing ConfigMap %s in root:%s: %v", name, workspace, err)
	}
	return kcpObject{workspace: workspace, name: name, uid: string(made.UID), data: data}, nil
}

// readBack reads the object through the front proxy: nil when it is there unchanged.
func (o kcpObject) readBack(ctx context.Context, e *env) error {
	kube, err := kcpClient(ctx, e, "root:"+o.workspace)
	if err != nil {
		return err
	}
	got, err := kube.CoreV1().ConfigMaps("default").Get(ctx, o.name, metav1.GetOptions{})
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", o, err)
	case string(got.UID) != o.uid:
		return fmt.Errorf("%s has uid %s, not %s: it was made again", o, got.UID, o.uid)
	case !maps.Equal(got.Data, o.data):
		return fmt.Errorf("%s holds %v, not %v", o, got.Data, o.data)
	}
	return nil
}

func kcpClient(ctx context.Context, e *env, cluster string) (kubernetes.Interface, error) {
	cfg, err := kcpConfig(ctx, e, cluster)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
