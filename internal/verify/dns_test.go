package verify_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

func TestSplitHorizonPassesWhenShardNamesResolveToTheirServices(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	results := f.run(t, verify.CheckSplitHorizon)
	requireAll(t, results, verify.StatusPass)
	if len(results) != 2 {
		t.Fatalf("want one result per shard (root, alpha), got %s", dump(results))
	}
	requireStatus(t, results, "kcp-root.example.com", verify.StatusPass, "resolves to 10.96.0.101, the ClusterIP of Service kcp-system/kcp-root")
	requireStatus(t, results, "kcp-alpha.example.com", verify.StatusPass, "resolves to 10.96.0.102, the ClusterIP of Service kcp-system/kcp-alpha")

	// One probe Pod, with the pinned image, resolving every shard name.
	if len(f.dns.Specs) != 1 {
		t.Fatalf("want one probe, got %d", len(f.dns.Specs))
	}
	spec := f.dns.Specs[0]
	if spec.Image != config.DefaultDNSCheckImage {
		t.Errorf("probe image %q, want the pinned %s", spec.Image, config.DefaultDNSCheckImage)
	}
	if got := strings.Join(spec.Command[4:], " "); got != "kcp-root.example.com kcp-alpha.example.com" {
		t.Errorf("probe resolves %q", got)
	}
}

// The answers reach CoreDNS some time after `up` (on kind through a ConfigMap volume the
// kubelet updates): the check asks again until they are right.
func TestSplitHorizonAsksAgainUntilTheAnswersArrive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.dns.Unanswered = 2
	results := f.run(t, verify.CheckSplitHorizon)
	requireAll(t, results, verify.StatusPass)
	if len(f.dns.Specs) != 3 {
		t.Fatalf("want three probes (two without answers, then the right ones), got %d", len(f.dns.Specs))
	}
}

func TestSplitHorizonFailsWhenAShardNameResolvesToTheEdge(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.dns.Answers["kcp-root.example.com"] = []string{verifytest.EdgeIP}
	results := f.run(t, verify.CheckSplitHorizon)
	requireFail(t, results, "kcp-root.example.com",
		"resolves to 203.0.113.10 inside the cluster, want only 10.96.0.101 (the ClusterIP of Service kcp-system/kcp-root)",
		"lose their client certificate")
	requireOthersPass(t, results, "kcp-root.example.com")
}

func TestSplitHorizonFailsWhenTheEdgeIsAnsweredToo(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.dns.Answers["kcp-alpha.example.com"] = []string{"10.96.0.102", verifytest.EdgeIP}
	results := f.run(t, verify.CheckSplitHorizon)
	requireFail(t, results, "kcp-alpha.example.com", "resolves to 10.96.0.102, 203.0.113.10 inside the cluster, want only 10.96.0.102")
	requireOthersPass(t, results, "kcp-alpha.example.com")
}

func TestSplitHorizonFailsWhenAShardNameDoesNotResolve(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	delete(f.dns.Answers, "kcp-alpha.example.com")
	results := f.run(t, verify.CheckSplitHorizon)
	requireFail(t, results, "kcp-alpha.example.com",
		"does not resolve inside the cluster (server can't find kcp-alpha.example.com: NXDOMAIN; nslookup exit status 1)")
	requireOthersPass(t, results, "kcp-alpha.example.com")
}

func TestSplitHorizonFailsWhenTheOwnedServiceHasAnotherClusterIP(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	svc, err := f.cluster.Kube.CoreV1().Services("kcp-system").Get(ctx, "kcp-alpha", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.ClusterIP = "10.96.0.150"
	if _, err := f.cluster.Kube.CoreV1().Services("kcp-system").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.cluster.Kube.CoreV1().Services("kcp-system").Delete(ctx, "kcp-root", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	results := f.run(t, verify.CheckSplitHorizon)
	requireFail(t, results, "kcp-alpha.example.com", "Service kcp-system/kcp-alpha has ClusterIP 10.96.0.150, not the configured 10.96.0.102")
	requireFail(t, results, "kcp-root.example.com", "Service kcp-system/kcp-root does not exist")
}

func TestSplitHorizonFailsWhenTheProbePodFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	empty := ""
	f.dns.Output = &empty
	f.dns.Err = errors.New("pod default/railgrid-kcp-dnscheck-x did not finish in time (phase Pending, container ImagePullBackOff)")
	results := f.run(t, verify.CheckSplitHorizon)
	for _, host := range []string{"kcp-root.example.com", "kcp-alpha.example.com"} {
		requireFail(t, results, host, "DNS probe pod failed: pod default/railgrid-kcp-dnscheck-x did not finish in time", "ImagePullBackOff")
	}
}

// The probe's output in bind's nslookup format parses as well as busybox's.
func TestSplitHorizonReadsBindNslookupOutput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out := strings.Join([]string{
		"@@@ begin kcp-root.example.com",
		"Server:\t\t10.96.0.10",
		"Address:\t10.96.0.10#53",
		"",
		"Name:\tkcp-root.example.com",
		"Address: 10.96.0.101",
		"@@@ end kcp-root.example.com rc=0",
		"@@@ begin kcp-alpha.example.com",
		"Server:    10.96.0.10",
		"Address 1: 10.96.0.10 kube-dns.kube-system.svc.cluster.local",
		"",
		"Name:      kcp-alpha.example.com",
		"Address 1: 10.96.0.102 kcp-alpha.kcp-system.svc.cluster.local",
		"@@@ end kcp-alpha.example.com rc=0",
	}, "\n")
	f.dns.Output = &out
	requireAll(t, f.run(t, verify.CheckSplitHorizon), verify.StatusPass)
}

// podTracker records the probe Pods a fake clientset sees.
type podTracker struct {
	created []*corev1.Pod
	deleted []string
}

func newPodClient(phase corev1.PodPhase, waiting string) (*kubefake.Clientset, *podTracker) {
	kube := kubefake.NewClientset()
	tr := &podTracker{}
	kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		tr.created = append(tr.created, pod.DeepCopy())
		// The kubelet's part: the Pod runs (or is stuck) right away.
		pod.Status.Phase = phase
		if waiting != "" {
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "dnscheck", State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: waiting, Message: "Back-off pulling image"},
			}}}
		}
		return false, nil, nil
	})
	kube.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr.deleted = append(tr.deleted, a.(k8stesting.DeleteAction).GetName())
		return false, nil, nil
	})
	return kube, tr
}

func requirePodGone(t *testing.T, kube *kubefake.Clientset, tr *podTracker) {
	t.Helper()
	if len(tr.created) != 1 {
		t.Fatalf("want one probe Pod, got %d", len(tr.created))
	}
	if len(tr.deleted) != 1 || tr.deleted[0] != tr.created[0].Name {
		t.Fatalf("probe Pod %s not deleted (deleted: %v)", tr.created[0].Name, tr.deleted)
	}
	pods, err := kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Fatalf("%d Pod(s) left behind", len(pods.Items))
	}
}

func TestKubePodRunnerRunsAPodAndDeletesIt(t *testing.T) {
	t.Parallel()
	kube, tr := newPodClient(corev1.PodSucceeded, "")
	runner := &verify.KubePodRunner{Client: kube, Namespace: "default", PollInterval: 5 * time.Millisecond}
	logs, err := runner.Run(context.Background(), verify.DNSProbe(config.DefaultDNSCheckImage, []string{"kcp-root.example.com"}))
	if err != nil {
		t.Fatal(err)
	}
	if logs != "fake logs" { // what client-go's fake returns for every log read
		t.Errorf("logs %q", logs)
	}
	requirePodGone(t, kube, tr)
	pod := tr.created[0]
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %s, want Never", pod.Spec.RestartPolicy)
	}
	c := pod.Spec.Containers[0]
	if c.Image != "curlimages/curl:8.10.1" || c.Command[len(c.Command)-1] != "kcp-root.example.com" {
		t.Errorf("container %s %v", c.Image, c.Command)
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Error("the probe must not mount a service account token")
	}
	if c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Error("the probe must run unprivileged")
	}
}

func TestKubePodRunnerDeletesThePodWhenItTimesOut(t *testing.T) {
	t.Parallel()
	kube, tr := newPodClient(corev1.PodPending, "ImagePullBackOff")
	runner := &verify.KubePodRunner{Client: kube, Namespace: "default", PollInterval: 5 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := runner.Run(ctx, verify.DNSProbe(config.DefaultDNSCheckImage, []string{"kcp-root.example.com"}))
	if err == nil || !strings.Contains(err.Error(), "did not finish in time (phase Pending, container ImagePullBackOff: Back-off pulling image)") {
		t.Fatalf("error %v", err)
	}
	requirePodGone(t, kube, tr)
}

func TestKubePodRunnerDeletesThePodWhenItFails(t *testing.T) {
	t.Parallel()
	kube, tr := newPodClient(corev1.PodFailed, "")
	runner := &verify.KubePodRunner{Client: kube, Namespace: "default", PollInterval: 5 * time.Millisecond}
	_, err := runner.Run(context.Background(), verify.DNSProbe(config.DefaultDNSCheckImage, []string{"kcp-root.example.com"}))
	if err == nil || !strings.Contains(err.Error(), "failed (phase Failed)") {
		t.Fatalf("error %v", err)
	}
	requirePodGone(t, kube, tr)
}

// End to end with the real runner: a probe that never finishes fails the check within
// the timeout, for that reason, and leaves no Pod behind.
func TestSplitHorizonWithAStuckPodTimesOutAndCleansUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kube, tr := newPodClient(corev1.PodPending, "ImagePullBackOff")
	f.opts.Pods = &verify.KubePodRunner{Client: kube, Namespace: "default", PollInterval: 5 * time.Millisecond}
	f.opts.Timeout = 80 * time.Millisecond
	results := f.run(t, verify.CheckSplitHorizon)
	requireFail(t, results, "kcp-root.example.com", "DNS probe pod failed", "did not finish in time", "ImagePullBackOff")
	requirePodGone(t, kube, tr)
}
