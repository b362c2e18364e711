package testenv

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/railgrid/railgrid-kcp/config"
)

// The SDK part of the image: gcloud, the storage command group and its API client, the
// bundled Python; not the other command groups' commands, their API clients, the other
// components' binaries, botocore's service models, or pip.
func TestGcloudImageKeepsWhatGcloudStorageUses(t *testing.T) {
	for rel, kept := range map[string]bool{
		"bin/gcloud":                            true,
		"lib/gcloud.py":                         true,
		"lib/googlecloudsdk/gcloud_main.py":     true,
		"lib/googlecloudsdk/core/properties.py": true,
		"lib/googlecloudsdk/calliope/cli.py":    true,
		"lib/googlecloudsdk/command_lib/storage/tasks/cp/copy_task.py":                   true,
		"lib/googlecloudsdk/command_lib/storage/__pycache__/x.cpython-312.pyc":           true,
		"lib/googlecloudsdk/api_lib/storage/gcs_json/client.py":                          true,
		"lib/googlecloudsdk/generated_clients/apis/storage/v1/storage_v1_client.py":      true,
		"lib/googlecloudsdk/generated_clients/apis/apis_map.py":                          true,
		"lib/googlecloudsdk/generated_clients/apis/__pycache__/apis_map.cpython-312.pyc": true,
		"lib/surface/__init__.py":                                                           true,
		"lib/surface/storage/cp.py":                                                         true,
		"lib/surface/compute/__init__.py":                                                   true,
		"lib/surface/compute/__pycache__/__init__.cpython-312.pyc":                          true,
		"lib/third_party/botocore/session.py":                                               true,
		"lib/third_party/requests/api.py":                                                   true,
		"platform/bundledpythonunix/bin/python3":                                            true,
		"platform/bundledpythonunix/lib/libpython3.12.so.1.0":                               true,
		"platform/bundledpythonunix/lib/python3.12/json/decoder.py":                         true,
		"platform/bundledpythonunix/lib/python3.12/site-packages/google_crc32c/__init__.py": true,

		"bin/kubectl":               false,
		"bin/bq":                    false,
		"platform/gsutil/gsutil.py": false,
		"platform/pubsub-emulator/bin/cloud-pubsub-emulator":                                         false,
		"lib/surface/compute/instances/create.py":                                                    false,
		"lib/surface/compute/ssh.py":                                                                 false,
		"lib/googlecloudsdk/generated_clients/apis/compute/v1/compute_v1_messages.py":                false,
		"lib/googlecloudsdk/generated_clients/gapic_clients/spanner_v1/types.py":                     false,
		"lib/googlecloudsdk/command_lib/compute/flags.py":                                            false,
		"lib/googlecloudsdk/api_lib/sql/operations.py":                                               false,
		"lib/third_party/botocore/data/s3/2006-03-01/service-2.json.gz":                              false,
		"lib/third_party/kubernetes/client/api_client.py":                                            false,
		"platform/bundledpythonunix/lib/libpython3.12.a":                                             false,
		"platform/bundledpythonunix/lib/python3.12/test/test_os.py":                                  false,
		"platform/bundledpythonunix/lib/python3.12/site-packages/pip/__init__.py":                    false,
		"platform/bundledpythonunix/lib/python3.12/site-packages/pip-24.3.1.dist-info/METADATA":      false,
		"platform/bundledpythonunix/lib/python3.12/site-packages/setuptools-79.0.1.dist-info/RECORD": false,
	} {
		if got := gcloudSDKKeeps(rel); got != kept {
			t.Errorf("%s: kept %v, want %v", rel, got, kept)
		}
	}
}

// sdkRoot is this machine's Google Cloud CLI, or the test is skipped.
func sdkRoot(t *testing.T) string {
	t.Helper()
	root, err := GcloudSDKRoot()
	if err != nil {
		t.Skip(err)
	}
	return root
}

// The image is laid out as google-cloud-cli's x86_64 stable image for what the jobs
// run: each tool of GcloudImageTools reachable through the image's PATH, down its links,
// as a file in the image; every ELF file's interpreter and libraries in it too; gcloud
// at the SDK's bin directory on PATH; the users; one uncompressed layer under the name
// the plan uses. It logs the write time and the sizes.
func TestGcloudImageHoldsTheToolsGcloudAndTheirLibraries(t *testing.T) {
	if testing.Short() {
		t.Skip("writes an image of a few hundred MB")
	}
	root := sdkRoot(t)
	ref := config.GcloudImage(config.DefaultGcloudImageTag)
	start := time.Now()
	img, err := GcloudImage(ref, root)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "gcloud.tar")
	if err := WriteImage(img, out); err != nil {
		t.Fatal(err)
	}
	written := time.Since(start)
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d files, tarball %d MB, written in %s", ref, len(img.Files), st.Size()>>20, written.Round(time.Millisecond))

	archive, err := ReadImageArchive(out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(archive.Config.Config.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/lib/google-cloud-sdk/bin") {
		t.Errorf("env %q: want Debian's PATH and the SDK's bin", archive.Config.Config.Env)
	}
	if archive.Config.OS != "linux" || archive.Config.Architecture != "amd64" {
		t.Errorf("platform %s/%s", archive.Config.OS, archive.Config.Architecture)
	}
	if archive.LayerMediaType != types.OCIUncompressedLayer || archive.LayerGzipped {
		t.Errorf("layer %s (gzip: %v), want a plain tar in an OCI layout", archive.LayerMediaType, archive.LayerGzipped)
	}
	if names := ociIndexNames(t, out); !slices.Equal(names, []string{ref}) {
		t.Errorf("index.json names %q, want %s as containerd's import reads the name", names, ref)
	}
	headers := map[string]*tar.Header{}
	if err := archive.Layer(func(tr *tar.Reader) error {
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			headers[h.Name] = h
		}
	}); err != nil {
		t.Fatal(err)
	}
	// resolve follows links in the layer as the kernel would, from the root.
	var resolve func(p string, depth int) *tar.Header
	resolve = func(p string, depth int) *tar.Header {
		if depth > 40 {
			return nil
		}
		parts := strings.Split(strings.Trim(p, "/"), "/")
		cur := ""
		for i, part := range parts {
			cur = path.Join(cur, part)
			h := headers[cur]
			if h == nil {
				h = headers[cur+"/"]
			}
			if h == nil {
				return nil
			}
			if h.Typeflag == tar.TypeSymlink {
				target := h.Linkname
				if !path.IsAbs(target) {
					target = path.Join("/", path.Dir(cur), target)
				}
				return resolve(path.Join(append([]string{target}, parts[i+1:]...)...), depth+1)
			}
			if i == len(parts)-1 {
				return h
			}
		}
		return nil
	}
	onPath := func(tool string) *tar.Header {
		for _, dir := range strings.Split(strings.TrimPrefix(gcloudImagePath, "PATH="), ":") {
			if h := resolve(path.Join(dir, tool), 0); h != nil && h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0 {
				return h
			}
		}
		return nil
	}
	for _, tool := range GcloudImageTools {
		if onPath(tool) == nil {
			t.Errorf("%s is not an executable on the image's PATH", tool)
		}
	}
	for _, p := range []string{
		"/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6",
		GcloudSDKDir + "/platform/bundledpythonunix/bin/python3",
		GcloudSDKDir + "/platform/bundledpythonunix/lib/libpython3.12.so.1.0",
		GcloudSDKDir + "/lib/surface/storage/cp.py",
	} {
		if h := resolve(p, 0); h == nil || h.Typeflag != tar.TypeReg {
			t.Errorf("%s is not a file in the image", p)
		}
	}
	for _, p := range []string{GcloudSDKDir + "/bin/kubectl", GcloudSDKDir + "/bin/bq", "/usr/bin/python3"} {
		if resolve(p, 0) != nil {
			t.Errorf("%s is in the image: it is not what the jobs use", p)
		}
	}
	for p, want := range map[string]int64{"tmp/": 0o1777, "root/": 0o700} {
		if h := headers[p]; h == nil || h.Mode != want {
			t.Errorf("/%s: %+v, want mode %#o", p, h, want)
		}
	}
	if h := headers["home/cloudsdk/"]; h == nil || h.Uid != 1000 {
		t.Errorf("/home/cloudsdk: %+v, want owned by cloudsdk (1000)", h)
	}
}

// ociIndexNames are the image names index.json of an OCI layout archive gives its
// manifests (io.containerd.image.name).
func ociIndexNames(t *testing.T, path string) []string {
	t.Helper()
	var names []string
	err := eachMember(path, func(name string, _ int64, r io.Reader) error {
		if name != "index.json" {
			return nil
		}
		var idx struct {
			Manifests []struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(r).Decode(&idx); err != nil {
			return err
		}
		for _, m := range idx.Manifests {
			names = append(names, m.Annotations["io.containerd.image.name"])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
