package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The root is the directory whose go.mod declares this module, not the nearest go.mod:
// the tools' own modules (tools/kube, ...) have one too.
func TestFindRepoRootPassesOverOtherModules(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"go.mod":            "module github.com/railgrid/railgrid-kcp\n\ngo 1.26\n",
		"tools/kube/go.mod": "module github.com/railgrid/railgrid-kcp/tools/kube\n",
		"tools/kube/x/y.go": "package x\n",
	})
	got, err := findRepoRoot(filepath.Join(root, "tools", "kube", "x"))
	if err != nil || got != root {
		t.Errorf("findRepoRoot = %q, %v; want %q", got, err, root)
	}
	if _, err := findRepoRoot(filepath.Join(root, "..")); !errors.Is(err, errNoRepoRoot) {
		t.Errorf("findRepoRoot above the module: %v, want errNoRepoRoot", err)
	}
}

func TestRepoRootIsThreeLevelsAboveThisPackage(t *testing.T) {
	want, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if got := RepoRoot(t); got != want {
		t.Errorf("RepoRoot = %s, want %s", got, want)
	}
}

func TestSharedDirsAreNextToTheRepositoryUnlessOverridden(t *testing.T) {
	root := filepath.Join(string(filepath.Separator), "src", "railgrid-kcp")
	t.Setenv(EnvCRDsDir, "")
	t.Setenv(EnvThirdpartyDir, "")
	if got, want := CRDsDir(root), filepath.Join(string(filepath.Separator), "src", "shared", "reference", "crds"); got != want {
		t.Errorf("CRDsDir = %s, want %s", got, want)
	}
	if got, want := ThirdpartyDir(root), filepath.Join(string(filepath.Separator), "src", "shared", "thirdparty"); got != want {
		t.Errorf("ThirdpartyDir = %s, want %s", got, want)
	}
	t.Setenv(EnvCRDsDir, "/elsewhere/crds")
	t.Setenv(EnvThirdpartyDir, "/elsewhere/thirdparty")
	if got := CRDsDir(root); got != "/elsewhere/crds" {
		t.Errorf("CRDsDir with $%s set = %s", EnvCRDsDir, got)
	}
	if got := ThirdpartyDir(root); got != "/elsewhere/thirdparty" {
		t.Errorf("ThirdpartyDir with $%s set = %s", EnvThirdpartyDir, got)
	}
}

func TestExecutablesNamesEveryMiss(t *testing.T) {
	bin := t.TempDir()
	writeFiles(t, bin, map[string]string{"on-path": "#!/bin/sh\n", "not-executable": "data"})
	if err := os.Chmod(filepath.Join(bin, "on-path"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	t.Setenv("TESTENV_SET", filepath.Join(bin, "on-path"))
	t.Setenv("TESTENV_NOT_EXECUTABLE", filepath.Join(bin, "not-executable"))
	t.Setenv("TESTENV_DIR", bin)
	t.Setenv("TESTENV_UNSET", "")

	var exe Executables
	if got := exe.Find("on-path", ""); got != filepath.Join(bin, "on-path") {
		t.Errorf("Find on PATH = %q", got)
	}
	if got := exe.Find("elsewhere", "TESTENV_SET"); got != filepath.Join(bin, "on-path") {
		t.Errorf("Find with the variable set = %q", got)
	}
	if got := exe.Find("on-path", "TESTENV_UNSET"); got != filepath.Join(bin, "on-path") {
		t.Errorf("Find with the variable empty = %q, want PATH's", got)
	}
	if len(exe.missing) != 0 {
		t.Fatalf("misses for what is there: %v", exe.missing)
	}
	for _, miss := range []struct{ name, env string }{
		{"on-path", "TESTENV_NOT_EXECUTABLE"}, {"on-path", "TESTENV_DIR"}, {"absent", ""}, {"absent", "TESTENV_UNSET"},
	} {
		if got := exe.Find(miss.name, miss.env); got != "" {
			t.Errorf("Find(%s, %s) = %q, want a miss", miss.name, miss.env, got)
		}
	}
	want := []string{
		"$TESTENV_NOT_EXECUTABLE=" + filepath.Join(bin, "not-executable") + " is not an executable file",
		"$TESTENV_DIR=" + bin + " is not an executable file",
		"absent is not on PATH",
		"absent is not on PATH and $TESTENV_UNSET is not set",
	}
	if len(exe.missing) != len(want) {
		t.Fatalf("misses = %q, want %q", exe.missing, want)
	}
	for i := range want {
		if exe.missing[i] != want[i] {
			t.Errorf("miss %d = %q, want %q", i, exe.missing[i], want[i])
		}
	}
}
