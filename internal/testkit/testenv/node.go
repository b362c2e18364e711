package testenv

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeBinaries are the programs of a real node: kubelet and kube-proxy (tools/kube),
// containerd and its ctr client, runc, and the CNI plugins' directory (Debian's
// packages: hack/build-tools.sh node).
type NodeBinaries struct {
	Kubelet, KubeProxy, Containerd, Ctr string
	CNIPluginDir                        string
}

// FindNodeBinaries finds the node's programs on PATH (and the CNI plugins where Debian
// installs them), remembering a miss in e like Executables.Find.
func FindNodeBinaries(e *Executables) NodeBinaries {
	b := NodeBinaries{
		Kubelet:      e.Find("kubelet", ""),
		KubeProxy:    e.Find("kube-proxy", ""),
		Containerd:   e.Find("containerd", ""),
		Ctr:          e.Find("ctr", ""),
		CNIPluginDir: "/usr/lib/cni",
	}
	e.Find("runc", "")
	if _, err := os.Stat(filepath.Join(b.CNIPluginDir, "bridge")); err != nil {
		e.missing = append(e.missing, "the CNI bridge plugin is not in "+b.CNIPluginDir)
	}
	return b
}

// NodeOptions say how to start a real node.
type NodeOptions struct {
	Bins NodeBinaries
	// Dir receives containerd's and the kubelet's state, the logs and the configs.
	Dir string
	// Name is the node's name; Labels are set when it registers.
	Name   string
	Labels map[string]string
	// Network is the pod network the node serves (SetUpNodeNetwork).
	Network *NodeNetwork
	// Kubeconfig is the node's credential for the API server; ClientCAFile verifies the
	// API server's client certificate when it calls the kubelet (logs, exec).
	Kubeconfig, ClientCAFile string
	// ClusterDNS is the cluster DNS Service's ClusterIP, written into pods' resolv.conf.
	ClusterDNS string
	// SandboxImage is the pause image's name; it must be among Images.
	SandboxImage string
	// Images are image tarballs imported into containerd before the kubelet starts, so
	// no pod ever pulls (every pod's image must be one of them).
	Images []string
}

// Node is a kubelet and kube-proxy with containerd: a node that runs real containers.
type Node struct {
	Name string
	// KubeletPort is where the kubelet serves the API server, on the bridge's address.
	KubeletPort int

	opts                        NodeOptions
	containerd, proxy           *Process
	containerdArgs, kubeletArgs []string
	restarts                    int
	socket                      string

	// mu guards the kubelet as last started, which its supervisor restarts
	// (kubeletservice.go).
	mu              sync.Mutex
	kubelet         *Process
	kubeletStopping bool
	kubeletCrashes  []string
	// kubeletRestartDelay is kubeletRestartDelay but in the supervisor's own test.
	kubeletRestartDelay time.Duration
}

// importImages imports the image tarballs into containerd and unpacks them, two at a
// time: an unpack is mostly one core's decompression.
func (n *Node) importImages(t *testing.T, images []string) {
	t.Helper()
	start := time.Now()
	err := twoAtATime(len(images), func(i int) error {
		if out, err := n.ctr("images", "import", "--no-unpack=false", images[i]); err != nil {
			return fmt.Errorf("importing %s into containerd: %v\n%s", images[i], err, out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d images imported into containerd in %s", len(images), time.Since(start).Round(time.Millisecond))
}

// StartNode starts containerd, imports the images, then starts the kubelet and
// kube-proxy, and waits until the node is Ready. The caller must have checked the
// network (NodeNetwork.Check) before: the kubelet starts pods as soon as it registers.
// When the test ends, the node's pods are stopped through containerd (which tears down
// their network namespaces and mounts), then the servers, and whatever is still mounted
// under Dir is unmounted.
func StartNode(t *testing.T, ctx context.Context, kube kubernetes.Interface, opts NodeOptions) *Node {
	t.Helper()
	n := &Node{Name: opts.Name, opts: opts, kubeletRestartDelay: kubeletRestartDelay}
	dir := opts.Dir
	for _, d := range []string{"containerd/root", "containerd/state", "cni/net.d", "cni/ipam", "kubelet", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A unix socket's path has at most 104 bytes; a test's temporary directory can be longer.
	sockets, err := os.MkdirTemp("", "rgk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockets) })
	n.socket = filepath.Join(sockets, "containerd.sock")
	recordRun(func(r *runRecord) {
		r.Dirs = append(r.Dirs, dir, sockets)
		r.Sockets = append(r.Sockets, n.socket)
	})
	// One cleanup, in this order: the kubelet first (it would restart what is killed),
	// then the containers, containerd and its shims, the pods' namespaces and mounts, and
	// last the iptables chains kube-proxy and the kubelet wrote.
	t.Cleanup(func() { n.stop(t) })

	if err := n.writeContainerdConfig(); err != nil {
		t.Fatal(err)
	}
	n.containerdArgs = []string{"--config=" + filepath.Join(dir, "containerd", "config.toml")}
	if err := n.startContainerd(ctx, "containerd.log"); err != nil {
		t.Fatal(err)
	}
	n.importImages(t, opts.Images)

	ports := freePortsOn(t, opts.Network.Gateway.String(), 1)
	n.KubeletPort = ports[0]
	local := freePorts(t, 3) // kube-proxy's healthz and metrics, the kubelet's healthz
	kubeletConfig := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(kubeletConfig, []byte(n.kubeletConfig(local[2])), 0o644); err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, k := range slices.Sorted(maps.Keys(opts.Labels)) {
		labels = append(labels, k+"="+opts.Labels[k])
	}
	n.kubeletArgs = []string{
		"--config=" + kubeletConfig,
		"--kubeconfig=" + opts.Kubeconfig,
		"--root-dir=" + filepath.Join(dir, "kubelet"),
		"--cert-dir=" + filepath.Join(dir, "kubelet", "pki"),
		"--hostname-override=" + opts.Name,
		"--node-ip=" + opts.Network.Gateway.String(),
		"--node-labels=" + strings.Join(labels, ","),
		"--v=1",
	}
	if err := n.launchKubelet("kubelet.log"); err != nil {
		t.Fatal(err)
	}
	n.proxy, err = LaunchProcess("kube-proxy", opts.Bins.KubeProxy, filepath.Join(dir, "kube-proxy.log"), nil,
		"--kubeconfig="+opts.Kubeconfig,
		"--hostname-override="+opts.Name,
		"--proxy-mode=iptables",
		"--cluster-cidr="+opts.Network.PodCIDR.String(),
		"--nodeport-addresses="+netip.PrefixFrom(opts.Network.Gateway, 32).String(),
		"--healthz-bind-address="+net.JoinHostPort(Loopback, strconv.Itoa(local[0])),
		"--metrics-bind-address="+net.JoinHostPort(Loopback, strconv.Itoa(local[1])),
		// Leave the machine's conntrack settings as they are.
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--v=1",
	)
	if err != nil {
		t.Fatal(err)
	}
	// No process to watch: the kubelet's supervisor starts it again if it exits.
	if err := WaitFor(ctx, 2*time.Minute, nil, func() (bool, error) {
		node, err := kube.CoreV1().Nodes().Get(ctx, opts.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("node %s did not become Ready: %v (the kubelet's runs that exited: %v)\n%s", opts.Name, err, n.KubeletCrashes(), n.Kubelet().Tail(30))
	}
	if crashes := n.KubeletCrashes(); len(crashes) > 0 {
		t.Logf("node %s: the kubelet exited on its own and was started again, as its unit does: %v", opts.Name, crashes)
	}
	return n
}

// writeContainerdConfig keeps containerd's state and CNI files in Dir. Root on these
// machines lacks CAP_SYS_RESOURCE, so a negative oom_score_adj cannot be set:
// restrict_oom_score_adj lets pod sandboxes start anyway.
func (n *Node) writeContainerdConfig() error {
	dir := filepath.Join(n.opts.Dir, "containerd")
	cni := filepath.Join(n.opts.Dir, "cni")
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  # Pods' network namespaces in the state directory, not the machine's /var/run/netns:
  # they are this node's (unmounted with Dir at the end, swept with it after a kill),
  # and a node on another machine (RunOnOwnMachine) never sees them.
  netns_mounts_under_state_dir = true
  enable_selinux = false
  # containerd 2's defaults, which kind's nodes have: a pod's non-root user may bind
  # ports below 1024 (CoreDNS's :53) inside the pod's own network namespace.
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), n.socket, n.socket+".ttrpc",
		n.opts.SandboxImage, n.opts.Bins.CNIPluginDir, filepath.Join(cni, "net.d"))
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o644); err != nil {
		return err
	}
	net := n.opts.Network
	// The bridge exists already with the gateway address; ipMasq off: nothing is
	// masqueraded on its way out, because nothing may go out. The top of the range is
	// kept for the test's own hosts (AddTestHost).
	conflist := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "railgrid-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "isDefaultGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "gateway": %q, "rangeEnd": %q}]]
      }
    }
  ]
}
`, net.Bridge, filepath.Join(cni, "ipam"), net.PodCIDR.Masked().String(), net.Gateway.String(), net.podRangeEnd().String())
	return os.WriteFile(filepath.Join(cni, "net.d", "10-railgrid.conflist"), []byte(conflist), 0o644)
}

// kubeletConfig is the kubelet's configuration: cgroup v1 with the cgroupfs driver (no
// systemd here), its servers on the bridge's address or loopback, no image garbage
// collection (every image was imported, none can be pulled back), and pods' logs in Dir.
func (n *Node) kubeletConfig(healthz int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: %s
healthzPort: %d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
clusterDNS: [%s]
clusterDomain: cluster.local
resolvConf: %s
podCIDR: %s
podLogsDir: %s
hairpinMode: hairpin-veth
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusUpdateFrequency: 5s
`, n.opts.Network.Gateway, n.KubeletPort, Loopback, healthz, n.opts.ClientCAFile, n.socket, n.opts.ClusterDNS,
		n.opts.Network.ResolvConf, n.opts.Network.PodCIDR, filepath.Join(n.opts.Dir, "pod-logs"))
}

// RestartKubeletAndContainerd stops the kubelet and containerd and starts them again
// with the same configuration, as a node's service manager restarts them: the
// containers go on running under their shims meanwhile. It returns once containerd
// answers again and the kubelet has started; the caller waits for the pods.
func (n *Node) RestartKubeletAndContainerd(ctx context.Context) error {
	n.restarts++
	n.stopKubelet()
	n.containerd.Stop()
	if err := n.startContainerd(ctx, fmt.Sprintf("containerd.restart-%d.log", n.restarts)); err != nil {
		return err
	}
	n.mu.Lock()
	n.kubeletStopping = false
	n.mu.Unlock()
	return n.launchKubelet(fmt.Sprintf("kubelet.restart-%d.log", n.restarts))
}

// Kubelet is the kubelet's process as last started, e.g. to stop waiting when it exits.
func (n *Node) Kubelet() *Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.kubelet
}

// startContainerd starts containerd and returns once its CRI service answers. containerd
// serves its own API before the CRI plugin has recovered its state, and a kubelet started
// in between exits at once ("server is not initialized yet"), as it does on a node whose
// service manager starts it too early.
func (n *Node) startContainerd(ctx context.Context, logName string) error {
	var err error
	n.containerd, err = LaunchProcess("containerd", n.opts.Bins.Containerd, filepath.Join(n.opts.Dir, logName), nil, n.containerdArgs...)
	if err != nil {
		return err
	}
	var last error
	if err := WaitFor(ctx, time.Minute, n.containerd, func() (bool, error) {
		last = criVersion(ctx, n.socket)
		return last == nil, nil
	}); err != nil {
		return fmt.Errorf("containerd's CRI service did not answer: %v (last: %v)\n%s", err, last, n.containerd.Tail(30))
	}
	return nil
}

// criVersion calls the CRI's RuntimeService.Version on containerd's socket, as the
// kubelet does first. Its request and reply are left unparsed: an empty message is a
// valid VersionRequest, and the reply's fields are kept as unknown ones.
func criVersion(ctx context.Context, socket string) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return conn.Invoke(ctx, "/runtime.v1.RuntimeService/Version", &emptypb.Empty{}, &emptypb.Empty{})
}

// ContainerPID is the PID, on this machine, of a container's main process (its task in
// containerd), given the container's ID as the pod status reports it
// (containerd://<id>).
func (n *Node) ContainerPID(containerID string) (int, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	out, err := n.ctr("tasks", "ls")
	if err != nil {
		return 0, fmt.Errorf("ctr tasks ls: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("no task of container %s in containerd", id)
}

// Socket is containerd's socket: the shims started with it are this node's.
func (n *Node) Socket() string { return n.socket }

func (n *Node) ctr(args ...string) ([]byte, error) {
	return exec.Command(n.opts.Bins.Ctr, append([]string{"--address", n.socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
}

// RootFilesystemReadOnly reads, from the kernel's mount table of the container's process,
// whether its root filesystem is mounted read-only: what the runtime enforces, not what
// the pod spec declares. containerID is a pod status's (containerd://ID).
func (n *Node) RootFilesystemReadOnly(containerID string) (bool, error) {
	pid, err := n.ContainerPID(containerID)
	if err != nil {
		return false, err
	}
	mounts, err := readMounts(strconv.Itoa(pid))
	if err != nil {
		return false, err
	}
	for _, m := range mounts {
		if m.point == "/" {
			return slices.Contains(m.options, "ro"), nil
		}
	}
	return false, fmt.Errorf("no root mount in the mount table of process %d", pid)
}

// stop ends the node's containers, then its servers, and removes what they left.
func (n *Node) stop(t *testing.T) {
	if t.Failed() {
		for _, p := range []*Process{n.containerd, n.Kubelet(), n.proxy} {
			if p != nil {
				t.Logf("%s log (last lines):\n%s", p.Name, p.Tail(20))
			}
		}
		if crashes := n.KubeletCrashes(); len(crashes) > 0 {
			t.Logf("the kubelet's runs that exited on their own: %v", crashes)
		}
	}
	n.stopKubelet()
	if n.proxy != nil {
		n.proxy.Stop()
	}
	if n.containerd != nil {
		if out, err := n.ctr("tasks", "ls", "-q"); err == nil {
			for _, id := range strings.Fields(string(out)) {
				_, _ = n.ctr("tasks", "kill", "-s", "SIGKILL", "--all", id)
			}
		}
		n.containerd.Stop()
	}
	// The shims outlive containerd by design; ours are those started with our socket.
	n.killShims()
	for _, f := range unmountAll(mountsUnder(n.opts.Dir)) {
		t.Log(f)
	}
	if out, err := exec.Command(n.opts.Bins.KubeProxy, "--cleanup", "--proxy-mode=iptables").CombinedOutput(); err != nil {
		t.Logf("kube-proxy --cleanup: %v\n%s", err, out)
	}
	removeKubeChains(t.Logf)
}

// removeKubeChains flushes and deletes the KUBE-* chains that kube-proxy's cleanup
// leaves (the kubelet's canaries and hints) in every table.
func removeKubeChains(logf func(string, ...any)) {
	for _, table := range []string{"filter", "nat", "mangle"} {
		out, err := exec.Command("iptables", "-w", "-t", table, "-S").Output()
		if err != nil {
			continue
		}
		var chains []string
		for _, l := range ruleLines(out, "-N KUBE-") {
			chains = append(chains, strings.TrimPrefix(l, "-N "))
		}
		for _, l := range ruleLines(out, "-A ") {
			f := strings.Fields(l)
			if len(f) >= 4 && !strings.HasPrefix(f[1], "KUBE-") && f[len(f)-2] == "-j" && strings.HasPrefix(f[len(f)-1], "KUBE-") {
				_ = exec.Command("iptables", append([]string{"-w", "-t", table, "-D"}, f[1:]...)...).Run()
			}
		}
		for _, c := range chains {
			_ = exec.Command("iptables", "-w", "-t", table, "-F", c).Run()
		}
		for _, c := range chains {
			if out, err := exec.Command("iptables", "-w", "-t", table, "-X", c).CombinedOutput(); err != nil {
				logf("deleting chain %s/%s: %v %s", table, c, err, out)
			}
		}
	}
}

// killShims kills the containerd shims that serve this node's socket.
func (n *Node) killShims() {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && slices.Contains(args, n.socket) {
			killPID(pid)
		}
	}
}

// mountsUnder lists every mount point under dir, deepest first.
func mountsUnder(dir string) []string {
	mounts, err := readMounts("self")
	if err != nil {
		return nil
	}
	var points []string
	for _, m := range mounts {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			points = append(points, m.point)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	return points
}

// unmountAll unmounts the points in order, detaching each; it returns the failures.
func unmountAll(points []string) []string {
	var failed []string
	for _, p := range points {
		if err := detachMount(p); err != nil {
			failed = append(failed, fmt.Sprintf("unmounting %s: %v", p, err))
		}
	}
	return failed
}

// freePortsOn returns n distinct free TCP ports on host.
func freePortsOn(t *testing.T, host string, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatalf("finding a free port on %s: %v", host, err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// PodProblems describes the pods of ns that are not Ready, with their events.
func PodProblems(ctx context.Context, kube kubernetes.Interface, ns string) string {
	var b strings.Builder
	pods, _ := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if pods != nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			for _, cs := range p.Status.ContainerStatuses {
				fmt.Fprintf(&b, " [%s ready=%v restarts=%d waiting=%v terminated=%v]", cs.Name, cs.Ready, cs.RestartCount, cs.State.Waiting, cs.State.Terminated)
			}
			b.WriteString("\n")
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount > 0 {
					logs, err := kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, Previous: true}).DoRaw(ctx)
					fmt.Fprintf(&b, "  the last run of %s logged (%v):\n%s\n", cs.Name, err, logs)
				}
			}
		}
	}
	events, _ := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if events != nil {
		for _, e := range events.Items {
			if e.Type != corev1.EventTypeNormal {
				fmt.Fprintf(&b, "event %s %s: %s\n", e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
	return b.String()
}
