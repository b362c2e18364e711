//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/planjobs"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The real node's network: the pods on the bridge, the Service range routed to it, and
// the simulated nodes' pod range (kwok's --cidr) blackholed, so an address of a
// simulated pod leads nowhere instead of out of the machine.
var (
	podCIDR  = netip.MustParsePrefix("10.244.0.0/24")
	kwokCIDR = netip.MustParsePrefix("10.245.0.0/16")
)

const (
	nodeBridge   = "rgke2e0"
	realNodeName = "real-node"
	// Every pod goes to the real node (the API server's PodNodeSelector default): the
	// program places nothing itself. Only Envoy's proxy pods, whose image cannot be built
	// here, ask for the kwok nodes' label instead (testenv.InstallEnvoyProxyPlacement).
	realNodeLabel      = "railgrid.test/runtime"
	realNodeSelector   = realNodeLabel + "=containerd"
	kwokNodeLabel      = "type"
	kwokNodeLabelValue = "kwok"
	kwokNodeSelector   = kwokNodeLabel + "=" + kwokNodeLabelValue
	// namespaceNodeSelector is the PodNodeSelector plugin's namespace annotation (the gke
	// plan's kcp objects, kcpflags_test.go, go to the kwok nodes by it).
	namespaceNodeSelector = "scheduler.alpha.kubernetes.io/node-selector"
)

// testKcpVersions are the kcp tags the images built here carry: the stack's pin and the
// version bump's. Both are the one build of ../shared/thirdparty/kcp (v0.32.0-162, the
// code that becomes v0.33), because no kcp release can be fetched here; the bump then
// rolls real pods to an image of the same content under the new name, which is what the
// upgrade order is about.
func testKcpVersions(p rendered) []string { return []string{p.cfg.Versions.Kcp, bumpedKcpVersion} }

// buildNodeImages writes, once per test run, the image of every pod the real node runs,
// under the name the pod asks for: the sandbox (pause), CoreDNS, etcd, kcp (both tags),
// the kcp-operator, cert-manager's controller, webhook, cainjector and startupapicheck,
// Envoy Gateway's control plane (which also runs its certgen Job), and the DNS probe of
// cmd/verify (a static busybox with sh and nslookup, all the probe runs, under the name
// of the image verify uses by default), and kubectl's, which copies the hub's kubeconfig.
func buildNodeImages(t *testing.T, bins binaries, dir string, p rendered) []string {
	t.Helper()
	start := time.Now()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defrag, err := testenv.EtcdDefragImage(bins.busybox)
	if err != nil {
		t.Fatal(err)
	}
	hubCopy, err := testenv.HubCopyImage(bins.kubectl)
	if err != nil {
		t.Fatal(err)
	}
	versions := testKcpVersions(p)
	kcp := testenv.KcpImage(config.KcpImageRepository+":"+versions[0], bins.kcpServers)
	for _, v := range versions[1:] {
		kcp.AlsoTagged = append(kcp.AlsoTagged, config.KcpImageRepository+":"+v)
	}
	images := []testenv.Image{
		testenv.PauseImage(testenv.BuildPause(t, dir)),
		testenv.CoreDNSImage(testenv.KubeadmCoreDNSImage(), bins.coredns),
		testenv.BusyboxImage(config.DefaultDNSCheckImage, bins.busybox, "sh", "nslookup", "cat"),
		defrag,
		hubCopy,
		testenv.EtcdImage(planEtcdImage(t, p), bins.etcdImage[0], bins.etcdImage[1], bins.etcdImage[2]),
		kcp,
		testenv.OperatorImage(config.OperatorImageRepository+":"+p.cfg.Versions.OperatorImage, bins.kcpOperator),
		testenv.EnvoyGatewayImage(p.cfg.Versions.EnvoyGateway, bins.envoyGateway),
		// The provider probe: cmd/verify's provider-path and hub-credential run it as a pod.
		testenv.ProviderProbeImage(testenv.ProviderProbeImageRef, testenv.BuildProviderProbe(t, dir)),
	}
	for _, c := range testenv.CertManagerComponents {
		images = append(images, testenv.CertManagerImage(c, p.cfg.Versions.CertManager, bins.certManagerImages[c]))
	}
	// The hub's Dex, as its chart runs it (ghcr.io/dexidp/dex at the built version).
	dexVersion, err := testenv.DexVersion(bins.dex)
	if err != nil {
		t.Fatal(err)
	}
	dex, err := testenv.DexImage(dexVersion, bins.dex, filepath.Join(testenv.ThirdpartyDir(testenv.RepoRoot(t)), "dex", "web"))
	if err != nil {
		t.Fatal(err)
	}
	images = append(images, dex)
	// The gke stack's snapshot job's gcloud image, under the plan's name (the restore step).
	jobs, err := planjobs.LoadGKE(filepath.Join(testenv.RepoRoot(t), "Pulumi.gke.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sdk, err := testenv.GcloudSDKRoot()
	if err != nil {
		t.Fatal(err)
	}
	gcloud, err := testenv.GcloudImage(jobs.GcloudImage(), sdk)
	if err != nil {
		t.Fatal(err)
	}
	images = append(images, gcloud)
	tarballs, err := testenv.WriteImages(images, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node images written in %s", time.Since(start).Round(time.Millisecond))
	return tarballs
}

// planEtcdImage is the image the plan's etcd StatefulSets run.
func planEtcdImage(t *testing.T, p rendered) string {
	for _, o := range p.objects {
		if o.Manifest["kind"] != "StatefulSet" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Manifest, "spec", "template", "spec", "containers")
		if len(containers) > 0 {
			if img, _ := containers[0].(map[string]any)["image"].(string); img != "" {
				return img
			}
		}
	}
	t.Fatal("the kind plan has no etcd StatefulSet with an image")
	return ""
}

// startRealNode starts the node on the network once the control plane serves, after the
// network's rules are checked; they are checked again once kube-proxy has written its
// rules, before the first pod.
func startRealNode(t *testing.T, ctx context.Context, c *cluster, bins binaries, server *testenv.APIServer, network *testenv.NodeNetwork, images []string) *testenv.Node {
	t.Helper()
	if err := network.Check(server.Port()); err != nil {
		t.Fatalf("before the node starts: %v", err)
	}
	node := testenv.StartNode(t, ctx, c.kube, testenv.NodeOptions{
		Bins: bins.node, Dir: filepath.Join(c.dir, "node"), Name: realNodeName,
		Labels:  map[string]string{realNodeLabel: "containerd", "topology.kubernetes.io/zone": zones[0], "topology.kubernetes.io/region": "e2e"},
		Network: network, Kubeconfig: c.kubeconfig, ClientCAFile: server.PKI.CAFile,
		ClusterDNS: clusterDNSIP(t, c), SandboxImage: testenv.PauseImageRef, Images: images,
	})
	if err := network.Check(server.Port(), node.KubeletPort); err != nil {
		t.Fatalf("before the first pod: %v", err)
	}
	return node
}

// clusterDNSIP is the kube-dns Service's ClusterIP: the tenth address of the Service
// range, as kubeadm and kind give it.
func clusterDNSIP(t *testing.T, c *cluster) string {
	prefix, err := netip.ParsePrefix(c.serviceCIDR)
	if err != nil {
		t.Fatal(err)
	}
	a := prefix.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a.String()
}

// checkPodsRanForReal checks that every pod of the namespaces the stack runs (etcd,
// kcp-system, the operator's, cert-manager's and Envoy Gateway's) and CoreDNS runs on the
// real node as containers of its runtime and is Ready, or, for a Job's pod (Envoy
// Gateway's certgen, cert-manager's startupapicheck while Helm keeps it), has succeeded
// there; that Envoy's proxy pods, and only they, run on the kwok nodes; that none
// restarted but the operator and, once, a front proxy the kubelet killed for its liveness
// probe while the root shard started; and that no kcp server logged a flag error.
func checkPodsRanForReal(t *testing.T, ctx context.Context, c *cluster) {
	t.Helper()
	seen, proxies := map[string]int{}, 0
	namespaces := append([]string{naming.NamespaceEtcd, naming.NamespaceKcp, naming.NamespaceKubeSystem}, c.chartNamespaces()...)
	for _, ns := range namespaces {
		pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if isEnvoyProxy(&p) {
				proxies++
				if !strings.HasPrefix(p.Spec.NodeName, kwokNodePrefix) {
					t.Errorf("Envoy proxy pod %s/%s runs on %q, not a kwok node (its node selector: %v)", ns, p.Name, p.Spec.NodeName, p.Spec.NodeSelector)
				}
				continue
			}
			seen[ns]++
			// A Job's pod that is still on its way (a scheduled run of the hub's copy,
			// every minute in the e2e stack) is judged once it has ended.
			if ownedByJob(&p) && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				var gone bool
				if p, gone = jobPodWhenEnded(ctx, c, p); gone {
					continue
				}
			}
			if problem := realPodProblem(&p); problem != "" {
				t.Errorf("pod %s/%s: %s", ns, p.Name, problem)
			}
			// The operator may start before its chart's CRDs are served, and exits then
			// ("no matches for kind"); the kubelet starts it again, as on any cluster.
			if ns == naming.NamespaceOperator {
				continue
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount == 0 {
					continue
				}
				// A front proxy waits for the root shard before it serves /livez, and the
				// operator gives it a liveness probe with no startup probe (15 s + 3 x 10 s):
				// when the root shard starts slowly (seen once, at load 20), the kubelet
				// kills the proxy once, and kcp-front-proxy exits 1 as its wait is cancelled.
				// That one restart passes, with the kubelet's word for it; any other restart
				// fails.
				why, previous := killedForLivenessReason(ctx, c, &p, cs.Name), previousLogTail(ctx, c, &p, cs.Name)
				refused := flagErrorLine(previous)
				proxy := runsBinary(&p, cs.Name, "/kcp-front-proxy")
				switch {
				case refused != "":
					t.Errorf("pod %s/%s: container %s restarted after refusing its flags: %s", ns, p.Name, cs.Name, refused)
				case proxy && cs.RestartCount == 1 && strings.HasPrefix(why, "killed by the kubelet for its liveness probe"):
					t.Logf("pod %s/%s: front proxy %s restarted once (last state: %s; %s); its previous run logged:\n%s", ns, p.Name, cs.Name,
						describeTerminated(cs.LastTerminationState), why, previous)
				default:
					t.Errorf("pod %s/%s: container %s restarted %d times (last state: %s; %s); its previous run logged:\n%s", ns, p.Name, cs.Name,
						cs.RestartCount, describeTerminated(cs.LastTerminationState), why, previous)
				}
			}
			if ns == naming.NamespaceKcp {
				checkKcpLog(t, ctx, c, &p)
			}
		}
	}
	for _, ns := range namespaces {
		if seen[ns] == 0 {
			t.Errorf("no pod of namespace %s on the real node", ns)
		}
	}
	if proxies == 0 {
		t.Errorf("no Envoy proxy pod in %s", naming.NamespaceEnvoyGateway)
	}
	t.Logf("pods on the real node, by namespace: %v; %d Envoy proxy pods on the kwok nodes", seen, proxies)
}

// kwokNodePrefix starts the names of the kwok nodes (prepareCluster).
const kwokNodePrefix = "e2e-node-"

// isEnvoyProxy reports whether a pod carries the labels Envoy Gateway gives its Envoy
// proxies, which the test's placement policy sends to the kwok nodes.
func isEnvoyProxy(p *corev1.Pod) bool {
	for k, v := range testenv.EnvoyProxyLabels {
		if p.Labels[k] != v {
			return false
		}
	}
	return true
}

// jobPodWhenEnded is a Job's pod once it has succeeded or failed, waiting up to its
// Job's deadline (the hub copy's, 5 minutes), or as last seen; gone when its CronJob's
// history limit deleted it meanwhile, which it does to a run that ended.
func jobPodWhenEnded(ctx context.Context, c *cluster, p corev1.Pod) (last corev1.Pod, gone bool) {
	last = p
	_ = testenv.WaitFor(ctx, 5*time.Minute, nil, func() (bool, error) {
		got, err := c.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			gone = true
			return true, nil
		case err != nil:
			return false, nil
		}
		last = *got
		return got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed, nil
	})
	return last, gone
}

// realPodProblem says what is wrong with a pod that should run on the real node: a pod
// of a Job must have succeeded there, any other must be Ready.
func realPodProblem(p *corev1.Pod) string {
	if p.Spec.NodeName != realNodeName {
		return fmt.Sprintf("runs on %q, not the real node", p.Spec.NodeName)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if !strings.HasPrefix(cs.ContainerID, "containerd://") {
			return fmt.Sprintf("container %s has id %q, not one of containerd's", cs.Name, cs.ContainerID)
		}
	}
	if ownedByJob(p) {
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Sprintf("a Job's pod in phase %s, not Succeeded", p.Status.Phase)
		}
		return ""
	}
	if addr, err := netip.ParseAddr(p.Status.PodIP); err != nil || !podCIDR.Contains(addr) {
		return fmt.Sprintf("has address %q, outside the real node's pod range %s", p.Status.PodIP, podCIDR)
	}
	ready := false
	for _, cond := range p.Status.Conditions {
		ready = ready || (cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue)
	}
	if !ready {
		return "is not Ready"
	}
	return ""
}

// runsBinary reports whether the pod's container runs binary as its command.
func runsBinary(p *corev1.Pod, container, binary string) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == container {
			return len(c.Command) > 0 && c.Command[0] == binary
		}
	}
	return false
}

func ownedByJob(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "Job" {
			return true
		}
	}
	return false
}

// killedForLivenessReason says whether the kubelet's events report that it killed the
// container for failing its liveness probe, with the failures it reported.
func killedForLivenessReason(ctx context.Context, c *cluster, p *corev1.Pod, container string) string {
	events, err := c.kube.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
	if err != nil {
		return "events: " + err.Error()
	}
	killed := false
	var failures []string
	for _, e := range events.Items {
		switch {
		case e.Reason == "Killing" && strings.Contains(e.Message, container) && strings.Contains(e.Message, "failed liveness probe"):
			killed = true
		case e.Reason == "Unhealthy" && strings.HasPrefix(e.Message, "Liveness probe failed"):
			failures = append(failures, fmt.Sprintf("%s (x%d)", e.Message, e.Count))
		}
	}
	if !killed {
		return "not killed by the kubelet for its liveness probe"
	}
	return "killed by the kubelet for its liveness probe: " + strings.Join(failures, "; ")
}

// previousLogTail is the end of the log of the container's previous run.
func previousLogTail(ctx context.Context, c *cluster, p *corev1.Pod, container string) string {
	lines := int64(15)
	data, err := c.kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, Previous: true, TailLines: &lines}).DoRaw(ctx)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

func describeTerminated(s corev1.ContainerState) string {
	if s.Terminated == nil {
		return "none"
	}
	return fmt.Sprintf("exit %d %s: %s", s.Terminated.ExitCode, s.Terminated.Reason, lastLine(s.Terminated.Message))
}

// flagErrorLine is the first line of log that is a flag refusal (flagErrorPatterns), or "".
func flagErrorLine(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if flagErrorPatterns.MatchString(line) {
			return line
		}
	}
	return ""
}

// checkKcpLog reads a kcp pod's log through the API server and the kubelet and fails on
// a flag or configuration error.
func checkKcpLog(t *testing.T, ctx context.Context, c *cluster, p *corev1.Pod) {
	t.Helper()
	for _, ctr := range p.Spec.Containers {
		data, err := c.kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name}).DoRaw(ctx)
		if err != nil {
			t.Errorf("reading the log of %s/%s %s: %v", p.Namespace, p.Name, ctr.Name, err)
			continue
		}
		if line := flagErrorLine(string(data)); line != "" {
			t.Errorf("%s/%s %s logged a flag error: %s", p.Namespace, p.Name, ctr.Name, line)
		}
	}
}
