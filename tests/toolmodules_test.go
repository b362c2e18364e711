package tests

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The program's tests, kube-apiserver (tools/kube) and the Kubernetes provider
// (tools/provider) all compile the Kubernetes client libraries. Go reuses a compiled
// package only when the package and everything below it are the same versions, so one
// module a version apart anywhere under k8s.io/client-go makes a cold .ci/run compile the
// whole client stack again (docs/testing.md, "Tool builds and caches").
// A tool's go.mod that drifts from the program's versions fails here.
func TestToolsShareTheProgramsKubernetesLibraries(t *testing.T) {
	shared := kubernetesLibraryModules(t)
	require.Contains(t, shared, "k8s.io/client-go", "the program builds no k8s.io/client-go package")
	for _, tool := range []string{"kube", "provider"} {
		gomod := filepath.Join("tools", tool, "go.mod")
		required := goModVersions(t, filepath.Join("..", "tools", tool))
		require.Contains(t, required, "k8s.io/client-go", "%s requires no k8s.io/client-go", gomod)
		for module, want := range shared {
			got, ok := required[module]
			if !ok {
				continue // the tool builds none of this module's packages
			}
			if got != want {
				t.Errorf("%s: %s %s, but the program builds its Kubernetes libraries with %s; "+
					"align the two, or a cold CI run compiles them twice", gomod, module, got, want)
			}
		}
	}
}

// kubernetesLibraryModules returns the module versions the program (with its tests)
// compiles its k8s.io packages and everything they import from.
func kubernetesLibraryModules(t *testing.T) map[string]string {
	t.Helper()
	var k8s []string
	for _, pkg := range strings.Fields(goOutput(t, "..", "list", "-deps", "-test", "-f", "{{if not .ForTest}}{{.ImportPath}}{{end}}", "./...")) {
		if strings.HasPrefix(pkg, "k8s.io/") {
			k8s = append(k8s, pkg)
		}
	}
	require.NotEmpty(t, k8s, "the program imports no k8s.io package")
	out := goOutput(t, "..", append([]string{"list", "-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}"}, k8s...)...)
	modules := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if path, version, ok := strings.Cut(line, " "); ok {
			modules[path] = version
		}
	}
	return modules
}

// goModVersions returns the version each module required by dir's go.mod resolves to,
// after its replace directives (a directory replacement resolves to its path).
func goModVersions(t *testing.T, dir string) map[string]string {
	t.Helper()
	type modVersion struct{ Path, Version string }
	var gomod struct {
		Require []modVersion
		Replace []struct{ Old, New modVersion }
	}
	require.NoError(t, json.Unmarshal([]byte(goOutput(t, dir, "mod", "edit", "-json")), &gomod))
	versions := map[string]string{}
	for _, r := range gomod.Require {
		versions[r.Path] = r.Version
	}
	for _, r := range gomod.Replace {
		if _, ok := versions[r.Old.Path]; !ok || (r.Old.Version != "" && r.Old.Version != versions[r.Old.Path]) {
			continue
		}
		if r.New.Version == "" {
			versions[r.Old.Path] = r.New.Path
		} else {
			versions[r.Old.Path] = r.New.Version
		}
	}
	return versions
}

func goOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr)
	}
	return string(out)
}
