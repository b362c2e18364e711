package tests

import (
	"strings"
	"testing"
)

// testkitPath is the tests' support (internal/testkit): the fakes, the test PKI, the
// real servers. Go's internal rule lets every package of the module import it, so these
// tests keep the program from doing so.
const testkitPath = modulePath + "/internal/testkit"

func isTestkit(pkg string) bool {
	return pkg == testkitPath || strings.HasPrefix(pkg, testkitPath+"/")
}

// No program links the tests' support: neither main.go nor any command (cmd/plan with
// its mock engine among them) depends on a testkit package, directly or through
// another.
func TestNoProgramLinksTheTestkit(t *testing.T) {
	out := goOutput(t, "..", "list", "-deps", "-f", "{{.ImportPath}}", ".", "./cmd/...")
	if !strings.Contains(out, modulePath+"/cmd/plan\n") {
		t.Fatalf("go list -deps . ./cmd/... does not list cmd/plan:\n%s", out)
	}
	for _, dep := range strings.Fields(out) {
		if isTestkit(dep) {
			// Name who brings it in.
			importers := goOutput(t, "..", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".", "./cmd/...")
			var by []string
			for _, line := range strings.Split(strings.TrimSpace(importers), "\n") {
				fields := strings.Fields(line)
				for _, imp := range fields[1:] {
					if imp == dep {
						by = append(by, fields[0])
					}
				}
			}
			t.Errorf("the program links %s (imported by %s): test support must stay out of main.go and cmd/...", dep, strings.Join(by, ", "))
		}
	}
}

// Only tests and testkit itself import testkit: no package of the module outside
// internal/testkit imports it from a file that is not a _test.go file.
func TestOnlyTestsImportTheTestkit(t *testing.T) {
	out := goOutput(t, "..", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	var importers int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		if isTestkit(pkg) {
			continue
		}
		for _, imp := range imports {
			if isTestkit(imp) {
				t.Errorf("%s imports %s outside its _test.go files: only tests may use the test support", pkg, imp)
			}
		}
	}
	// The check above sees the non-test imports only; that the tests' imports are there
	// to see shows it reads the packages it should.
	tests := goOutput(t, "..", "list", "-f", `{{range .TestImports}}{{.}} {{end}}{{range .XTestImports}}{{.}} {{end}}`, "./...")
	for _, imp := range strings.Fields(tests) {
		if isTestkit(imp) {
			importers++
		}
	}
	if importers == 0 {
		t.Fatal("no test imports internal/testkit: the check reads the wrong packages")
	}
}
