package testenv

import (
	"archive/tar"
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
