package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ImageFile is one file of an image built here: a binary built from source, copied in,
// or a directory the image's build makes.
type ImageFile struct {
	// Path is where the file sits in the image (absolute).
	Path string
	// Source is the file on this machine to copy; Content, if set instead, is the file's
	// bytes (a file the image's build writes, such as /etc/passwd); Symlink, if set
	// instead, is the target of a symbolic link; Dir, if set instead, makes Path a
	// directory.
	Source, Symlink string
	Content         []byte
	Dir             bool
	// Mode is the file's permission bits (0o755 when zero), with the sticky bit (0o1000)
	// where a directory has it.
	Mode int64
	// UID and GID own the file (root when zero), as a base image's home directory is
	// owned by its user.
	UID, GID int
	// ModTime is the file's modification time (the epoch when zero). Python checks a
	// compiled module against its source's time: a copied SDK keeps its sources' times,
	// or every run compiles every module again.
	ModTime time.Time
}

// Image is a container image the real node runs, built from files of this machine
// under the name a pod spec asks for, because no registry can be reached.
type Image struct {
	// Ref is the image's name as pod specs give it, e.g. ghcr.io/kcp-dev/kcp:v0.33.0.
	Ref string
	// AlsoTagged are other names of the same image (one tarball, one import).
	AlsoTagged []string
	// Files are the image's only layer.
	Files []ImageFile
	// Entrypoint, Cmd, User, Env and WorkingDir are the image's configuration.
	Entrypoint, Cmd []string
	User            string
	Env             []string
	WorkingDir      string
	// Uncompressed writes the image as an OCI image layout archive whose layer is a
	// plain tar (application/vnd.oci.image.layer.v1.tar): for a large image, compressing
	// it costs more time than reading a larger tarball saves. Not a docker-save tarball:
	// containerd's import gzips every plain layer of one of those (archive.ImportIndex,
	// resolveLayers), while it stores an OCI layout's blobs as they are.
	Uncompressed bool
}

// WriteImage writes img as a tarball (docker save's format) at out, with
// go-containerregistry: one layer with the files and the directories above them (those
// not listed owned by root, 0o755), and a linux/amd64 configuration.
func WriteImage(img Image, out string) error {
	ref, err := name.ParseReference(img.Ref)
	if err != nil {
		return fmt.Errorf("image name %q: %w", img.Ref, err)
	}
	layerTar, err := layerOf(img.Files)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	layer, err := imageLayer(layerTar, img.Uncompressed)
	if err != nil {
		return err
	}
	base := empty.Image
	if img.Uncompressed {
		base = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	image, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return err
	}
	cf, err := image.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint, cf.Config.Cmd = img.Entrypoint, img.Cmd
	cf.Config.User, cf.Config.Env, cf.Config.WorkingDir = img.User, img.Env, img.WorkingDir
	if image, err = mutate.ConfigFile(image, cf); err != nil {
		return err
	}
	refs := map[name.Reference]v1.Image{ref: image}
	for _, other := range img.AlsoTagged {
		r, err := name.ParseReference(other)
		if err != nil {
			return fmt.Errorf("image name %q: %w", other, err)
		}
		refs[r] = image
	}
	if img.Uncompressed {
		return writeOCIArchive(out, image, append([]string{img.Ref}, img.AlsoTagged...))
	}
	return tarball.MultiRefWriteToFile(out, refs)
}

// writeOCIArchive writes image as a tar of an OCI image layout (oci-layout, index.json,
// blobs/sha256/...), one index entry per name, each named as containerd's import reads
// a name (io.containerd.image.name: the full reference; org.opencontainers.image.ref.name:
// the tag).
func writeOCIArchive(out string, image v1.Image, names []string) error {
	manifest, err := image.RawManifest()
	if err != nil {
		return err
	}
	config, err := image.RawConfigFile()
	if err != nil {
		return err
	}
	layers, err := image.Layers()
	if err != nil {
		return err
	}
	cf, err := image.ConfigFile()
	if err != nil {
		return err
	}
	digest, err := image.Digest()
	if err != nil {
		return err
	}
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	for _, n := range names {
		ref, err := name.ParseReference(n)
		if err != nil {
			return fmt.Errorf("image name %q: %w", n, err)
		}
		index.Manifests = append(index.Manifests, v1.Descriptor{
			MediaType: types.OCIManifestSchema1, Size: int64(len(manifest)), Digest: digest,
			Platform:    &v1.Platform{OS: cf.OS, Architecture: cf.Architecture},
			Annotations: map[string]string{"io.containerd.image.name": ref.Name(), "org.opencontainers.image.ref.name": ref.Identifier()},
		})
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	put := func(name string, size int64, open func() (io.ReadCloser, error)) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		rc, err := open()
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(tw, rc)
		return err
	}
	bytesOf := func(b []byte) func() (io.ReadCloser, error) {
		return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	configDigest, err := image.ConfigName()
	if err != nil {
		return err
	}
	files := []struct {
		name string
		size int64
		open func() (io.ReadCloser, error)
	}{
		{"oci-layout", int64(len(`{"imageLayoutVersion":"1.0.0"}`)), bytesOf([]byte(`{"imageLayoutVersion":"1.0.0"}`))},
		{"blobs/sha256/" + configDigest.Hex, int64(len(config)), bytesOf(config)},
		{"blobs/sha256/" + digest.Hex, int64(len(manifest)), bytesOf(manifest)},
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		files = append(files, struct {
			name string
			size int64
			open func() (io.ReadCloser, error)
		}{"blobs/sha256/" + d.Hex, size, l.Compressed})
	}
	files = append(files, struct {
		name string
		size int64
		open func() (io.ReadCloser, error)
	}{"index.json", int64(len(indexJSON)), bytesOf(indexJSON)})
	for _, file := range files {
		if err := put(file.name, file.size, file.open); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// imageLayer is the layer of a tar stream: as it is (a plain tar layer, whose digest is
// its diff ID), or gzip-compressed.
func imageLayer(layerTar []byte, uncompressed bool) (v1.Layer, error) {
	if uncompressed {
		return static.NewLayer(layerTar, types.OCIUncompressedLayer), nil
	}
	// Compressed once here: given an uncompressed layer, go-containerregistry compresses
	// it again for its digest and for the tarball. BestSpeed: the node unpacks it at once.
	var compressed bytes.Buffer
	zw, err := gzip.NewWriterLevel(&compressed, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(layerTar); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed.Bytes())), nil
	})
}

// WriteImages writes each image as WriteImage does, into dir, named after its Ref, two
// at a time, and returns the tarballs' paths in the order of images.
func WriteImages(images []Image, dir string) ([]string, error) {
	out := make([]string, len(images))
	for i, img := range images {
		out[i] = filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(img.Ref)+".tar")
	}
	return out, twoAtATime(len(images), func(i int) error { return WriteImage(images[i], out[i]) })
}

// layerOf is a tar stream of files, with every parent directory before its contents.
func layerOf(files []ImageFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b ImageFile) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range sorted {
		if !path.IsAbs(f.Path) {
			return nil, fmt.Errorf("%s: not an absolute path", f.Path)
		}
		var parents []string
		for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return nil, err
			}
		}
		if f.Symlink != "" {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: f.Path[1:], Linkname: f.Symlink, Mode: 0o777, Uid: f.UID, Gid: f.GID, ModTime: epoch}); err != nil {
				return nil, err
			}
			continue
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o755
		}
		if f.Dir {
			// Sorted, a listed directory comes before what is in it.
			if dirs[f.Path] {
				return nil, fmt.Errorf("%s: directory listed twice", f.Path)
			}
			dirs[f.Path] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: f.Path[1:] + "/", Mode: mode, Uid: f.UID, Gid: f.GID, ModTime: epoch}); err != nil {
				return nil, err
			}
			continue
		}
		data := f.Content
		if data == nil {
			var err error
			if data, err = os.ReadFile(f.Source); err != nil {
				return nil, err
			}
		}
		mtime := epoch
		if !f.ModTime.IsZero() {
			mtime = f.ModTime
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.Path[1:], Mode: mode, Uid: f.UID, Gid: f.GID, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ImageConfig reads back the configuration of an image tarball WriteImage wrote.
func ImageConfig(tarPath string) (*v1.ConfigFile, error) {
	img, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		return nil, err
	}
	return img.ConfigFile()
}

// ImageArchive is an image tarball of one image of one layer, as WriteImage writes it:
// docker-save's format, or an OCI image layout.
type ImageArchive struct {
	path string
	// Config is the image's configuration.
	Config v1.ConfigFile
	// LayerFile is the layer's member of the tarball, and LayerMediaType what the
	// manifest says it is (docker-save's format says nothing).
	LayerFile      string
	LayerMediaType types.MediaType
	// LayerGzipped says whether the layer's bytes are gzip-compressed.
	LayerGzipped bool
}

// ReadImageArchive reads what an image tarball holds.
func ReadImageArchive(path string) (*ImageArchive, error) {
	small := map[string][]byte{}
	heads := map[string][]byte{}
	err := eachMember(path, func(name string, size int64, r io.Reader) error {
		head := make([]byte, 2)
		n, _ := io.ReadFull(r, head)
		heads[name] = head[:n]
		if size < 1<<20 {
			rest, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			small[name] = append(head[:n], rest...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	a := &ImageArchive{path: path}
	var configFile string
	if index, ok := small["index.json"]; ok {
		var idx v1.IndexManifest
		if err := json.Unmarshal(index, &idx); err != nil || len(idx.Manifests) == 0 {
			return nil, fmt.Errorf("%s: index.json: %v", path, err)
		}
		var m v1.Manifest
		if err := json.Unmarshal(small["blobs/sha256/"+idx.Manifests[0].Digest.Hex], &m); err != nil || len(m.Layers) != 1 {
			return nil, fmt.Errorf("%s: the manifest: %v, want one layer", path, err)
		}
		configFile = "blobs/sha256/" + m.Config.Digest.Hex
		a.LayerFile, a.LayerMediaType = "blobs/sha256/"+m.Layers[0].Digest.Hex, m.Layers[0].MediaType
	} else {
		var manifest []struct {
			Config string
			Layers []string
		}
		if err := json.Unmarshal(small["manifest.json"], &manifest); err != nil || len(manifest) != 1 || len(manifest[0].Layers) != 1 {
			return nil, fmt.Errorf("%s: manifest.json: %v, want one image of one layer", path, err)
		}
		configFile, a.LayerFile = manifest[0].Config, manifest[0].Layers[0]
	}
	if err := json.Unmarshal(small[configFile], &a.Config); err != nil {
		return nil, fmt.Errorf("%s: the configuration: %w", path, err)
	}
	a.LayerGzipped = bytes.Equal(heads[a.LayerFile], []byte{0x1f, 0x8b})
	return a, nil
}

// Layer calls f with the layer's tar stream (decompressed).
func (a *ImageArchive) Layer(f func(*tar.Reader) error) error {
	found := false
	err := eachMember(a.path, func(name string, _ int64, r io.Reader) error {
		if name != a.LayerFile {
			return nil
		}
		found = true
		if a.LayerGzipped {
			zr, err := gzip.NewReader(r)
			if err != nil {
				return err
			}
			defer zr.Close()
			r = zr
		}
		return f(tar.NewReader(r))
	})
	if err == nil && !found {
		err = fmt.Errorf("%s: no layer %s", a.path, a.LayerFile)
	}
	return err
}

// eachMember calls f with every regular file of a tarball.
func eachMember(path string, f func(name string, size int64, r io.Reader) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	tr := tar.NewReader(file)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if err := f(h.Name, h.Size, tr); err != nil {
				return err
			}
		}
	}
}
