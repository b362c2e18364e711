package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
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
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ImageFile is one file of an image built here: a binary built from source, copied in,
// or a directory the image's build makes.
type ImageFile struct {
	// Path is where the file sits in the image (absolute).
	Path string
	// Source is the file on this machine to copy; Symlink, if set instead, is the
	// target of a symbolic link; Dir, if set instead, makes Path a directory.
	Source, Symlink string
	Dir             bool
	// Mode is the file's permission bits (0o755 when zero), with the sticky bit (0o1000)
	// where a directory has it.
	Mode int64
	// UID and GID own the file (root when zero), as a base image's home directory is
	// owned by its user.
	UID, GID int
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
	// Compressed once here: given an uncompressed layer, go-containerregistry compresses
	// it again for its digest and for the tarball. BestSpeed: the node unpacks it at once.
	var compressed bytes.Buffer
	zw, err := gzip.NewWriterLevel(&compressed, gzip.BestSpeed)
	if err != nil {
		return err
	}
	if _, err := zw.Write(layerTar); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed.Bytes())), nil
	})
	if err != nil {
		return err
	}
	image, err := mutate.AppendLayers(empty.Image, layer)
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
	return tarball.MultiRefWriteToFile(out, refs)
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
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.Path[1:], Mode: mode, Uid: f.UID, Gid: f.GID, Size: int64(len(data)), ModTime: epoch}); err != nil {
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
