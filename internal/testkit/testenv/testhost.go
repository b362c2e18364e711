package testenv

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testHostAddresses is how many addresses at the top of the pod range the CNI plugin
// never hands to a pod: they are the test hosts'.
const testHostAddresses = 14

// TestHostOptions say what a test host on the pod network looks like from inside.
type TestHostOptions struct {
	// Name is the network namespace's name (`ip netns exec <Name> ...`); on a machine of
	// its own the machine's name is appended (MachineScoped): the names are the host's.
	Name string
	// Index picks the host's address among the reserved ones (0 is the highest).
	Index int
	// ResolvConf and Hosts, when set, are what programs run with `ip netns exec` read
	// as /etc/resolv.conf and /etc/hosts (ip netns exec bind-mounts /etc/netns/<Name>/).
	ResolvConf, Hosts string
}

// TestHost is a network namespace of the test's own on the pod network: a veth on the
// node's bridge with an address of the pod range the CNI plugin never hands out and the
// bridge as its default gateway, as a pod has. Programs run in it with Exec reach what a
// pod reaches (Services through kube-proxy's rules, pods on the bridge), and their
// packets stay on the machine under the node network's rules.
type TestHost struct {
	Name    string
	Address netip.Addr
}

// ClusterResolvConf is a pod's resolv.conf with ClusterFirst DNS: the cluster DNS
// Service, the namespace's search path and ndots 5, as the kubelet writes it.
func ClusterResolvConf(clusterDNS, namespace string) string {
	return fmt.Sprintf("nameserver %s\nsearch %s.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n", clusterDNS, namespace)
}

// AddTestHost creates the host; it is removed when the test ends, and swept by the next
// run if this one is killed.
func (n *NodeNetwork) AddTestHost(t *testing.T, opts TestHostOptions) *TestHost {
	t.Helper()
	if opts.Index < 0 || opts.Index >= testHostAddresses {
		t.Fatalf("test host index %d: only %d addresses are reserved", opts.Index, testHostAddresses)
	}
	opts.Name = MachineScoped(opts.Name)
	h := &TestHost{Name: opts.Name, Address: n.TestHostAddress(opts.Index)}
	removeNetns(opts.Name)
	recordRun(func(r *runRecord) { r.Netns = append(r.Netns, opts.Name) })
	t.Cleanup(func() { removeNetns(opts.Name) })

	etc := filepath.Join("/etc/netns", opts.Name)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, content := range map[string]string{"resolv.conf": opts.ResolvConf, "hosts": opts.Hosts} {
		if content == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(etc, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The host end's name is derived from the namespace's, within the 15 characters a
	// link name may have.
	hostEnd := "rgth" + fmt.Sprint(opts.Index) + shortHash(opts.Name)
	prefix := netip.PrefixFrom(h.Address, n.PodCIDR.Bits()).String()
	steps := [][]string{
		{"ip", "netns", "add", opts.Name},
		{"ip", "link", "add", hostEnd, "type", "veth", "peer", "name", "eth0", "netns", opts.Name},
		{"ip", "link", "set", hostEnd, "master", n.Bridge},
		{"ip", "link", "set", hostEnd, "up"},
		{"ip", "-n", opts.Name, "link", "set", "lo", "up"},
		{"ip", "-n", opts.Name, "addr", "add", prefix, "dev", "eth0"},
		{"ip", "-n", opts.Name, "link", "set", "eth0", "up"},
		{"ip", "-n", opts.Name, "route", "add", "default", "via", n.Gateway.String()},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("adding test host %s: %s: %v\n%s", opts.Name, strings.Join(s, " "), err, out)
		}
	}
	return h
}

// TestHostAddress is the index-th reserved address, counted down from the pod range's
// last usable one.
func (n *NodeNetwork) TestHostAddress(index int) netip.Addr {
	a := n.lastAddr(n.PodCIDR).Prev()
	for range index {
		a = a.Prev()
	}
	return a
}

// podRangeEnd is the last address the CNI plugin hands to pods.
func (n *NodeNetwork) podRangeEnd() netip.Addr {
	return n.TestHostAddress(testHostAddresses - 1).Prev()
}

// Command returns the command that runs args in the host's network namespace.
func (h *TestHost) Command(args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.Name}, args...)...)
}

// Prefix is the command prefix a person types to run a program on the pod network.
func (h *TestHost) Prefix() string { return "ip netns exec " + h.Name }

func shortHash(s string) string {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return fmt.Sprintf("%06x", h&0xffffff)
}
