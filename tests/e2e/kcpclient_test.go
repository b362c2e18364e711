//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The checks here talk to the running kcp as the hub does: through the front proxy's
// owned Service (reached with the API server's port-forward, as cmd/verify reaches it),
// with the kubeconfig the hub reads from its Secret.

// kcpShardNames lists the Shards registered in kcp's root workspace, read through the
// front proxy with the hub's credential.
func kcpShardNames(ctx context.Context, e *env, kubeconfig []byte) ([]string, error) {
	cfg, err := verify.KubeconfigRESTConfig(kubeconfig, frontProxyDial(e))
	if err != nil {
		return nil, err
	}
	shards, err := verify.ListKcpShards(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("listing kcp's Shards through the front proxy: %w", err)
	}
	var names []string
	for _, s := range shards {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names, nil
}

// kcpRollout says which kcp-system Deployments have not finished rolling out ("" once
// none is left). Adding or retiring a shard makes the operator roll the root shard and
// the front proxy after up returns (to mount the shard's service-account key), and kcp
// is asked only once they are done.
func kcpRollout(ctx context.Context, e *env) string {
	list, err := e.c.kube.AppsV1().Deployments(naming.NamespaceKcp).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var rolling []string
	for _, d := range list.Items {
		if !deploymentReady(d.Generation, d.Status, d.Spec.Replicas) {
			rolling = append(rolling, fmt.Sprintf("%s (generation %d, observed %d, %d updated, %d available, %d in all)",
				d.Name, d.Generation, d.Status.ObservedGeneration, d.Status.UpdatedReplicas, d.Status.AvailableReplicas, d.Status.Replicas))
		}
	}
	return strings.Join(rolling, "; ")
}

// waitForKcpShards waits until the operator's rollouts are done and the root workspace
// lists exactly want (sorted). The errors the front proxy answered on the way are logged,
// marked by whether a Deployment was still rolling: the hub sees the same.
func waitForKcpShards(t *testing.T, ctx context.Context, e *env, label string, want []string) {
	t.Helper()
	kubeconfig := hubKubeconfig(t, ctx, e)
	start := time.Now()
	deadline := start.Add(3 * time.Minute)
	var got []string
	var rolling string
	var lastErr error
	var errs []string // every error kcp answered before the right answer, with when
	for {
		rolling = kcpRollout(ctx, e)
		var err error
		got, err = kcpShardNames(ctx, e, kubeconfig)
		if err != nil {
			phase := "after the roll"
			if rolling != "" {
				phase = "while rolling"
			}
			errs = append(errs, fmt.Sprintf("%s (%s): %v", time.Since(start).Round(time.Second), phase, err))
		}
		if rolling == "" && err == nil && slices.Equal(got, want) {
			if len(errs) > 0 {
				t.Logf("%s: the front proxy answered with errors before listing the Shards:\n%s", label, indent(errs))
			}
			t.Logf("%s: kcp-system rolled out and kcp's root workspace lists the Shards %v after %s", label, got, time.Since(start).Round(time.Second))
			return
		}
		lastErr = err
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Errorf("%s: after %s kcp's root workspace lists the Shards %v (error: %v), want %v; still rolling: %q; errors:\n%s",
				label, time.Since(start).Round(time.Second), got, lastErr, want, rolling, indent(errs))
			return
		}
		time.Sleep(2 * time.Second)
	}
}
