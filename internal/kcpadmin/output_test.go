package kcpadmin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkout makes a directory that git would call a checkout: one with .git in it, a
// directory in a clone, a file in a worktree.
func checkout(t *testing.T, gitFile bool) string {
	t.Helper()
	root := t.TempDir()
	var err error
	if gitFile {
		err = os.WriteFile(filepath.Join(root, ".git"), []byte("gitdir: elsewhere\n"), 0o600)
	} else {
		err = os.Mkdir(filepath.Join(root, ".git"), 0o700)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "cmd", "kcpadmin"), 0o700); err != nil {
		t.Fatal(err)
	}
	return root
}

// A kubeconfig inside the checkout the command runs from is refused, wherever in it and
// however it is reached (a path not yet created, a symbolic link, a worktree's .git
// file); next to the checkout or with no checkout at all it is not.
func TestAKubeconfigInsideTheCheckoutIsRefused(t *testing.T) {
	t.Parallel()
	repo := checkout(t, false)
	worktree := checkout(t, true)
	outside := t.TempDir()
	link := filepath.Join(outside, "link-to-repo")
	if err := os.Symlink(repo, link); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(repo, "cmd", "kcpadmin")
	for _, c := range []struct {
		path, workDir string
		refused       bool
	}{
		{filepath.Join(repo, "admin.kubeconfig"), work, true},
		{filepath.Join(repo, "not", "yet", "there", "admin.kubeconfig"), work, true},
		{filepath.Join(link, "admin.kubeconfig"), work, true},
		{filepath.Join(work, "..", "..", "admin.kubeconfig"), work, true},
		{filepath.Join(worktree, "admin.kubeconfig"), filepath.Join(worktree, "cmd"), true},
		{repo, work, true},
		{repo + "-sibling/admin.kubeconfig", work, false},
		{filepath.Join(outside, "admin.kubeconfig"), work, false},
		{filepath.Join(repo, "admin.kubeconfig"), outside, false}, // run from outside any checkout
	} {
		err := RefuseInsideCheckout(c.path, c.workDir)
		if c.refused != (err != nil) {
			t.Errorf("RefuseInsideCheckout(%s, from %s) = %v, want refused %v", c.path, c.workDir, err, c.refused)
			continue
		}
		if err != nil && (!strings.Contains(err.Error(), "is inside the git checkout") || !strings.Contains(err.Error(), "private key") || !strings.Contains(err.Error(), "-o")) {
			t.Errorf("the refusal does not say why and what to do: %v", err)
		}
	}
}

// The kubeconfig is written with mode 0600 even over a file that was readable by
// others, in a directory created 0700, and leaves no temporary file behind.
func TestWriteKubeconfigLeavesAFileOnlyTheUserCanRead(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "railgrid-kcp")
	path := filepath.Join(dir, "kind-kcp-admin.kubeconfig")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteKubeconfig(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", st.Mode().Perm())
	}
	if data, _ := os.ReadFile(path); string(data) != "new" {
		t.Errorf("content %q", data)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want only the kubeconfig", len(entries))
	}

	fresh := filepath.Join(t.TempDir(), "a", "b", "admin.kubeconfig")
	if err := WriteKubeconfig(fresh, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Dir(fresh)); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("created directory: %v, mode %04o, want 0700", err, st.Mode().Perm())
	}

	if err := WriteKubeconfig(dir, []byte("x")); err == nil {
		t.Error("writing over a directory succeeded")
	}
}
