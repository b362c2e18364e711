//go:build linux

package snapshots

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

// The images the jobs' containers run are the real node's (testenv.GcloudImage and
// testenv.EtcdImage), written as the node gets them and unpacked from those tarballs:
// each container runs in its image's root filesystem, so the scripts meet exactly the
// tools, libraries and SDK files the node's pods will.

// imagesDir holds the unpacked images of this test binary; TestMain removes it.
var (
	imagesOnce sync.Once
	imagesDir  string
	images     map[string]image
	imagesErr  error
)

// nodeImages writes and unpacks the gcloud image (from the SDK at sdkRoot), the etcd
// image (from the etcd tools at etcdTools) and the defragmentation's busybox (Debian's
// busybox-static) under the names the plan's pods use, once per test binary.
func nodeImages(jp jobPods, sdkRoot, etcdTools string) (map[string]image, string, error) {
	gcloudRef, etcdRef := jp.gcloud, jp.etcdImg
	var report string
	imagesOnce.Do(func() {
		imagesDir, imagesErr = os.MkdirTemp("", "railgrid-snapshots-images-")
		if imagesErr != nil {
			return
		}
		// The pods' user must reach the unpacked roots.
		if imagesErr = os.Chmod(imagesDir, 0o755); imagesErr != nil {
			return
		}
		start := time.Now()
		gcloud, err := testenv.GcloudImage(gcloudRef, sdkRoot)
		if err != nil {
			imagesErr = err
			return
		}
		etcd := testenv.EtcdImage(etcdRef, filepath.Join(etcdTools, "etcd"), filepath.Join(etcdTools, "etcdctl"), filepath.Join(etcdTools, "etcdutl"))
		busybox, err := exec.LookPath("busybox")
		if err != nil {
			imagesErr = fmt.Errorf("busybox (Debian's busybox-static, which hack/build-tools.sh node installs): %w", err)
			return
		}
		shell, err := testenv.EtcdDefragImage(busybox)
		if err != nil {
			imagesErr = err
			return
		}
		images = map[string]image{}
		for i, img := range []testenv.Image{gcloud, etcd, shell} {
			tarball := filepath.Join(imagesDir, fmt.Sprintf("image-%d.tar", i))
			if err := testenv.WriteImage(img, tarball); err != nil {
				imagesErr = err
				return
			}
			root := filepath.Join(imagesDir, fmt.Sprintf("root-%d", i))
			env, err := unpackImage(tarball, root)
			if err != nil {
				imagesErr = fmt.Errorf("unpacking %s: %w", img.Ref, err)
				return
			}
			_ = os.Remove(tarball)
			images[img.Ref] = image{root: root, env: env}
		}
		report = fmt.Sprintf("images %s, %s and %s written and unpacked in %s", gcloudRef, etcdRef, jp.shell, time.Since(start).Round(time.Millisecond))
	})
	return images, report, imagesErr
}

// removeNodeImages removes what nodeImages unpacked.
func removeNodeImages() {
	if imagesDir != "" {
		_ = os.RemoveAll(imagesDir)
	}
}

// unpackImage unpacks the one-layer image of a tarball WriteImage wrote into root, as a
// runtime's snapshotter does (owners, modes, links, times), and returns the environment
// of its configuration.
func unpackImage(tarball, root string) ([]string, error) {
	archive, err := testenv.ReadImageArchive(tarball)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	err = archive.Layer(func(tr *tar.Reader) error {
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := unpackEntry(root, h, tr); err != nil {
				return err
			}
		}
	})
	return archive.Config.Config.Env, err
}

func unpackEntry(root string, h *tar.Header, r io.Reader) error {
	target := filepath.Join(root, filepath.Clean("/"+h.Name))
	switch h.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
	case tar.TypeSymlink:
		return os.Symlink(h.Linkname, target)
	case tar.TypeReg:
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s: entry type %c not unpacked", h.Name, h.Typeflag)
	}
	if err := os.Chown(target, h.Uid, h.Gid); err != nil {
		return err
	}
	if err := os.Chmod(target, os.FileMode(h.Mode&0o777)|modeBits(h.Mode)); err != nil {
		return err
	}
	return os.Chtimes(target, h.ModTime, h.ModTime)
}

// modeBits are the setuid, setgid and sticky bits of a tar mode.
func modeBits(mode int64) os.FileMode {
	var m os.FileMode
	if mode&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}
