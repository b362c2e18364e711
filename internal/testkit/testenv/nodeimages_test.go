package testenv

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/railgrid/railgrid-kcp/config"
)

// The add-ons' images are laid out as their upstream builds lay them out, read from the
// sources at the pinned versions: cert-manager's hack/containers/Containerfile.<component>
// (v1.20.2: COPY <component> /app/cmd/<component>/<component>, startupapicheck at
// /startupapicheck, ENTRYPOINT that path, no USER: the distroless static-debian12:nonroot
// base's 65532) and Envoy Gateway's tools/docker/envoy-gateway/Dockerfile (v1.9.0: COPY
// envoy-gateway /usr/local/bin/, /var/lib/eg made 0777, USER 65532:65532, ENTRYPOINT
// /usr/local/bin/envoy-gateway, on distroless base-nossl:nonroot). Both bases work in
// /home/nonroot, owned by 65532. The names are those the charts use by default
// (tests/charts checks them against the rendered charts).
func TestAddOnImagesAreLaidOutAsUpstreamBuildsThem(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "binary")
	if err := os.WriteFile(bin, []byte("not really a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	cm, eg := config.DefaultCertManagerVersion, config.DefaultEnvoyGatewayVersion
	for _, c := range []struct {
		image                 Image
		ref, entrypoint, user string
		// dirs are directories the image's build makes, with their mode.
		dirs map[string]int64
	}{
		{CertManagerImage(CertManagerController, cm, bin), "quay.io/jetstack/cert-manager-controller:" + cm, "/app/cmd/controller/controller", "65532", nil},
		{CertManagerImage(CertManagerWebhook, cm, bin), "quay.io/jetstack/cert-manager-webhook:" + cm, "/app/cmd/webhook/webhook", "65532", nil},
		{CertManagerImage(CertManagerCAInjector, cm, bin), "quay.io/jetstack/cert-manager-cainjector:" + cm, "/app/cmd/cainjector/cainjector", "65532", nil},
		{CertManagerImage(CertManagerStartupAPICheck, cm, bin), "quay.io/jetstack/cert-manager-startupapicheck:" + cm, "/startupapicheck", "65532", nil},
		{EnvoyGatewayImage(eg, bin), "docker.io/envoyproxy/gateway:" + eg, "/usr/local/bin/envoy-gateway", "65532:65532", map[string]int64{"var/lib/eg/": 0o777}},
	} {
		t.Run(c.ref, func(t *testing.T) {
			out := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(c.ref)+".tar")
			if err := WriteImage(c.image, out); err != nil {
				t.Fatal(err)
			}
			tag, err := name.NewTag(c.ref)
			if err != nil {
				t.Fatal(err)
			}
			img, err := tarball.ImageFromPath(out, &tag)
			if err != nil {
				t.Fatalf("the tarball has no image %s: %v", c.ref, err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if got := cf.Config.Entrypoint; !slices.Equal(got, []string{c.entrypoint}) || len(cf.Config.Cmd) > 0 {
				t.Errorf("entrypoint %q, cmd %q; want entrypoint [%s] and no cmd", got, cf.Config.Cmd, c.entrypoint)
			}
			if cf.Config.User != c.user || cf.Config.WorkingDir != "/home/nonroot" {
				t.Errorf("user %q in %q; want %q in /home/nonroot", cf.Config.User, cf.Config.WorkingDir, c.user)
			}
			if cf.OS != "linux" || cf.Architecture != "amd64" {
				t.Errorf("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
			}

			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("%d layers (%v), want 1", len(layers), err)
			}
			files := layerHeaders(t, layers[0].Uncompressed)
			binary := files[strings.TrimPrefix(c.entrypoint, "/")]
			if binary == nil || binary.Typeflag != tar.TypeReg || binary.Mode != 0o755 || binary.Uid != 0 {
				t.Errorf("no executable owned by root at %s: %+v", c.entrypoint, binary)
			}
			dirs := map[string]int64{"home/nonroot/": 0o700, "tmp/": 0o1777}
			for d, mode := range c.dirs {
				dirs[d] = mode
			}
			for d, mode := range dirs {
				h := files[d]
				if h == nil || h.Typeflag != tar.TypeDir || h.Mode != mode {
					t.Errorf("no directory /%s with mode %#o: %+v", d, mode, h)
				}
			}
			if h := files["home/nonroot/"]; h != nil && (h.Uid != 65532 || h.Gid != 65532) {
				t.Errorf("/home/nonroot is owned by %d:%d, want 65532:65532", h.Uid, h.Gid)
			}
		})
	}
}

// layerHeaders reads the tar headers of a layer, by name.
func layerHeaders(t *testing.T, open func() (io.ReadCloser, error)) map[string]*tar.Header {
	t.Helper()
	rc, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	headers := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers
		}
		if err != nil {
			t.Fatal(err)
		}
		headers[h.Name] = h
	}
}

// Dex's image is laid out as its Dockerfile lays it out at v2.45.1 (on the default alpine
// base): COPY dex /usr/local/bin/dex, COPY web /srv/dex/web, /etc/dex and /var/dex made
// and owned by 1001:1001, the user dex (1001) and group dex (1001) added to /etc/passwd and
// /etc/group, USER dex:dex. Its command is the one Dex's chart gives (dex serve
// /etc/dex/config.yaml), found through alpine's PATH, with no entrypoint (DexImage says
// why). Its name is the chart's default image.
func TestDexImageIsLaidOutAsItsDockerfileLaysItOut(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "dex")
	web := filepath.Join(dir, "web")
	for path, data := range map[string]string{
		bin: "not really a binary",
		filepath.Join(web, "templates", "login.html"):      "<html>login</html>",
		filepath.Join(web, "themes", "dark", "styles.css"): "body {}",
		filepath.Join(web, "robots.txt"):                   "User-agent: *\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	image, err := DexImage("v2.45.1", bin, web)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "dex.tar")
	if err := WriteImage(image, out); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag("ghcr.io/dexidp/dex:v2.45.1")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("the tarball has no image %s: %v", tag, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.Config.Entrypoint) > 0 || !slices.Equal(cf.Config.Cmd, []string{"dex", "serve", "/etc/dex/config.yaml"}) {
		t.Errorf("entrypoint %q, cmd %q; want no entrypoint and [dex serve /etc/dex/config.yaml]", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if cf.Config.User != "dex:dex" {
		t.Errorf("user %q, want dex:dex", cf.Config.User)
	}
	if !slices.Contains(cf.Config.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") {
		t.Errorf("env %q has not alpine's PATH, through which the command's dex is found", cf.Config.Env)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	files := layerHeaders(t, layers[0].Uncompressed)
	for _, f := range []struct {
		path     string
		typ      byte
		mode     int64
		uid, gid int
	}{
		{"usr/local/bin/dex", tar.TypeReg, 0o755, 0, 0},
		{"srv/dex/web/templates/login.html", tar.TypeReg, 0o644, 0, 0},
		{"srv/dex/web/themes/dark/styles.css", tar.TypeReg, 0o644, 0, 0},
		{"srv/dex/web/robots.txt", tar.TypeReg, 0o644, 0, 0},
		{"etc/passwd", tar.TypeReg, 0o644, 0, 0},
		{"etc/group", tar.TypeReg, 0o644, 0, 0},
		{"etc/dex/", tar.TypeDir, 0o755, 1001, 1001},
		{"var/dex/", tar.TypeDir, 0o755, 1001, 1001},
		{"tmp/", tar.TypeDir, 0o1777, 0, 0},
	} {
		h := files[f.path]
		if h == nil || h.Typeflag != f.typ || h.Mode != f.mode || h.Uid != f.uid || h.Gid != f.gid {
			t.Errorf("/%s: %+v; want type %q, mode %#o, owner %d:%d", f.path, h, f.typ, f.mode, f.uid, f.gid)
		}
	}
	passwd, group := layerFile(t, layers[0].Uncompressed, "etc/passwd"), layerFile(t, layers[0].Uncompressed, "etc/group")
	if !slices.Contains(strings.Split(passwd, "\n"), "dex:x:1001:1001::/home/dex:/sbin/nologin") {
		t.Errorf("/etc/passwd has no user dex with uid and gid 1001:\n%s", passwd)
	}
	if !slices.Contains(strings.Split(group, "\n"), "dex:x:1001:dex") {
		t.Errorf("/etc/group has no group dex with gid 1001:\n%s", group)
	}
}

// layerFile reads one regular file of a layer.
func layerFile(t *testing.T, open func() (io.ReadCloser, error), name string) string {
	t.Helper()
	rc, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no file %s in the layer: %v", name, err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
}

// The provider probe's image holds a static binary: nothing in the image could load a C
// library for it.
func TestProviderProbeIsAStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/provider-probe")
	}
	f, err := elf.Open(BuildProviderProbe(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the provider probe asks for a dynamic loader (PT_INTERP): it is not static")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Fatalf("the provider probe links %v (%v)", libs, err)
	}
}
