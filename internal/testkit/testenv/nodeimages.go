package testenv

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/railgrid/railgrid-kcp/config"
)

// PauseImageRef is the sandbox image containerd is told to use; the kubelet never pulls it.
const PauseImageRef = "registry.k8s.io/pause:3.10"

// BuildPause builds the pause command (internal/testkit/pause) into dir and returns its path.
func BuildPause(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "pause")
	cmd := exec.Command("go", "build", "-o", out, "./internal/testkit/pause")
	cmd.Dir = RepoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the pause command: %v\n%s", err, b)
	}
	return out
}

// ProviderProbeImageRef is the provider probe's image as the tests name it; no registry
// serves it, the node imports it.
const ProviderProbeImageRef = "localhost/railgrid-kcp/provider-probe:test"

// BuildProviderProbe builds cmd/provider-probe into dir as a static binary (no cgo, so
// it needs no C library in its image) and returns its path.
func BuildProviderProbe(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "provider-probe")
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", out, "./cmd/provider-probe")
	cmd.Dir = RepoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the provider probe: %v\n%s", err, b)
	}
	return out
}

// ProviderProbeImage is the provider probe's image as a user builds it from the
// product's source: the static binary at /provider-probe, its entrypoint, on the
// distroless nonroot layout (user 65532, /home/nonroot, /tmp), nothing else: no shell,
// no CA certificates (the probe trusts only the CA file it is given, or with -trust
// system the system's roots, which this image leaves empty).
func ProviderProbeImage(ref, probe string) Image {
	return distrolessNonroot(Image{Ref: ref, Files: []ImageFile{{Path: "/provider-probe", Source: probe}},
		Entrypoint: []string{"/provider-probe"}, User: "65532:65532"})
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

// EtcdDefragImage is the etcd defragmentation's image (config.EtcdDefragImage) made of
// busybox, with the applets its script runs. busybox must be the version the image's tag
// pins (Debian's busybox-static is), or the test would prove another busybox.
func EtcdDefragImage(busybox string) (Image, error) {
	tag := config.EtcdDefragImage[strings.LastIndex(config.EtcdDefragImage, ":")+1:]
	out, _ := exec.Command(busybox).CombinedOutput()
	if want := "BusyBox v" + strings.SplitN(tag, "-", 2)[0] + " "; !strings.HasPrefix(string(out), want) {
		return Image{}, fmt.Errorf("%s is not %s... (the version %s pins): %.60s", busybox, want, config.EtcdDefragImage, out)
	}
	return BusyboxImage(config.EtcdDefragImage, busybox, "sh", "wget", "timeout", "sed", "grep", "sleep", "printf"), nil
}

// HubCopyImage is the hub copy's image (config.HubCopyImage) as Kubernetes builds it
// (build/server-image/kubectl): kubectl at /bin/kubectl, its entrypoint, and nothing a
// copy uses besides. kubectl must be the version the image's tag pins.
func HubCopyImage(kubectl string) (Image, error) {
	tag := config.HubCopyImage[strings.LastIndex(config.HubCopyImage, ":")+1:]
	out, err := exec.Command(kubectl, "version", "--client", "-o", "json").Output()
	var v struct {
		ClientVersion struct {
			GitVersion string `json:"gitVersion"`
		} `json:"clientVersion"`
	}
	if err != nil || json.Unmarshal(out, &v) != nil || v.ClientVersion.GitVersion != tag {
		return Image{}, fmt.Errorf("%s is not kubectl %s (the version %s pins): %v %.80s", kubectl, tag, config.HubCopyImage, err, out)
	}
	return Image{Ref: config.HubCopyImage, Files: []ImageFile{{Path: "/bin/kubectl", Source: kubectl}},
		Entrypoint: []string{"/bin/kubectl"}}, nil
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

// The add-ons' images as their charts name them by default: cert-manager's values.yaml
// (imageRegistry quay.io, imageNamespace jetstack, <component>.image.name
// cert-manager-<component>, the tag the chart's appVersion, which cert-manager's release
// sets to the release's tag) and Envoy Gateway's values.tmpl.yaml as its release fills it
// in (tools/make/helm.mk: GatewayImage=$(IMAGE):$(TAG), IMAGE docker.io/envoyproxy/gateway).
const (
	CertManagerImageRepositoryPrefix = "quay.io/jetstack/cert-manager-"
	EnvoyGatewayImageRepository      = "docker.io/envoyproxy/gateway"
)

// CertManagerComponent is one of cert-manager's binaries, each with its image.
type CertManagerComponent string

// The components whose pods cert-manager's chart runs by default: three Deployments and
// the startupapicheck Job (a post-install hook).
const (
	CertManagerController      CertManagerComponent = "controller"
	CertManagerWebhook         CertManagerComponent = "webhook"
	CertManagerCAInjector      CertManagerComponent = "cainjector"
	CertManagerStartupAPICheck CertManagerComponent = "startupapicheck"
)

// CertManagerComponents are the components in the order the chart lists them.
var CertManagerComponents = []CertManagerComponent{CertManagerController, CertManagerWebhook, CertManagerCAInjector, CertManagerStartupAPICheck}

// Binary is the component's executable as hack/build-tools.sh names it, for example
// cert-manager-webhook.
func (c CertManagerComponent) Binary() string { return "cert-manager-" + string(c) }

// CertManagerImageRef is the component's image as cert-manager's chart at version names
// it by default, for example quay.io/jetstack/cert-manager-webhook:v1.20.2.
func CertManagerImageRef(c CertManagerComponent, version string) string {
	return CertManagerImageRepositoryPrefix + string(c) + ":" + version
}

// EnvoyGatewayImageRef is Envoy Gateway's control-plane image as its chart at version
// names it by default, for example docker.io/envoyproxy/gateway:v1.9.0.
func EnvoyGatewayImageRef(version string) string { return EnvoyGatewayImageRepository + ":" + version }

// distrolessNonroot puts img on what the upstream images inherit from distroless's
// nonroot bases (static-debian12:nonroot for cert-manager, base-nossl:nonroot for Envoy
// Gateway; static/static.bzl in GoogleContainerTools/distroless): the user 65532, its home
// /home/nonroot (0700, its own) as the working directory, /tmp (1777) and the base's
// PATH. The base's CA certificates, time zones and /etc/passwd are left out: nothing
// these pods do here reads them.
func distrolessNonroot(img Image) Image {
	const nonroot = 65532
	img.Files = append(img.Files,
		ImageFile{Path: "/home/nonroot", Dir: true, Mode: 0o700, UID: nonroot, GID: nonroot},
		ImageFile{Path: "/tmp", Dir: true, Mode: 0o1777},
	)
	if img.User == "" {
		img.User = "65532"
	}
	img.WorkingDir = "/home/nonroot"
	img.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, img.Env...)
	return img
}

// CertManagerImage is the component's image at version as cert-manager's release builds it
// (hack/containers/Containerfile.<component>, on distroless static-debian12:nonroot): the
// binary at /app/cmd/<component>/<component> (startupapicheck's at /startupapicheck), its
// entrypoint, run as the base's user 65532. binary is the executable built here
// (hack/build-tools.sh cert-manager, named c.Binary()).
func CertManagerImage(c CertManagerComponent, version, binary string) Image {
	path := "/app/cmd/" + string(c) + "/" + string(c)
	if c == CertManagerStartupAPICheck {
		path = "/startupapicheck"
	}
	return distrolessNonroot(Image{Ref: CertManagerImageRef(c, version),
		Files: []ImageFile{{Path: path, Source: binary}}, Entrypoint: []string{path}})
}

// EnvoyGatewayImage is Envoy Gateway's control-plane image at version as its Dockerfile
// lays it out (tools/docker/envoy-gateway/Dockerfile, on distroless base-nossl:nonroot):
// the binary at /usr/local/bin/envoy-gateway, its entrypoint, the data directory
// /var/lib/eg writable by all (0777), run as 65532:65532. binary is the envoy-gateway
// executable built here (hack/build-tools.sh envoy-gateway).
func EnvoyGatewayImage(version, binary string) Image {
	const path = "/usr/local/bin/envoy-gateway"
	return distrolessNonroot(Image{
		Ref:        EnvoyGatewayImageRef(version),
		Files:      []ImageFile{{Path: path, Source: binary}, {Path: "/var/lib/eg", Dir: true, Mode: 0o777}},
		Entrypoint: []string{path},
		User:       "65532:65532",
	})
}

// DexImageRepository is where Dex's release images live, and the repository Dex's Helm
// chart runs by default (its values.yaml: image.repository; the tag is the chart's
// appVersion with a "v").
const DexImageRepository = "ghcr.io/dexidp/dex"

// DexImageRef is Dex's release image at version, for example ghcr.io/dexidp/dex:v2.45.1.
func DexImageRef(version string) string { return DexImageRepository + ":" + version }

// dexUID is the user and group Dex's Dockerfile adds (adduser -u 1001 ... dex) and runs as.
const dexUID = 1001

// DexImage is Dex's image at version as its Dockerfile lays it out on its default
// (alpine) base: the binary at /usr/local/bin/dex, the web templates, themes and static
// files of the source tree at /srv/dex/web, /etc/dex and /var/dex owned by the user dex
// (1001:1001, in /etc/passwd and /etc/group), run as dex:dex. dex is the executable built
// here (hack/build-tools.sh dex); web is the source tree's web directory.
//
// It differs from the release image in one way a pod sees: no entrypoint. The release's
// entrypoint, docker-entrypoint, renders every .yaml argument through gomplate (a binary
// its Dockerfile downloads, which cannot be had here) and then execs the rest unchanged.
// Without it, the arguments Dex's chart gives (dex serve ... /etc/dex/config.yaml) run
// dex itself, through PATH, and so does the default command: a configuration that needs
// gomplate's templating does not work here, one that is plain YAML works as with the
// release. Left out as well, because nothing Dex does here reads them: the CA bundle, the
// example configuration config.docker.yaml, gomplate, and the go.mod copies kept for
// scanners.
func DexImage(version, dex, web string) (Image, error) {
	img := Image{
		Ref: DexImageRef(version),
		Files: []ImageFile{
			{Path: "/usr/local/bin/dex", Source: dex},
			{Path: "/etc/passwd", Mode: 0o644, Content: []byte("root:x:0:0:root:/root:/bin/sh\ndex:x:1001:1001::/home/dex:/sbin/nologin\n")},
			{Path: "/etc/group", Mode: 0o644, Content: []byte("root:x:0:root\ndex:x:1001:dex\n")},
			{Path: "/etc/dex", Dir: true, UID: dexUID, GID: dexUID},
			{Path: "/var/dex", Dir: true, UID: dexUID, GID: dexUID},
			{Path: "/tmp", Dir: true, Mode: 0o1777},
		},
		Cmd:  []string{"dex", "serve", "/etc/dex/config.yaml"},
		User: "dex:dex",
		// Alpine's PATH, through which the command's "dex" is found.
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	}
	err := filepath.WalkDir(web, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(web, path)
		if err != nil {
			return err
		}
		img.Files = append(img.Files, ImageFile{Path: "/srv/dex/web/" + filepath.ToSlash(rel), Source: path, Mode: 0o644})
		return nil
	})
	if err != nil {
		return Image{}, fmt.Errorf("Dex's web files: %w", err)
	}
	return img, nil
}
