package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// PauseImageRef is the sandbox image containerd is told to use; the kubelet never pulls it.
const PauseImageRef = "registry.k8s.io/pause:3.10"

// BuildPause builds the pause command (tests/internal/pause) into dir and returns its path.
func BuildPause(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "pause")
	cmd := exec.Command("go", "build", "-o", out, "./tests/internal/pause")
	cmd.Dir = RepoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the pause command: %v\n%s", err, b)
	}
	return out
}

// PauseImage is the sandbox image: the pause command as an unprivileged user.
func PauseImage(pause string) Image {
	return Image{Ref: PauseImageRef, Files: []ImageFile{{Path: "/pause", Source: pause}},
		Entrypoint: []string{"/pause"}, User: "65535:65535"}
}

// CoreDNSImage is CoreDNS's image as its Dockerfile lays it out: the binary at /coredns,
// its entrypoint, run as a non-root user.
func CoreDNSImage(ref, coredns string) Image {
	return Image{Ref: ref, Files: []ImageFile{{Path: "/coredns", Source: coredns}},
		Entrypoint: []string{"/coredns"}, User: "65532:65532"}
}

// BusyboxImage is a probe image with a static busybox and the applets named, each a link
// in /bin (sh and nslookup are what the DNS probe runs).
func BusyboxImage(ref, busybox string, applets ...string) Image {
	files := []ImageFile{{Path: "/bin/busybox", Source: busybox}}
	for _, a := range applets {
		files = append(files, ImageFile{Path: "/bin/" + a, Symlink: "busybox"})
	}
	return Image{Ref: ref, Files: files, Env: []string{"PATH=/bin"}, User: "65534:65534"}
}

// KcpImage is kcp's image as its Dockerfile lays it out: the servers at the root
// (/kcp, /kcp-front-proxy, and /cache-server and /virtual-workspaces where built), run
// as 65532 with /kcp start by default and the admin kubeconfig's path in KUBECONFIG.
// servers maps each server's name to its binary.
func KcpImage(ref string, servers map[string]string) Image {
	img := Image{Ref: ref, Entrypoint: []string{"/kcp"}, Cmd: []string{"start"}, User: "65532:65532",
		Env: []string{"KUBECONFIG=/etc/kcp/config/admin.kubeconfig"}}
	for _, name := range []string{"kcp", "kcp-front-proxy", "cache-server", "virtual-workspaces"} {
		if bin := servers[name]; bin != "" {
			img.Files = append(img.Files, ImageFile{Path: "/" + name, Source: bin})
		}
	}
	return img
}

// OperatorImage is the kcp-operator's image as its Dockerfile lays it out: the operator
// at /manager, its entrypoint, as 65532.
func OperatorImage(ref, operator string) Image {
	return Image{Ref: ref, Files: []ImageFile{{Path: "/manager", Source: operator}},
		Entrypoint: []string{"/manager"}, User: "65532:65532"}
}

// EtcdImage is etcd's official image as the pods use it: etcd, etcdctl and etcdutl in
// /usr/local/bin (the StatefulSet gives the command).
func EtcdImage(ref, etcd, etcdctl, etcdutl string) Image {
	return Image{Ref: ref, Files: []ImageFile{
		{Path: "/usr/local/bin/etcd", Source: etcd},
		{Path: "/usr/local/bin/etcdctl", Source: etcdctl},
		{Path: "/usr/local/bin/etcdutl", Source: etcdutl},
	}, Env: []string{"PATH=/usr/local/bin"}}
}

// EtcdImageBinaries finds etcd, etcdctl and etcdutl at the etcd image's version
// (hack/build-tools.sh etcdtools, which builds them, or waits for a build under way), not
// on PATH: their etcd would shadow the API server's.
func EtcdImageBinaries(t *testing.T, e *Executables) [3]string {
	var bins [3]string
	cmd := exec.Command(filepath.Join(RepoRoot(t), "hack", "build-tools.sh"), "etcdtools")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	for i, name := range []string{"etcd", "etcdctl", "etcdutl"} {
		bins[i] = filepath.Join(dir, name)
		if _, serr := os.Stat(bins[i]); err != nil || serr != nil {
			e.Find(name+"-of-the-etcd-image (hack/build-tools.sh etcdtools)", "")
		}
	}
	return bins
}
