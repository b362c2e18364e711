package kcpadmin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KubeconfigMode is the admin kubeconfig's file mode: it holds a private key.
const KubeconfigMode fs.FileMode = 0o600

// DefaultKubeconfigPath is where the admin kubeconfig goes unless -o says otherwise:
// <user config dir>/railgrid-kcp/<stack>-kcp-admin.kubeconfig ($XDG_CONFIG_HOME or
// ~/.config on Linux), outside any checkout.
func DefaultKubeconfigPath(stack string) (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no user config directory for the kubeconfig (%v): choose a file with -o", err)
	}
	return filepath.Join(dir, "railgrid-kcp", stack+"-kcp-admin.kubeconfig"), nil
}

// CheckoutRoot is the root of the git checkout dir lies in (the nearest directory up
// with a .git directory, or a .git file as in a worktree), or "" when there is none.
func CheckoutRoot(dir string) (string, error) {
	dir, err := resolvePath(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", nil
		}
		dir = parent
	}
}

// RefuseInsideCheckout fails when path, symbolic links resolved, lies in the git
// checkout that workDir lies in: the kubeconfig carries kcp-admin's private key and
// must never be one `git add` away from version control.
func RefuseInsideCheckout(path, workDir string) error {
	root, err := CheckoutRoot(workDir)
	if err != nil || root == "" {
		return err
	}
	resolved, err := resolvePath(path)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(root, resolved)
	if err != nil {
		return nil // another volume: not inside
	}
	if rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))) {
		return fmt.Errorf("%s is inside the git checkout %s: the kubeconfig holds kcp-admin's private key and must stay out of version control; choose a file outside it with -o", path, root)
	}
	return nil
}

// resolvePath makes path absolute and resolves the symbolic links of the part of it
// that exists, so that a link into a checkout is seen as the checkout.
func resolvePath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	existing, missing := abs, ""
	for {
		resolved, err := filepath.EvalSymlinks(existing)
		if err == nil {
			return filepath.Join(resolved, missing), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return abs, nil
		}
		missing = filepath.Join(filepath.Base(existing), missing)
		existing = parent
	}
}

// WriteKubeconfig writes data to path with mode 0600, creating its directory (0700)
// when missing. It writes a temporary file beside it and renames it, so a reader never
// sees half a file and an existing file's wider mode is not kept.
func WriteKubeconfig(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot create the kubeconfig's directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".kcpadmin-*.kubeconfig")
	if err != nil {
		return fmt.Errorf("cannot write the kubeconfig: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; removes it after a failure
	if err := tmp.Chmod(KubeconfigMode); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("cannot write the kubeconfig: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("cannot write the kubeconfig: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cannot write the kubeconfig: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cannot write the kubeconfig: %w", err)
	}
	st, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("cannot write the kubeconfig: %w", err)
	}
	if st.Mode().Perm() != KubeconfigMode {
		return fmt.Errorf("%s has mode %04o after writing, want %04o", path, st.Mode().Perm(), KubeconfigMode)
	}
	return nil
}
