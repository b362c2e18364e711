package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestAPodNamespaceMadeBeforeIPNetnsAddCanBeRemoved mounts a network namespace in a
// directory as containerd does for a pod, runs what `ip netns add` does to the directory
// the first time (shareMountPoint), then removes the namespace as containerd does when
// the pod goes (unmount, then remove the name):
//   - when the node shared the directory before the pod (StartNode), the name is gone
//     and nothing is left mounted;
//   - when it did not, the name cannot be removed (EBUSY): ip netns add's bind copied
//     the pod's mount, containerd unmounts only the copy, and the original still holds
//     the name. This case is the control: it shows that the test tells the two apart on
//     this kernel.
func TestAPodNamespaceMadeBeforeIPNetnsAddCanBeRemoved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it mounts")
	}
	for _, c := range []struct {
		name            string
		sharedByTheNode bool
	}{{"shared-before-the-pod", true}, {"not-shared-before-the-pod", false}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			// Before the directory is removed (cleanups run in reverse): each pass
			// detaches the topmost mount of each point, and shows what was under it.
			t.Cleanup(func() {
				for pass := 0; pass < 4 && len(mountsUnder(dir)) > 0; pass++ {
					unmountAll(mountsUnder(dir))
				}
			})
			if c.sharedByTheNode {
				if err := shareMountPoint(dir); err != nil {
					t.Fatal(err)
				}
				if err := checkSharedMountPoint(dir); err != nil {
					t.Fatal(err)
				}
			} else if err := checkSharedMountPoint(dir); err == nil {
				t.Fatalf("a fresh temporary directory counts as a shared mount point")
			}
			// containerd: the pod's namespace (here the test's own) bound on a file.
			name := filepath.Join(dir, "cni-pod")
			if err := os.WriteFile(name, nil, 0o444); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mount("/proc/self/ns/net", name, "none", syscall.MS_BIND, ""); err != nil {
				t.Fatal(err)
			}
			if !isNetns(name) {
				t.Fatalf("%s is not a network namespace right after it was mounted", name)
			}
			// The first `ip netns add` on the machine.
			if err := shareMountPoint(dir); err != nil {
				t.Fatal(err)
			}
			// containerd removes the pod's namespace.
			_ = syscall.Unmount(name, syscall.MNT_DETACH)
			err := os.Remove(name)
			left := mountsUnder(name)
			switch {
			case c.sharedByTheNode && (err != nil || len(left) > 0):
				t.Errorf("removing the pod's namespace: %v; still mounted: %v", err, left)
			case !c.sharedByTheNode && !errors.Is(err, syscall.EBUSY):
				t.Errorf("removing the pod's namespace without the node's share: %v, want EBUSY (still mounted: %v)", err, left)
			}
		})
	}
}
