package testenv

import (
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// GcloudImageTools are the commands the google-cloud-cli:<tag>-stable image has on
// PATH on x86_64: Debian's essential tools (bash, coreutils, grep, sed, util-linux's
// flock, ...) and what its Dockerfile installs (curl, git, gnupg, make, openssh-client,
// the gcloud CLI). python3 is not among them: the Dockerfile installs it only when the
// machine is not x86_64, and gcloud runs the Python bundled under its own directory.
// gcloud itself runs `git --version` and `ssh -V` when it starts.
var GcloudImageTools = []string{
	"bash", "sh", "cat", "chmod", "cp", "cut", "date", "dirname", "basename", "echo", "env",
	"expr", "false", "head", "id", "ln", "ls", "mkdir", "mktemp", "mv", "printf", "readlink",
	"rm", "seq", "sleep", "sort", "tail", "tee", "touch", "tr", "true", "uname", "wc",
	"grep", "sed", "awk", "find", "xargs", "gzip", "tar", "flock",
	"curl", "git", "gpg", "make", "ssh",
	"gcloud",
}

// GcloudSDKDir is where the google-cloud-cli image installs the SDK (its Dockerfile
// copies Debian's google-cloud-cli package's /usr/lib/google-cloud-sdk) and puts its bin
// directory on PATH.
const GcloudSDKDir = "/usr/lib/google-cloud-sdk"

// gcloudImagePath is the image's PATH: Debian's, then the SDK's bin directory.
const gcloudImagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + GcloudSDKDir + "/bin"

// The parts of the SDK that `gcloud storage cp` and `gcloud storage ls` use, found by
// tracing them against fake-gcs-server (uploads with --no-clobber, listings, downloads,
// and their failures) and then running the scripts from a copy that holds only these
// (tests/snapshots runs every job's script in this image's files). Whole packages are
// kept where any of their modules was loaded, so a path the trace did not take inside
// a package still finds its code; what is left out is the other command groups and
// their API clients, the other components' binaries (kubectl, bq, the emulators,
// gsutil), Python's build and test files and pip.
var (
	// gcloudSDKTrees are kept whole (relative to the SDK's root).
	gcloudSDKTrees = []string{
		".install", "properties", "VERSION", "bin/gcloud", "bin/gcloud-crc32c",
		"lib/gcloud.py",
		"lib/googlecloudsdk/core", "lib/googlecloudsdk/calliope",
		"lib/googlecloudsdk/generated_clients/apis/storage",
		"lib/surface/storage",
		"platform/bundledpythonunix/bin/python3", "platform/bundledpythonunix/bin/python3.12",
		"platform/bundledpythonunix/lib/libpython3.12.so.1.0", "platform/bundledpythonunix/lib/libpython3.so",
		"platform/bundledpythonunix/lib/python3.12",
	}
	// gcloudSDKPackages are directories whose listed subpackages are kept whole, and of
	// which only the files at the top are kept otherwise.
	gcloudSDKPackages = map[string][]string{
		"lib/googlecloudsdk":                        nil,
		"lib/googlecloudsdk/generated_clients":      nil,
		"lib/googlecloudsdk/generated_clients/apis": nil,
		"lib/googlecloudsdk/command_lib":            {"auth", "iam", "resource_manager", "static_completion", "storage", "util"},
		"lib/googlecloudsdk/api_lib":                {"app", "auth", "compute", "container", "error_reporting", "iamcredentials", "services", "storage", "util"},
		"lib/third_party": {"apitools", "argcomplete", "argparse", "boto3", "botocore", "cachetools", "certifi", "chardet", "cloudsdk",
			"concurrent", "dateutil", "google", "google_auth_httplib2", "httplib2", "idna", "ipaddress", "jmespath", "jsonschema",
			"oauth2client", "pyasn1", "pyasn1_modules", "pyparsing", "pyu2f", "requests", "rsa", "ruamel", "s3transfer", "six",
			"socks", "uritemplate", "urllib3", "yaml"},
		"lib/surface": nil,
	}
	// gcloudSDKOmitted are left out of the kept trees: botocore's AWS service models
	// (read only when an S3 client is made), Python's tests, build files, Tk, and pip.
	gcloudSDKOmitted = []string{
		"lib/third_party/botocore/data",
		"platform/bundledpythonunix/lib/python3.12/test",
		"platform/bundledpythonunix/lib/python3.12/ensurepip",
		"platform/bundledpythonunix/lib/python3.12/idlelib",
		"platform/bundledpythonunix/lib/python3.12/tkinter",
		"platform/bundledpythonunix/lib/python3.12/turtledemo",
		"platform/bundledpythonunix/lib/python3.12/lib2to3",
		"platform/bundledpythonunix/lib/python3.12/pydoc_data",
		"platform/bundledpythonunix/lib/python3.12/config-3.12-x86_64-linux-gnu",
		"platform/bundledpythonunix/lib/python3.12/site-packages/pip",
		"platform/bundledpythonunix/lib/python3.12/site-packages/setuptools",
		"platform/bundledpythonunix/lib/python3.12/site-packages/wheel",
		"platform/bundledpythonunix/lib/python3.12/site-packages/pkg_resources",
		"platform/bundledpythonunix/lib/python3.12/site-packages/_distutils_hack",
		"platform/bundledpythonunix/lib/python3.12/site-packages/distutils-precedence.pth",
	}
)

// gcloudSDKKeeps says whether the file at rel (relative to the SDK's root) is kept.
func gcloudSDKKeeps(rel string) bool {
	for _, o := range gcloudSDKOmitted {
		// The directory, and a Python package's <name>-<version>.dist-info beside it.
		if rest, ok := strings.CutPrefix(rel, path.Dir(o)+"/"); ok {
			first, _, _ := strings.Cut(rest, "/")
			if first == path.Base(o) || strings.HasPrefix(first, path.Base(o)+"-") && strings.HasSuffix(first, ".dist-info") {
				return false
			}
		}
	}
	for _, k := range gcloudSDKTrees {
		if rel == k || strings.HasPrefix(rel, k+"/") {
			return true
		}
	}
	// A package's own files, and its __pycache__, at its top; its listed subpackages whole.
	for dir := path.Dir(rel); dir != "."; dir = path.Dir(dir) {
		subs, ok := gcloudSDKPackages[dir]
		if !ok {
			continue
		}
		rest := strings.TrimPrefix(rel, dir+"/")
		first, _, nested := strings.Cut(rest, "/")
		if !nested || first == "__pycache__" && !strings.Contains(strings.TrimPrefix(rest, "__pycache__/"), "/") {
			return true
		}
		if slices.Contains(subs, first) {
			return true
		}
		// A command group's definition (lib/surface/<group>/__init__.py): gcloud loads
		// the groups when it builds its command tree.
		if dir == "lib/surface" {
			rest2 := strings.TrimPrefix(rest, first+"/")
			return rest2 == "__init__.py" || strings.HasPrefix(rest2, "__pycache__/__init__.")
		}
		return false
	}
	return false
}

// GcloudImage is the google-cloud-cli image of the x86_64 stable tag as the snapshot,
// drill and restore jobs use it, from this machine's Debian 12 (the image's base) and
// its Google Cloud CLI (the SDK at sdkRoot, as Debian's google-cloud-cli package installs
// it): the tools of GcloudImageTools and the shared libraries they load, the part of the
// SDK that gcloud storage needs (gcloudSDKKeeps) at GcloudSDKDir, with its bin directory
// on PATH, /tmp, and the image's users (root, and cloudsdk 1000 as its Dockerfile adds
// it). The pods run it as their own user, 65532. The layer is written uncompressed:
// nothing compresses or decompresses it on the way to the node. What it leaves out: the
// image's entrypoint script (every job's container gives its command), the rest of the
// SDK, and everything of Debian the scripts never run.
func GcloudImage(ref, sdkRoot string) (Image, error) {
	sdkRoot, err := filepath.EvalSymlinks(sdkRoot)
	if err != nil {
		return Image{}, err
	}
	b := &rootfsBuilder{files: map[string]ImageFile{}, sdkRoot: sdkRoot}
	for _, link := range [][2]string{{"/bin", "usr/bin"}, {"/sbin", "usr/sbin"}, {"/lib", "usr/lib"}, {"/lib64", "usr/lib64"}} {
		b.files[link[0]] = ImageFile{Path: link[0], Symlink: link[1]}
	}
	var elfs []string
	err = filepath.WalkDir(sdkRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(sdkRoot, p)
		if !gcloudSDKKeeps(filepath.ToSlash(rel)) {
			return nil
		}
		target := GcloudSDKDir + "/" + filepath.ToSlash(rel)
		if d.Type()&fs.ModeSymlink != 0 {
			dest, err := os.Readlink(p)
			if err != nil {
				return err
			}
			b.files[target] = ImageFile{Path: target, Symlink: dest}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b.files[target] = ImageFile{Path: target, Source: p, Mode: int64(info.Mode().Perm()), ModTime: info.ModTime()}
		if isELF(p) {
			elfs = append(elfs, p)
		}
		return nil
	})
	if err != nil {
		return Image{}, fmt.Errorf("the SDK at %s: %w", sdkRoot, err)
	}
	if _, ok := b.files[GcloudSDKDir+"/bin/gcloud"]; !ok {
		return Image{}, fmt.Errorf("%s has no bin/gcloud", sdkRoot)
	}
	for _, tool := range GcloudImageTools {
		if tool == "gcloud" {
			continue // on PATH from the SDK's bin directory
		}
		p, err := debianCommand(tool)
		if err != nil {
			return Image{}, fmt.Errorf("the gcloud image's %s: %w", tool, err)
		}
		real, err := b.addPath(p)
		if err != nil {
			return Image{}, err
		}
		elfs = append(elfs, real)
	}
	if err := b.addLibraries(elfs); err != nil {
		return Image{}, err
	}
	for _, f := range []ImageFile{
		{Path: "/etc/passwd", Mode: 0o644, Content: []byte("root:x:0:0:root:/root:/bin/bash\ncloudsdk:x:1000:1000::/home/cloudsdk:/bin/bash\n")},
		{Path: "/etc/group", Mode: 0o644, Content: []byte("root:x:0:\ncloudsdk:x:1000:\n")},
		{Path: "/root", Dir: true, Mode: 0o700},
		{Path: "/home/cloudsdk", Dir: true, Mode: 0o755, UID: 1000, GID: 1000},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
		{Path: "/var/tmp", Dir: true, Mode: 0o1777},
	} {
		b.files[f.Path] = f
	}
	img := Image{Ref: ref, Env: []string{gcloudImagePath}, Uncompressed: true}
	for _, p := range slices.Sorted(mapsKeys(b.files)) {
		img.Files = append(img.Files, b.files[p])
	}
	return img, nil
}

func mapsKeys(m map[string]ImageFile) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// debianCommand is a command of Debian's own directories (not one a user or a tool
// cache put on PATH).
func debianCommand(name string) (string, error) {
	for _, dir := range []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if info, err := os.Stat(p); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not in Debian's /usr/bin, /bin, /usr/sbin or /sbin: install its package", name)
}

// rootfsBuilder collects files of this machine at the paths they have here, and the
// SDK's under GcloudSDKDir.
type rootfsBuilder struct {
	files   map[string]ImageFile
	sdkRoot string
}

// addPath adds the file at p, following symbolic links: each link is added as a link,
// and its target too. Directories on the way that are links here (/bin -> usr/bin) are
// resolved, so every file sits under the image's real directories. It returns the
// path of the file at the end.
func (b *rootfsBuilder) addPath(p string) (string, error) {
	for range 40 {
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			return "", err
		}
		p = filepath.Join(dir, filepath.Base(p))
		info, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			if _, ok := b.files[p]; !ok {
				b.files[p] = ImageFile{Path: p, Source: p, Mode: int64(info.Mode().Perm())}
			}
			return p, nil
		}
		dest, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		b.files[p] = ImageFile{Path: p, Symlink: dest}
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(filepath.Dir(p), dest)
		}
		p = dest
	}
	return "", fmt.Errorf("%s: too many symbolic links", p)
}

// libraryDirs are where Debian's dynamic loader finds libraries on x86_64.
var libraryDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// addLibraries adds what the ELF files load: their interpreter and every shared library
// they need, and what those need, found in their RUNPATH (within the image) or in
// Debian's library directories.
func (b *rootfsBuilder) addLibraries(elfs []string) error {
	seen := map[string]bool{}
	queue := slices.Clone(elfs)
	for len(queue) > 0 {
		file := queue[0]
		queue = queue[1:]
		if seen[file] {
			continue
		}
		seen[file] = true
		f, err := elf.Open(file)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		needed, _ := f.DynString(elf.DT_NEEDED)
		runpaths, _ := f.DynString(elf.DT_RUNPATH)
		rpaths, _ := f.DynString(elf.DT_RPATH)
		var interp string
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				data := make([]byte, prog.Filesz)
				if _, err := prog.ReadAt(data, 0); err == nil {
					interp = strings.TrimRight(string(data), "\x00")
				}
			}
		}
		f.Close()
		if interp != "" {
			real, err := b.addPath(interp)
			if err != nil {
				return fmt.Errorf("%s's interpreter: %w", file, err)
			}
			queue = append(queue, real)
		}
		var dirs []string
		for _, rp := range append(runpaths, rpaths...) {
			for _, d := range strings.Split(rp, ":") {
				dirs = append(dirs, strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(file)))
			}
		}
		for _, lib := range needed {
			found := ""
			if strings.Contains(lib, "/") {
				// A path, not a name: the loader takes it as it is ($ORIGIN expanded).
				found = filepath.Clean(strings.ReplaceAll(lib, "$ORIGIN", filepath.Dir(file)))
				if _, err := os.Stat(found); err != nil {
					return fmt.Errorf("%s needs %s: %w", file, lib, err)
				}
			}
			for _, d := range append(dirs, libraryDirs...) {
				if found != "" {
					break
				}
				if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
					found = filepath.Join(d, lib)
					break
				}
			}
			if found == "" {
				return fmt.Errorf("%s needs %s, which is in none of %v", file, lib, append(dirs, libraryDirs...))
			}
			if rel, err := filepath.Rel(b.sdkRoot, found); err == nil && !strings.HasPrefix(rel, "..") {
				// The SDK's own libraries (bundled Python's) must be among its kept files.
				if _, ok := b.files[GcloudSDKDir+"/"+filepath.ToSlash(rel)]; !ok {
					return fmt.Errorf("%s needs %s, which the image's part of the SDK leaves out", file, found)
				}
				queue = append(queue, found)
				continue
			}
			real, err := b.addPath(found)
			if err != nil {
				return err
			}
			queue = append(queue, real)
		}
	}
	return nil
}

func isELF(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = f.Read(magic)
	return err == nil && string(magic) == "\x7fELF"
}

// GcloudSDKRoot is the root of this machine's Google Cloud CLI, found through gcloud on
// PATH (Debian's package links it into the SDK's bin directory).
func GcloudSDKRoot() (string, error) {
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		return "", fmt.Errorf("gcloud is not on PATH: install the Google Cloud CLI (docs/testing.md): %w", err)
	}
	real, err := filepath.EvalSymlinks(gcloud)
	if err != nil {
		return "", err
	}
	return filepath.Dir(filepath.Dir(real)), nil
}
