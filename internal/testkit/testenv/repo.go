package testenv

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Directories the tests read outside the repository: ../shared next to it, unless
// these variables point elsewhere.
const (
	// EnvCRDsDir overrides ../shared/reference/crds, the upstream CRDs.
	EnvCRDsDir = "RAILGRID_CRDS_DIR"
	// EnvThirdpartyDir overrides ../shared/thirdparty, the upstream sources and charts.
	EnvThirdpartyDir = "RAILGRID_THIRDPARTY_DIR"
)

// rootModule is the go.mod line that marks the repository root.
const rootModule = "module github.com/railgrid/railgrid-kcp\n"

// errNoRepoRoot is returned when no go.mod of this module is found above a directory.
var errNoRepoRoot = errors.New("no go.mod of module github.com/railgrid/railgrid-kcp above the working directory")

// RepoRoot is the repository root above the working directory (the package directory
// under go test); it fails the test if there is none.
func RepoRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := findRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// findRepoRoot walks up from dir to the directory whose go.mod declares this module;
// go.mod files of the tools' own modules (tools/...) are passed over.
func findRepoRoot(dir string) (string, error) {
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte(rootModule)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errNoRepoRoot
		}
		dir = parent
	}
}

// CRDsDir is $RAILGRID_CRDS_DIR, or ../shared/reference/crds next to the repository.
func CRDsDir(root string) string {
	if d := os.Getenv(EnvCRDsDir); d != "" {
		return d
	}
	return filepath.Join(filepath.Dir(root), "shared", "reference", "crds")
}

// ThirdpartyDir is $RAILGRID_THIRDPARTY_DIR, or ../shared/thirdparty next to the
// repository.
func ThirdpartyDir(root string) string {
	if d := os.Getenv(EnvThirdpartyDir); d != "" {
		return d
	}
	return filepath.Join(filepath.Dir(root), "shared", "thirdparty")
}

// SkipIfShortOrDisabled skips a test that runs real servers or tools under go test
// -short, saying what it runs, or when its skip variable is "1".
func SkipIfShortOrDisabled(t testing.TB, skipEnv, runs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s; skipped with -short", runs)
	}
	if os.Getenv(skipEnv) == "1" {
		t.Skipf("%s=1", skipEnv)
	}
}
