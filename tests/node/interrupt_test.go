//go:build linux

package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

// envHeldChild names the hold file of TestHeldNodeChild: set, that test runs a node and
// holds it; unset, it is skipped. envHeldName names the child's bridge and test host,
// so that one child's leftovers are told apart from the next one's.
const (
	envHeldChild = "RAILGRID_NODE_HELD_CHILD"
	envHeldName  = "RAILGRID_NODE_HELD_NAME"
)

// made is what a held child made outside its own process, as it tells its parent.
type made struct {
	Dirs    []string `json:"dirs"`
	Sockets []string `json:"sockets"`
	Netns   []string `json:"netns"`
	Bridge  string   `json:"bridge"`
}

// TestAHeldRunInterruptedLeavesNothingBehind runs two test binaries that each start a
// control plane, a real node with a pod, and a test host on the pod network, and hold
// them, as the end-to-end test does with RAILGRID_E2E_HOLD=1. The first is killed with
// SIGKILL, which leaves everything behind: the second's setup must sweep it (the next
// run's clean-up) before it holds. The second gets SIGTERM and must end by itself,
// having removed everything: no process, mount, network namespace, bridge or iptables
// chain of either remains.
func TestAHeldRunInterruptedLeavesNothingBehind(t *testing.T) {
	testenv.SkipIfShortOrDisabled(t, envSkip, "the node test starts a kubelet and containerd")
	if os.Geteuid() != 0 {
		t.Fatalf("the node test needs root (bridges, iptables, mounts); set %s=1 to skip it", envSkip)
	}
	if os.Getenv(envHeldChild) != "" {
		t.Skip("a held child runs TestHeldNodeChild only")
	}
	var exe testenv.Executables
	exe.Find("kube-apiserver", "")
	exe.Find("etcd", "")
	exe.Find("busybox", "")
	testenv.FindNodeBinaries(&exe)
	exe.Require(t, "the node test", `eval "$(hack/build-tools.sh env kube etcd node)"`, envSkip)

	// The parent holds the node lock for both children, so that no other test's node
	// comes between them or before the last check.
	if swept := testenv.LockTheNode(t); len(swept) > 0 {
		t.Logf("an earlier killed run's leftovers were swept first")
	}
	killed := startHeldChild(t, "kill")
	first := killed.waitHeld(t)
	killed.signal(t, syscall.SIGKILL)
	if left := first.leftovers(true); len(left) == 0 {
		t.Fatalf("the child killed with SIGKILL left nothing behind: the check below could not fail")
	} else {
		t.Logf("the child killed with SIGKILL left %d things behind, e.g. %s", len(left), left[0])
	}

	terminated := startHeldChild(t, "term")
	second := terminated.waitHeld(t)
	if left := first.leftovers(false); len(left) > 0 {
		t.Errorf("the next run's setup did not sweep what the killed run left:\n  %v", left)
	}
	start := time.Now()
	terminated.signal(t, syscall.SIGTERM)
	if err := terminated.wait(3 * time.Minute); err == nil {
		t.Errorf("the child ended with SIGTERM exited 0: its hold should fail the test")
	}
	t.Logf("the child given SIGTERM ended in %s", time.Since(start).Round(time.Second))
	if left := append(first.leftovers(true), second.leftovers(true)...); len(left) > 0 {
		t.Errorf("the child given SIGTERM left behind:\n  %v\nits log:\n%s", left, terminated.log())
	}
	if !bytesContain(terminated.log(), "SIGTERM") && !bytesContain(terminated.log(), "terminated") {
		t.Errorf("the child's log does not say it was stopped by the signal:\n%s", terminated.log())
	}
}

// TestHeldNodeChild is the held run of TestAHeldRunInterruptedLeavesNothingBehind.
func TestHeldNodeChild(t *testing.T) {
	holdFile := os.Getenv(envHeldChild)
	if holdFile == "" {
		t.Skip("run by TestAHeldRunInterruptedLeavesNothingBehind")
	}
	ctx := testenv.RunContext(t, time.Minute)
	var exe testenv.Executables
	apiserver, etcd, busybox := exe.Find("kube-apiserver", ""), exe.Find("etcd", ""), exe.Find("busybox", "")
	nodeBins := testenv.FindNodeBinaries(&exe)
	exe.Require(t, "the held node", "", envSkip)
	name := os.Getenv(envHeldName)
	bridge := "rgkh-" + name
	dir := t.TempDir()
	network := testenv.SetUpNodeNetwork(t, dir, testenv.NodeNetworkOptions{
		Bridge: bridge, PodCIDR: podCIDR, ServiceCIDR: serviceCIDR, Blackholes: []netip.Prefix{kwokCIDR},
	})
	testenv.RecordRunDir(dir)
	server := testenv.StartAPIServer(t, ctx, testenv.APIServerOptions{
		KubeAPIServer: apiserver, Etcd: etcd, Dir: dir, ServiceCIDR: serviceCIDR.String(), Name: "held",
		BindAddress: network.Gateway.String(),
	})
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := server.WriteKubeconfig(kubeconfig, "held"); err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(server.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	images := filepath.Join(dir, "images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		t.Fatal(err)
	}
	tarballs, err := testenv.WriteImages([]testenv.Image{
		testenv.PauseImage(testenv.BuildPause(t, images)),
		testenv.BusyboxImage(probeImage, busybox, "sh", "sleep"),
	}, images)
	if err != nil {
		t.Fatal(err)
	}
	if err := network.Check(server.Port()); err != nil {
		t.Fatalf("before the node starts: %v", err)
	}
	node := testenv.StartNode(t, ctx, kube, testenv.NodeOptions{
		Bins: nodeBins, Dir: filepath.Join(dir, "node"), Name: "held-node",
		Network: network, Kubeconfig: kubeconfig, ClientCAFile: server.PKI.CAFile,
		ClusterDNS: clusterDNS, SandboxImage: testenv.PauseImageRef, Images: tarballs,
	})
	if err := network.Check(server.Port(), node.KubeletPort); err != nil {
		t.Fatalf("before the first pod: %v", err)
	}
	host := network.AddTestHost(t, testenv.TestHostOptions{Name: "rgk-held-" + name, ResolvConf: testenv.ClusterResolvConf(clusterDNS, "default")})
	runSleeper(t, ctx, kube)

	report, err := json.Marshal(made{
		Dirs: []string{dir, filepath.Dir(node.Socket())}, Sockets: []string{node.Socket()},
		Netns: []string{host.Name}, Bridge: bridge,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.Hold(ctx, holdFile, report); err != nil {
		t.Fatalf("the hold ended: %v", err)
	}
}

// runSleeper runs a pod that sleeps, on the node, and waits until it runs.
func runSleeper(t *testing.T, ctx context.Context, kube kubernetes.Interface) {
	t.Helper()
	// No controller manager runs: the default ServiceAccount is made here.
	if _, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: "held-node", AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{Name: "sleep", Image: probeImage, Command: []string{"/bin/sleep", "3600"}}},
		},
	}
	if _, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testenv.WaitFor(ctx, 2*time.Minute, nil, func() (bool, error) {
		p, err := kube.CoreV1().Pods("default").Get(ctx, "sleeper", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		t.Fatalf("the sleeper pod did not run: %v", err)
	}
}

// heldChild is a test binary running TestHeldNodeChild.
type heldChild struct {
	cmd      *exec.Cmd
	holdFile string
	logFile  string
	done     chan error
}

func startHeldChild(t *testing.T, name string) *heldChild {
	t.Helper()
	dir := t.TempDir()
	c := &heldChild{holdFile: filepath.Join(dir, "hold.json"), logFile: filepath.Join(dir, name+".log"), done: make(chan error, 1)}
	out, err := os.Create(c.logFile)
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestHeldNodeChild$", "-test.v", "-test.timeout=20m")
	c.cmd.Env = append(os.Environ(), envHeldChild+"="+c.holdFile, envHeldName+"="+name, testenv.EnvNodeLockHeldBy+"="+strconv.Itoa(os.Getpid()))
	c.cmd.Stdout, c.cmd.Stderr = out, out
	// A group of its own: the signals below go to the test binary alone, as a person's
	// kill does.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait(); out.Close() }()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			_ = c.wait(3 * time.Minute)
		}
	})
	return c
}

// waitHeld waits until the child holds (it may first wait for the node lock, which the
// end-to-end test holds for many minutes) and returns what it made.
func (c *heldChild) waitHeld(t *testing.T) made {
	t.Helper()
	for {
		if data, err := os.ReadFile(c.holdFile); err == nil && len(data) > 0 {
			var m made
			if err := json.Unmarshal(data, &m); err == nil {
				return m
			}
		}
		select {
		case err := <-c.done:
			c.done <- err
			t.Fatalf("the held child ended before it held (%v):\n%s", err, c.log())
		case <-time.After(time.Second):
		}
	}
}

func (c *heldChild) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if sig == syscall.SIGKILL {
		_ = c.wait(time.Minute)
	}
}

func (c *heldChild) wait(timeout time.Duration) error {
	select {
	case err := <-c.done:
		c.done <- err
		return err
	case <-time.After(timeout):
		_ = c.cmd.Process.Kill()
		return errors.New("the child did not exit in time; killed")
	}
}

func (c *heldChild) log() []byte {
	data, _ := os.ReadFile(c.logFile)
	return data
}

// leftovers lists what of m is still on the machine; nodeChains as testenv.Leftovers.
func (m made) leftovers(nodeChains bool) []string {
	return testenv.Leftovers(m.Dirs, m.Sockets, m.Netns, m.Bridge, nodeChains)
}

func bytesContain(b []byte, s string) bool { return strings.Contains(string(b), s) }
