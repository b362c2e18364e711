//go:build linux

// Package node tests the real node the end-to-end test runs kcp on: kubelet, kube-proxy
// and containerd with a CNI bridge, pods from images built here, and the rule that no
// packet of theirs leaves the machine.
package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

const envSkip = "RAILGRID_SKIP_NODE"

// The node's ranges: pods on the bridge, Services routed to it, and the simulated
// nodes' pod range (none here) blackholed, as in the end-to-end test.
var (
	podCIDR     = netip.MustParsePrefix("10.244.0.0/24")
	serviceCIDR = netip.MustParsePrefix("10.96.0.0/16")
	kwokCIDR    = netip.MustParsePrefix("10.245.0.0/16")
	clusterDNS  = "10.96.0.10"
)

const (
	probeImage = "railgrid.test/probe:busybox"
)

// TestRealNodeRunsPodsWithNothingLeavingTheMachine starts a control plane on the node
// network's gateway and a real node, checks the network rules before the first pod, and
// then runs, from images built here:
//   - kubeadm's CoreDNS and a probe pod: CoreDNS becomes Ready through its real
//     readiness probe, and answers the kubernetes Service's name with its ClusterIP,
//     asked from a pod through the kube-dns Service (kube-proxy's rules) and from this
//     machine;
//   - the kind plan's etcd for the root shard, exactly as the program declares it: the
//     member becomes Ready through its real probe, and its root filesystem is mounted
//     read-only by the runtime.
func TestRealNodeRunsPodsWithNothingLeavingTheMachine(t *testing.T) {
	testenv.SkipIfShortOrDisabled(t, envSkip, "the node test starts a kubelet and containerd")
	if os.Geteuid() != 0 {
		t.Fatalf("the node test needs root (bridges, iptables, mounts); set %s=1 to skip it", envSkip)
	}
	var exe testenv.Executables
	apiserver, kcm, scheduler, etcd := exe.Find("kube-apiserver", ""), exe.Find("kube-controller-manager", ""), exe.Find("kube-scheduler", ""), exe.Find("etcd", "")
	coredns, busybox := exe.Find("coredns", ""), exe.Find("busybox", "")
	etcdImageBins := testenv.EtcdImageBinaries(t, &exe)
	nodeBins := testenv.FindNodeBinaries(&exe)
	exe.Require(t, "the node test", `eval "$(hack/build-tools.sh env kube etcd coredns node)"`, envSkip)
	dir := t.TempDir()

	// The node lock (taken here) may be held by the end-to-end test's cluster for many
	// minutes; the test's own time starts once it has the node.
	network := testenv.SetUpNodeNetwork(t, dir, testenv.NodeNetworkOptions{
		Bridge: "rgknode0", PodCIDR: podCIDR, ServiceCIDR: serviceCIDR, Blackholes: []netip.Prefix{kwokCIDR},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	checkCanFail(t, network)
	server := testenv.StartAPIServer(t, ctx, testenv.APIServerOptions{
		KubeAPIServer: apiserver, Etcd: etcd, Dir: dir, ServiceCIDR: serviceCIDR.String(), Name: "node",
		BindAddress: network.Gateway.String(),
	})
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := server.WriteKubeconfig(kubeconfig, "node"); err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(server.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartProcess(t, "kube-controller-manager", kcm, filepath.Join(dir, "kube-controller-manager.log"),
		"--kubeconfig="+kubeconfig, "--bind-address="+testenv.Loopback, "--secure-port=0", "--leader-elect=false",
		"--controllers=*,-node-ipam-controller,-node-route-controller,-cloud-node-lifecycle-controller,-service-lb-controller",
		"--service-account-private-key-file="+server.PKI.SAPrivate, "--root-ca-file="+server.PKI.CAFile,
		"--use-service-account-credentials=true")
	testenv.StartProcess(t, "kube-scheduler", scheduler, filepath.Join(dir, "kube-scheduler.log"),
		"--kubeconfig="+kubeconfig, "--bind-address="+testenv.Loopback, "--secure-port=0", "--leader-elect=false")

	images := filepath.Join(dir, "images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		t.Fatal(err)
	}
	tarballs, err := testenv.WriteImages([]testenv.Image{
		testenv.PauseImage(testenv.BuildPause(t, images)),
		testenv.CoreDNSImage(testenv.KubeadmCoreDNSImage(), coredns),
		testenv.BusyboxImage(probeImage, busybox, "sh", "nslookup", "cat"),
		testenv.EtcdImage(kindEtcdImage(t), etcdImageBins[0], etcdImageBins[1], etcdImageBins[2]),
	}, images)
	if err != nil {
		t.Fatal(err)
	}

	apiPort := server.Port()
	if err := network.Check(apiPort); err != nil {
		t.Fatalf("before the node starts: %v", err)
	}
	node := testenv.StartNode(t, ctx, kube, testenv.NodeOptions{
		Bins: nodeBins, Dir: filepath.Join(dir, "node"), Name: "real-node",
		Labels:  map[string]string{"railgrid.test/runtime": "containerd"},
		Network: network, Kubeconfig: kubeconfig, ClientCAFile: server.PKI.CAFile,
		ClusterDNS: clusterDNS, SandboxImage: testenv.PauseImageRef, Images: tarballs,
	})
	// kube-proxy has written its rules by now; the first pod is created below.
	if err := network.Check(apiPort, node.KubeletPort); err != nil {
		t.Fatalf("before the first pod: %v", err)
	}

	t.Run("coredns", func(t *testing.T) { corednsAnswersFromPods(t, ctx, kube, node, network, apiPort) })
	t.Run("etcd-of-the-kind-plan", func(t *testing.T) {
		etcdOfTheKindPlanRuns(t, ctx, server, node, filepath.Join(dir, "volumes"))
	})
}

// corednsAnswersFromPods runs kubeadm's CoreDNS with kind's Corefile and resolves the
// kubernetes Service's name from a pod and from this machine.
func corednsAnswersFromPods(t *testing.T, ctx context.Context, kube kubernetes.Interface, node *testenv.Node, network *testenv.NodeNetwork, apiPort int) {
	startCoreDNS(t, ctx, kube)
	var ready *appsv1.Deployment
	if err := testenv.WaitFor(ctx, 3*time.Minute, nil, func() (bool, error) {
		d, err := kube.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready = d
		return d.Status.ReadyReplicas == *d.Spec.Replicas, nil
	}); err != nil {
		t.Fatalf("CoreDNS did not become Ready (%d of 2 ready): %v\n%s", ready.Status.ReadyReplicas, err, testenv.PodProblems(ctx, kube, "kube-system"))
	}
	pods, err := kube.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != node.Name || !podCIDR.Contains(netip.MustParseAddr(p.Status.PodIP)) {
			t.Errorf("pod %s runs on %q at %s, want node %s in %s", p.Name, p.Spec.NodeName, p.Status.PodIP, node.Name, podCIDR)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount != 0 || !strings.HasPrefix(cs.ContainerID, "containerd://") {
				t.Errorf("pod %s container %s: %d restarts, id %s", p.Name, cs.Name, cs.RestartCount, cs.ContainerID)
			}
		}
	}

	// From a pod: the name of the kubernetes Service, through kube-dns's ClusterIP.
	logs, err := runProbe(ctx, kube, []string{"/bin/sh", "-c", "cat /etc/resolv.conf; nslookup -type=A kubernetes.default.svc.cluster.local"})
	if err != nil {
		t.Fatalf("probe pod: %v\n%s", err, logs)
	}
	if !strings.Contains(logs, "nameserver "+clusterDNS) || !strings.Contains(logs, "Address: 10.96.0.1\n") {
		t.Errorf("the probe pod did not resolve kubernetes.default through %s to 10.96.0.1:\n%s", clusterDNS, logs)
	}
	// From this machine, through kube-proxy's rules for the ClusterIP.
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "udp", net.JoinHostPort(clusterDNS, "53"))
	}}
	addrs, err := resolver.LookupHost(ctx, "kubernetes.default.svc.cluster.local")
	if err != nil || len(addrs) != 1 || addrs[0] != "10.96.0.1" {
		t.Errorf("CoreDNS at %s answered kubernetes.default with %v (%v), want 10.96.0.1", clusterDNS, addrs, err)
	}
	if err := network.Check(apiPort, node.KubeletPort); err != nil {
		t.Errorf("after the pods ran: %v", err)
	}
}

// checkCanFail breaks each rule of the node network once, and the check must name it:
// the Service range's route, the forwarding chain's jump, a masquerade rule, and a server
// on every address.
func checkCanFail(t *testing.T, network *testenv.NodeNetwork) {
	t.Helper()
	if err := network.Check(); err != nil {
		t.Fatalf("the node network as set up: %v", err)
	}
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	wildcardPort := l.Addr().(*net.TCPAddr).Port
	defer l.Close()
	cases := []struct {
		name, want  string // want: what the error must match (a regular expression)
		break_, fix []string
	}{
		// Where the range then goes is the machine's (its default route, or none on a
		// machine of its own): the check must say it no longer goes only to the bridge.
		{"service route", `10\.96\.0\.0 routes to .*, not only to bridge rgknode0`,
			[]string{"ip", "route", "del", serviceCIDR.String(), "dev", network.Bridge},
			[]string{"ip", "route", "add", serviceCIDR.String(), "dev", network.Bridge}},
		{"forward jump", regexp.QuoteMeta("the first rule of mangle FORWARD is not the jump"),
			[]string{"iptables", "-w", "-t", "mangle", "-D", "FORWARD", "-j", "RAILGRID-NODE-FWD"},
			[]string{"iptables", "-w", "-t", "mangle", "-I", "FORWARD", "1", "-j", "RAILGRID-NODE-FWD"}},
		{"masquerade", regexp.QuoteMeta("a NAT rule rewrites sources: -A POSTROUTING -s 10.244.0.0/24 -j MASQUERADE"),
			[]string{"iptables", "-w", "-t", "nat", "-A", "POSTROUTING", "-s", podCIDR.String(), "-j", "MASQUERADE"},
			[]string{"iptables", "-w", "-t", "nat", "-D", "POSTROUTING", "-s", podCIDR.String(), "-j", "MASQUERADE"}},
	}
	for _, c := range cases {
		if out, err := exec.Command(c.break_[0], c.break_[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", strings.Join(c.break_, " "), err, out)
		}
		err := network.Check()
		if out, ferr := exec.Command(c.fix[0], c.fix[1:]...).CombinedOutput(); ferr != nil {
			t.Fatalf("%s: %v %s", strings.Join(c.fix, " "), ferr, out)
		}
		if err == nil || !regexp.MustCompile(c.want).MatchString(err.Error()) {
			t.Errorf("with the %s broken, the check said %v; want %q", c.name, err, c.want)
		}
	}
	if err := network.Check(wildcardPort); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("listens on every address at port %d", wildcardPort)) {
		t.Errorf("with a server on every address, the check said %v", err)
	}
	if err := network.Check(); err != nil {
		t.Fatalf("the node network after the breaks were undone: %v", err)
	}
}

// startCoreDNS creates what kubeadm creates for CoreDNS, with kind's Corefile.
func startCoreDNS(t *testing.T, ctx context.Context, kube kubernetes.Interface) {
	t.Helper()
	if err := testenv.CreateKubeadmCoreDNS(ctx, kube, clusterDNS, mockstack.KindCorefile); err != nil {
		t.Fatal(err)
	}
}

// runProbe runs command in a probe pod in default, waits for it to end and returns its log.
func runProbe(ctx context.Context, kube kubernetes.Interface, command []string) (string, error) {
	no, yes := false, true
	user := int64(65534)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "probe", Image: probeImage, ImagePullPolicy: corev1.PullNever, Command: command,
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot: &yes, RunAsUser: &user, AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	created, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	defer kube.CoreV1().Pods("default").Delete(context.WithoutCancel(ctx), created.Name, metav1.DeleteOptions{})
	var phase corev1.PodPhase
	if err := testenv.WaitFor(ctx, 2*time.Minute, nil, func() (bool, error) {
		p, err := kube.CoreV1().Pods("default").Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	}); err != nil {
		return testenv.PodProblems(ctx, kube, "default"), err
	}
	logs, err := kube.CoreV1().Pods("default").GetLogs(created.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the probe's log through the kubelet: %w", err)
	}
	if phase != corev1.PodSucceeded {
		return string(logs), fmt.Errorf("probe pod %s", phase)
	}
	return string(logs), nil
}
