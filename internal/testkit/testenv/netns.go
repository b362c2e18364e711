package testenv

import (
	"os"
	"path/filepath"
)

// netnsDir is where `ip netns` keeps named network namespaces (the test hosts').
const netnsDir = "/var/run/netns"

func netnsNames() map[string]bool {
	names := map[string]bool{}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
}

// removeNetns unmounts and removes a named network namespace, which deletes its veths.
func removeNetns(name string) {
	p := filepath.Join(netnsDir, name)
	_ = detachMount(p)
	_ = os.Remove(p)
	_ = os.RemoveAll(filepath.Join("/etc/netns", name))
}
