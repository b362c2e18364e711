package testenv

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NodeNetworkOptions say where a real node's pods live. Every range here stays on the
// machine: the machine's rule is that a test sends packets only to loopback and to test
// hosts in network namespaces the test made itself (pods, here), never out.
type NodeNetworkOptions struct {
	// Bridge is the name of the bridge the pods' veths join (at most 15 characters).
	Bridge string
	// PodCIDR is the node's pod range; the bridge holds its first address, which is
	// also where the API server and the kubelet serve the pods.
	PodCIDR netip.Prefix
	// ServiceCIDR is the cluster's Service range, routed to the bridge so that a
	// ClusterIP nobody serves is never sent out through the default route.
	ServiceCIDR netip.Prefix
	// Blackholes are further ranges the cluster uses without a real host behind them
	// (the simulated nodes' pods); packets to them are dropped here.
	Blackholes []netip.Prefix
}

// NodeNetwork is the pod network of a real node, set up by the test and removed when it
// ends, also when it fails.
type NodeNetwork struct {
	NodeNetworkOptions
	// Gateway is the bridge's address: the pods' default gateway, and the one address
	// of this machine that serves them.
	Gateway netip.Addr
	// ResolvConf is the resolv.conf the kubelet gives pods with dnsPolicy Default (and
	// CoreDNS forwards to): its only name server is the bridge's address, where nothing
	// answers DNS, so no query leaves the machine.
	ResolvConf string
}

// forwardChain is the mangle-table chain that keeps forwarded packets on the bridge. It
// sits in mangle, not filter, because kube-proxy inserts its own accepting rules at the
// top of filter's FORWARD chain.
const forwardChain = "RAILGRID-NODE-FWD"

// sysctls the node changes: the bridge's forwarding, the network namespace's, each put
// back when the test ends. The kernel's tunables the kubelet sets: kerneltunables.go.
var nodeSysctls = map[string]string{
	"net/ipv4/ip_forward":                 "1",
	"net/bridge/bridge-nf-call-iptables":  "1",
	"net/bridge/bridge-nf-call-ip6tables": "1",
}

// SetUpNodeNetwork creates the bridge, its routes and the forwarding rules in dir, after
// removing what an earlier, killed run may have left under the same names. Everything
// is removed when the test ends.
func SetUpNodeNetwork(t *testing.T, dir string, opts NodeNetworkOptions) *NodeNetwork {
	t.Helper()
	lockTheNode(t)
	n := &NodeNetwork{NodeNetworkOptions: opts, Gateway: opts.PodCIDR.Masked().Addr().Next()}
	n.removeLeftovers()
	release, err := holdKernelTunables()
	if err != nil {
		t.Fatalf("the kernel's tunables (%s): %v", kernelTunablesFile, err)
	}
	saved := map[string]string{}
	for _, key := range slices.Sorted(maps.Keys(nodeSysctls)) {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", key)); err == nil {
			saved[key] = strings.TrimSpace(string(v))
		}
	}
	recordRun(func(r *runRecord) { r.Network, r.Sysctls = &n.NodeNetworkOptions, saved })
	t.Cleanup(func() {
		n.removeLeftovers()
		for key, v := range saved {
			_ = os.WriteFile(filepath.Join("/proc/sys", key), []byte(v), 0o644)
		}
		release()
	})

	gw := netip.PrefixFrom(n.Gateway, opts.PodCIDR.Bits()).String()
	steps := [][]string{
		{"ip", "link", "add", opts.Bridge, "type", "bridge"},
		{"ip", "addr", "add", gw, "dev", opts.Bridge},
		{"ip", "link", "set", opts.Bridge, "up"},
		{"ip", "route", "add", opts.ServiceCIDR.Masked().String(), "dev", opts.Bridge},
	}
	for _, b := range opts.Blackholes {
		steps = append(steps, []string{"ip", "route", "add", "blackhole", b.Masked().String()})
	}
	steps = append(steps,
		[]string{"iptables", "-w", "-t", "mangle", "-N", forwardChain},
		[]string{"iptables", "-w", "-t", "mangle", "-A", forwardChain, "-i", opts.Bridge, "-o", opts.Bridge, "-j", "RETURN"},
		[]string{"iptables", "-w", "-t", "mangle", "-A", forwardChain, "-j", "DROP"},
		[]string{"iptables", "-w", "-t", "mangle", "-I", "FORWARD", "1", "-j", forwardChain},
	)
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("setting up the node network: %s: %v\n%s", strings.Join(s, " "), err, out)
		}
	}
	for key, v := range nodeSysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(v), 0o644); err != nil {
			t.Fatalf("setting %s: %v", key, err)
		}
	}
	n.ResolvConf = filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(n.ResolvConf, []byte("nameserver "+n.Gateway.String()+"\noptions ndots:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// nodeLock is the file whose lock a test holds while it has a node network: one node per
// machine at a time, because kube-proxy rewrites (and at cleanup removes) every KUBE-*
// chain of the machine, and the forwarding chain has one name. A machine of its own
// (RunOnOwnMachine) has its own chains, so its own lock.
var nodeLock = MachineScoped("/run/railgrid-kcp-node") + ".lock"

// EnvNodeLockHeldBy names the process that holds the node lock for this one: a test
// that runs other test binaries as its children, each with a node of its own, one
// after the other, holds the lock for them (LockTheNode), so that no other test takes
// the node between them. The children then share the lock file's record, as
// consecutive runs do.
const EnvNodeLockHeldBy = "RAILGRID_NODE_LOCK_HELD_BY"

// LockTheNode takes the node lock for the test, the nodes it starts one after the other
// in this process, and its children (EnvNodeLockHeldBy), sweeping what a killed run
// recorded; it returns what it swept. No other test takes the node between them.
func LockTheNode(t *testing.T) (swept []string) {
	t.Helper()
	swept = lockTheNode(t)
	currentMu.Lock()
	heldForThisProcess = true
	currentMu.Unlock()
	t.Cleanup(func() {
		currentMu.Lock()
		heldForThisProcess = false
		currentMu.Unlock()
	})
	return swept
}

// heldForThisProcess is true while a test of this process holds the node lock through
// LockTheNode: the nodes it starts then run under that lock and add to its record.
var heldForThisProcess bool

// lockTheNode waits for the node lock, sweeps what a killed run recorded in it
// (leftovers.go), and releases it when the test's other cleanups (registered after
// this) have run, emptying the record.
func lockTheNode(t *testing.T) (swept []string) {
	t.Helper()
	currentMu.Lock()
	held := heldForThisProcess
	currentMu.Unlock()
	if held {
		return nil
	}
	f, err := os.OpenFile(nodeLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("the node lock: %v", err)
	}
	if holder := os.Getenv(EnvNodeLockHeldBy); holder == strconv.Itoa(os.Getppid()) {
		t.Logf("the node lock is held for this test by its parent, process %s", holder)
	} else {
		start := time.Now()
		if err := lockFile(f); err != nil {
			f.Close()
			t.Fatalf("the node lock %s: %v", nodeLock, err)
		}
		if waited := time.Since(start); waited > time.Second {
			t.Logf("waited %s for another test's node to go (%s)", waited.Round(time.Second), nodeLock)
		}
	}
	if rec, err := readRecord(f); err != nil {
		t.Logf("the node lock holds an unreadable record (%v); nothing swept", err)
	} else if rec.PID != 0 {
		if swept = sweep(rec); len(swept) > 0 {
			t.Logf("swept what the killed run %d left on the machine:%s", rec.PID, indentLines(swept))
		}
	}
	run := &nodeRun{file: f}
	run.update(func(r *runRecord) { r.PID = os.Getpid() })
	currentMu.Lock()
	current = run
	currentMu.Unlock()
	t.Cleanup(func() {
		currentMu.Lock()
		current = nil
		currentMu.Unlock()
		run.clear()
		f.Close()
	})
	return swept
}

func indentLines(lines []string) string {
	return "\n    " + strings.Join(lines, "\n    ")
}

// removeLeftovers deletes the bridge, routes and chain of this network, ignoring what is
// not there.
func (n *NodeNetwork) removeLeftovers() {
	run := func(args ...string) { _ = exec.Command(args[0], args[1:]...).Run() }
	for exec.Command("iptables", "-w", "-t", "mangle", "-D", "FORWARD", "-j", forwardChain).Run() == nil {
	}
	run("iptables", "-w", "-t", "mangle", "-F", forwardChain)
	run("iptables", "-w", "-t", "mangle", "-X", forwardChain)
	run("ip", "route", "del", n.ServiceCIDR.Masked().String(), "dev", n.Bridge)
	for _, b := range n.Blackholes {
		run("ip", "route", "del", "blackhole", b.Masked().String())
	}
	run("ip", "link", "del", n.Bridge)
}

// Check reads back from the kernel what keeps the node's packets on the machine, and
// reports every way it does not hold:
//   - the pod and Service ranges route only to the bridge, the blackholes nowhere;
//   - the first rule of mangle FORWARD drops every forwarded packet that does not go
//     from the bridge to the bridge, and no NAT rule of the machine rewrites a packet's
//     source to leave (kube-proxy's own masquerade of marked Service traffic aside,
//     which FORWARD keeps on the bridge);
//   - the pods' resolv.conf names only the bridge's address;
//   - nothing listens on a wildcard address at any of ports (the API server's, the
//     kubelet's): they serve the pods on the bridge's address only.
func (n *NodeNetwork) Check(ports ...int) error {
	var problems []string
	routes, err := readRoutes()
	if err != nil {
		return err
	}
	for _, p := range []netip.Prefix{n.PodCIDR, n.ServiceCIDR} {
		for _, a := range []netip.Addr{p.Masked().Addr(), n.lastAddr(p)} {
			if r := routes.lookup(a); r.dev != n.Bridge || r.kind != "unicast" {
				problems = append(problems, fmt.Sprintf("%s routes to %s, not only to bridge %s", a, r, n.Bridge))
			}
		}
	}
	for _, b := range n.Blackholes {
		for _, a := range []netip.Addr{b.Masked().Addr(), n.lastAddr(b)} {
			if r := routes.lookup(a); r.kind != "blackhole" && !n.PodCIDR.Contains(a) {
				problems = append(problems, fmt.Sprintf("%s routes to %s, not to a blackhole", a, r))
			}
		}
	}
	forward, err := exec.Command("iptables", "-w", "-t", "mangle", "-S", "FORWARD").Output()
	if err != nil {
		return fmt.Errorf("reading mangle FORWARD: %v", err)
	}
	if rules := ruleLines(forward, "-A FORWARD"); len(rules) == 0 || rules[0] != "-A FORWARD -j "+forwardChain {
		problems = append(problems, fmt.Sprintf("the first rule of mangle FORWARD is not the jump to %s: %q", forwardChain, rules))
	}
	chain, err := exec.Command("iptables", "-w", "-t", "mangle", "-S", forwardChain).Output()
	if err != nil {
		return fmt.Errorf("reading %s: %v", forwardChain, err)
	}
	want := []string{"-A " + forwardChain + " -i " + n.Bridge + " -o " + n.Bridge + " -j RETURN", "-A " + forwardChain + " -j DROP"}
	if got := ruleLines(chain, "-A "+forwardChain); !slices.Equal(got, want) {
		problems = append(problems, fmt.Sprintf("%s holds %q, want %q", forwardChain, got, want))
	}
	nat, err := exec.Command("iptables", "-w", "-t", "nat", "-S").Output()
	if err != nil {
		return fmt.Errorf("reading the nat table: %v", err)
	}
	for _, r := range ruleLines(nat, "-A ") {
		if (strings.Contains(r, "-j MASQUERADE") || strings.Contains(r, "-j SNAT")) && !strings.HasPrefix(r, "-A KUBE-POSTROUTING ") {
			problems = append(problems, "a NAT rule rewrites sources: "+r)
		}
	}
	if v, _ := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables"); strings.TrimSpace(string(v)) != "1" {
		problems = append(problems, "bridged packets skip iptables (net.bridge.bridge-nf-call-iptables is not 1)")
	}
	resolv, err := os.ReadFile(n.ResolvConf)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(resolv), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" && f[1] != n.Gateway.String() {
			problems = append(problems, "the pods' resolv.conf names server "+f[1])
		}
	}
	wild, err := wildcardListeners(ports)
	if err != nil {
		return err
	}
	problems = append(problems, wild...)
	if len(problems) > 0 {
		return fmt.Errorf("the node network would let packets leave the machine:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

func (n *NodeNetwork) lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// route is one entry of the main routing table.
type route struct {
	dst  netip.Prefix
	kind string // unicast, blackhole, ...
	dev  string
	via  string
}

func (r route) String() string {
	if r.kind == "" {
		return "no route"
	}
	s := r.kind + " " + r.dst.String()
	if r.via != "" {
		s += " via " + r.via
	}
	if r.dev != "" {
		s += " dev " + r.dev
	}
	return s
}

type routeTable []route

// readRoutes reads the main table, and fails if a policy rule could send packets to
// another table first.
func readRoutes() (routeTable, error) {
	rules, err := exec.Command("ip", "rule", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip rule: %v", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(rules)), "\n") {
		if f := strings.Fields(l); len(f) > 0 && !strings.HasSuffix(l, "lookup local") && !strings.HasSuffix(l, "lookup main") && !strings.HasSuffix(l, "lookup default") {
			return nil, fmt.Errorf("a policy routing rule may bypass the main table: %s", l)
		}
	}
	out, err := exec.Command("ip", "-j", "route", "show", "table", "main").Output()
	if err != nil {
		return nil, fmt.Errorf("ip route: %v", err)
	}
	var raw []struct {
		Dst, Type, Dev, Gateway string
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, fmt.Errorf("ip -j route: %v", err)
	}
	var table routeTable
	for _, r := range raw {
		dst := r.Dst
		if dst == "default" {
			dst = "0.0.0.0/0"
		} else if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		p, err := netip.ParsePrefix(dst)
		if err != nil {
			continue
		}
		kind := r.Type
		if kind == "" {
			kind = "unicast"
		}
		table = append(table, route{dst: p, kind: kind, dev: r.Dev, via: r.Gateway})
	}
	return table, nil
}

// lookup is the longest-prefix match for a.
func (t routeTable) lookup(a netip.Addr) route {
	best := route{}
	for _, r := range t {
		if r.dst.Contains(a) && (best.kind == "" || r.dst.Bits() > best.dst.Bits()) {
			best = r
		}
	}
	return best
}

// ruleLines returns the lines of iptables -S output that start with prefix.
func ruleLines(out []byte, prefix string) []string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, prefix) {
			lines = append(lines, l)
		}
	}
	return lines
}

// wildcardListeners lists the TCP sockets listening on 0.0.0.0 or :: at any of ports.
func wildcardListeners(ports []int) ([]string, error) {
	var found []string
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(file)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 4 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			addr, portHex, ok := strings.Cut(f[1], ":")
			if !ok {
				continue
			}
			port, err := strconv.ParseUint(portHex, 16, 16)
			if err != nil || !slices.Contains(ports, int(port)) {
				continue
			}
			if b, err := hex.DecodeString(addr); err == nil && allZero(b) {
				found = append(found, fmt.Sprintf("a server listens on every address at port %d", port))
			}
		}
	}
	return found, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
