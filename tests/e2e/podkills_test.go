//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// A pod of the stack whose main container the test kills, and how it finds it.
type podTarget struct {
	name      string // the subtest's
	what      string // for the log
	namespace string
	// labels select the pod (the workload's selector).
	labels    string
	container string
}

// killTargets are the pods a killed process must not cost anything: the root shard's
// kcp, alpha's etcd member and the front proxy.
func killTargets() []podTarget {
	return []podTarget{
		{"root-kcp", "the root shard's kcp (root-kcp)", naming.NamespaceKcp,
			naming.LabelComponent + "=rootshard," + naming.LabelInstance + "=" + naming.RootShardName, ""},
		{"etcd-alpha-0", "alpha's etcd member (etcd-alpha-0)", naming.NamespaceEtcd, "app=" + naming.EtcdName("alpha"), "etcd"},
		{"front-proxy", "the front proxy (frontproxy-front-proxy)", naming.NamespaceKcp,
			naming.LabelComponent + "=front-proxy," + naming.LabelInstance + "=" + naming.FrontProxyName, ""},
	}
}

// targetPod finds the target's one running pod and its main container (the first, or
// the one named): its status and containerd's container ID.
func targetPod(ctx context.Context, c *cluster, target podTarget) (*corev1.Pod, corev1.ContainerStatus, error) {
	pods, err := c.kube.CoreV1().Pods(target.namespace).List(ctx, metav1.ListOptions{LabelSelector: target.labels})
	if err != nil {
		return nil, corev1.ContainerStatus{}, err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		return nil, corev1.ContainerStatus{}, fmt.Errorf("%d pods match %s in %s, want 1", len(live), target.labels, target.namespace)
	}
	p := &live[0]
	name := target.container
	if name == "" {
		name = p.Spec.Containers[0].Name
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name {
			return p, s, nil
		}
	}
	return p, corev1.ContainerStatus{}, fmt.Errorf("pod %s/%s has no status of container %s", p.Namespace, p.Name, name)
}

// killContainer kills the container's main process with SIGKILL on the node, as the
// kernel's OOM killer or a crash ends it: the signal goes to the PID containerd reports
// for the container's task, on this machine (the node is this machine). The kubelet
// then sees the container exit (137) and starts it again, as its restart policy says.
func killContainer(c *cluster, s corev1.ContainerStatus) (int, error) {
	pid, err := c.node.ContainerPID(s.ContainerID)
	if err != nil {
		return 0, err
	}
	return pid, syscall.Kill(pid, syscall.SIGKILL)
}

// podReadyAfterRestart reports whether the pod is Ready with its container started
// again (a restart count above before).
func podReadyAfterRestart(p *corev1.Pod, s corev1.ContainerStatus, before int32) bool {
	if s.RestartCount <= before || s.State.Running == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// kcpServes is nil once the hub's credential works through the front proxy again and
// the object reads back unchanged.
func kcpServes(ctx context.Context, e *env, obj kcpObject) error {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if r := verify.VerifyHubCredential(cctx, hubSecretKubeconfig(ctx, e), frontProxyDial(e)); r.Status != verify.StatusPass {
		return fmt.Errorf("the hub credential: %s", r.Message)
	}
	return obj.readBack(cctx, e)
}

// recovery is how long a fault took to heal, step by step.
type recovery struct {
	podReady, served time.Duration
}

func (r recovery) String() string {
	return fmt.Sprintf("pod Ready again after %s, the hub credential and the object after %s", r.podReady.Round(100*time.Millisecond), r.served.Round(100*time.Millisecond))
}

// killAndRecover kills the target's container and waits until its pod is Ready again
// and kcp serves the object through the front proxy with the hub's credential.
func killAndRecover(t *testing.T, ctx context.Context, e *env, obj kcpObject, target podTarget) recovery {
	t.Helper()
	p, s, err := targetPod(ctx, e.c, target)
	if err != nil {
		t.Fatalf("%s: %v", target.what, err)
	}
	pid, err := killContainer(e.c, s)
	if err != nil {
		t.Fatalf("%s: killing container %s: %v", target.what, s.Name, err)
	}
	start := time.Now()
	t.Logf("%s: SIGKILL to PID %d, the main process of container %s of pod %s/%s (restarts before: %d)",
		target.what, pid, s.Name, p.Namespace, p.Name, s.RestartCount)
	var r recovery
	var last string
	if err := testenv.WaitFor(ctx, 4*time.Minute, nil, func() (bool, error) {
		np, ns, err := targetPod(ctx, e.c, target)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("restarts %d, state %s", ns.RestartCount, describeState(ns.State))
		return np.UID == p.UID && podReadyAfterRestart(np, ns, s.RestartCount), nil
	}); err != nil {
		t.Fatalf("%s: the pod is not Ready again with its container restarted: %v (%s)", target.what, err, last)
	}
	r.podReady = time.Since(start)
	if err := testenv.WaitFor(ctx, 4*time.Minute, nil, func() (bool, error) {
		err := kcpServes(ctx, e, obj)
		if err != nil {
			last = err.Error()
		}
		return err == nil, nil
	}); err != nil {
		t.Fatalf("%s: kcp does not serve again: %v (last: %s)", target.what, err, last)
	}
	r.served = time.Since(start)
	return r
}

func describeState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running since " + s.Running.StartedAt.Format(time.TimeOnly)
	case s.Waiting != nil:
		return "waiting: " + s.Waiting.Reason
	case s.Terminated != nil:
		return fmt.Sprintf("terminated: %s (exit %d)", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "unknown"
}

// notReady lists the pods of the namespaces that are not Ready (a Job's pods aside),
// for the restart of the node's runtime.
func notReady(ctx context.Context, c *cluster, namespaces ...string) []string {
	var out []string
	for _, ns := range namespaces {
		pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			out = append(out, ns+": "+err.Error())
			continue
		}
		for _, p := range pods.Items {
			// A Job's pod serves nothing to be Ready for (the hub copy runs every minute
			// in the e2e stack); checkPodsRanForReal judges those.
			if isEnvoyProxy(&p) || p.Status.Phase == corev1.PodSucceeded || ownedByJob(&p) {
				continue
			}
			ready := false
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			if !ready {
				out = append(out, ns+"/"+p.Name)
			}
		}
	}
	return out
}

// longestReadinessPeriod is the longest readiness-probe period of the containers of the
// namespaces' pods on the real node (the kubelet's default, 10 s, where a probe sets none).
func longestReadinessPeriod(ctx context.Context, c *cluster, namespaces ...string) time.Duration {
	longest := 10 * time.Second
	for _, ns := range namespaces {
		pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			for _, ctr := range p.Spec.Containers {
				if p.Spec.NodeName != realNodeName || ctr.ReadinessProbe == nil {
					continue
				}
				if d := time.Duration(ctr.ReadinessProbe.PeriodSeconds) * time.Second; d > longest {
					longest = d
				}
			}
		}
	}
	return longest
}

// restartCounts maps every container of the namespaces to its restart count.
func restartCounts(ctx context.Context, c *cluster, namespaces ...string) map[string]int32 {
	out := map[string]int32{}
	for _, ns := range namespaces {
		pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			for _, s := range p.Status.ContainerStatuses {
				out[strings.Join([]string{ns, p.Name, s.Name}, "/")] = s.RestartCount
			}
		}
	}
	return out
}

// nodeHeartbeatAfter reports whether the real node's Ready condition was reported after
// t: the kubelet started after t has registered it.
func nodeHeartbeatAfter(ctx context.Context, c *cluster, t time.Time) bool {
	n, err := c.kube.CoreV1().Nodes().Get(ctx, realNodeName, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue && cond.LastHeartbeatTime.After(t)
		}
	}
	return false
}

// runProbePod runs a pod that exits at once (the DNS probe's image) on the real node and
// waits until it has succeeded, then deletes it.
func runProbePod(ctx context.Context, c *cluster, name string) error {
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{Name: "probe", Image: config.DefaultDNSCheckImage, Command: []string{"/bin/sh", "-c", "true"}}}},
	}
	if _, err := c.kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	defer func() {
		_ = c.kube.CoreV1().Pods("default").Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	}()
	var phase corev1.PodPhase
	err := testenv.WaitFor(ctx, 2*time.Minute, nil, func() (bool, error) {
		p, err := c.kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase = p.Status.Phase
		if phase == corev1.PodFailed {
			return false, fmt.Errorf("the pod failed: %s", describeState(p.Status.ContainerStatuses[0].State))
		}
		return phase == corev1.PodSucceeded, nil
	})
	if err != nil {
		return fmt.Errorf("%v (phase %s)", err, phase)
	}
	return nil
}
