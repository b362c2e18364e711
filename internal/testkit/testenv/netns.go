package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// netnsDir is where `ip netns` and containerd keep named network namespaces.
const netnsDir = "/var/run/netns"

// shareMountPoint makes dir a shared mount point, binding it over itself first if it is
// not a mount point yet: what `ip netns add` does to netnsDir the first time it runs on a
// machine.
//
// The node does it before containerd mounts any pod's namespace in netnsDir. Otherwise
// the first `ip netns add` (a test host's) binds netnsDir over itself after the first
// pods' namespaces were mounted there. The bind copies their mounts, and when such a pod
// goes, containerd unmounts only the copy on top: the original still holds the name, so
// removing it fails (EBUSY) and the sandbox is never torn down. After a runtime restart
// containerd fails every status call for it, and the pod stays not Ready for good: on a
// fresh machine, kubeadm's first CoreDNS pods, replaced when the first up patched their
// Deployment, failed tests/e2e's kubelet-and-containerd-restart so.
func shareMountPoint(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for bound := false; ; bound = true {
		err := syscall.Mount("", dir, "none", syscall.MS_SHARED|syscall.MS_REC, "")
		if err == nil {
			return nil
		}
		if err != syscall.EINVAL || bound {
			return fmt.Errorf("making %s a shared mount: %w", dir, err)
		}
		// Not a mount point yet: bind it over itself.
		if err := syscall.Mount(dir, dir, "none", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("binding %s over itself: %w", dir, err)
		}
	}
}

// checkSharedMountPoint reads the kernel's mount table: dir's topmost mount must be its
// own mount point, with shared propagation.
func checkSharedMountPoint(dir string) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	mounts, err := readMounts("self")
	if err != nil {
		return err
	}
	// The kernel lists a mount after the one it covers: the last at dir is the top.
	var top *mount
	for i := range mounts {
		if mounts[i].point == real {
			top = &mounts[i]
		}
	}
	if top == nil {
		return fmt.Errorf("%s is not a mount point", dir)
	}
	if !slices.ContainsFunc(top.propagation, func(p string) bool { return strings.HasPrefix(p, "shared:") }) {
		return fmt.Errorf("%s is a mount point, but not a shared one (propagation %v)", dir, top.propagation)
	}
	return nil
}

// isNetns reports whether path is a network namespace's mount (nsfs), not a plain file.
func isNetns(path string) bool {
	const nsfsMagic = 0x6e736673
	var st syscall.Statfs_t
	return syscall.Statfs(path, &st) == nil && st.Type == nsfsMagic
}

func netnsNames() map[string]bool {
	names := map[string]bool{}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
}

// netnsInUse reports whether a process is in the named network namespace.
func netnsInUse(name string) bool {
	var st syscall.Stat_t
	if syscall.Stat(filepath.Join(netnsDir, name), &st) != nil {
		return false
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		var ns syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &ns) == nil && ns.Ino == st.Ino && ns.Dev == st.Dev {
			return true
		}
	}
	return false
}

// removeNetns unmounts and removes a named network namespace, which deletes its veths.
func removeNetns(name string) {
	p := filepath.Join(netnsDir, name)
	_ = syscall.Unmount(p, syscall.MNT_DETACH)
	_ = os.Remove(p)
	_ = os.RemoveAll(filepath.Join("/etc/netns", name))
}
