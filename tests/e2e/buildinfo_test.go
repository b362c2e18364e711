//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// The e2e test refuses a controller that was not built from the version the kind stack
// installs (requireTestedCertManagerIsInstalledOne, startEnvoyGateway). The controllers
// are dependencies of tools/controllers, not main modules, so the version comes from the
// binary's dependency list; the e2e test runs this on the real binaries, this test covers
// the cases they do not show. (A test binary records no dependencies to read.)
func TestModuleVersionInBuildInfoRefusesADirectoryReplacement(t *testing.T) {
	const info = "/bin/kcp-operator: go1.26.8\n" +
		"\tpath\tgithub.com/kcp-dev/kcp-operator/cmd/operator\n" +
		"\tmod\tgithub.com/railgrid/railgrid-kcp/tools/controllers\t(devel)\t\n" +
		"\tdep\tgithub.com/cert-manager/cert-manager\tv1.20.2\th1:abc=\n" +
		"\tdep\tgithub.com/kcp-dev/kcp-operator\tv0.0.0\n" +
		"\t=>\t/src/kcp-operator\t\n" +
		"\tdep\tk8s.io/api\tv0.36.0\n" +
		"\t=>\tk8s.io/api\tv0.36.3\th1:def=\n"
	for module, want := range map[string]string{
		"github.com/railgrid/railgrid-kcp/tools/controllers": "(devel)", // the main module
		"github.com/cert-manager/cert-manager":               "v1.20.2",
		"k8s.io/api":                                         "v0.36.3", // the replacement's version
	} {
		if got, err := moduleVersionInBuildInfo(info, module); err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %s", module, got, err, want)
		}
	}
	if v, err := moduleVersionInBuildInfo(info, "github.com/kcp-dev/kcp-operator"); err == nil || !strings.Contains(err.Error(), "no version") {
		t.Errorf("a module replaced by a directory gave %q, %v; want an error", v, err)
	}
	if v, err := moduleVersionInBuildInfo(info, "github.com/envoyproxy/gateway"); err == nil || !strings.Contains(err.Error(), "not built from") {
		t.Errorf("a module the binary was not built from gave %q, %v; want an error", v, err)
	}
}

// builtModuleVersion returns the version of module a Go binary was built from, as
// `go version -m` reports it (see moduleVersionInBuildInfo).
func builtModuleVersion(ctx context.Context, bin, module string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "version", "-m", bin).Output()
	if err != nil {
		return "", fmt.Errorf("go version -m %s: %w", bin, err)
	}
	v, err := moduleVersionInBuildInfo(string(out), module)
	if err != nil {
		return "", fmt.Errorf("%s: %w", bin, err)
	}
	return v, nil
}

// moduleVersionInBuildInfo finds module in the output of `go version -m`: the main module
// or a dependency (hack/build-tools.sh builds the controllers as dependencies of
// tools/controllers). A replaced module counts only when a module version replaced it; a
// directory says nothing about the version.
func moduleVersionInBuildInfo(buildInfo, module string) (string, error) {
	lines := strings.Split(buildInfo, "\n")
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) < 3 || (f[0] != "mod" && f[0] != "dep") || f[1] != module {
			continue
		}
		if i+1 < len(lines) {
			if r := strings.Fields(lines[i+1]); len(r) >= 2 && r[0] == "=>" {
				if len(r) < 3 || !strings.HasPrefix(r[2], "v") {
					return "", fmt.Errorf("built from %s replaced by %s, which has no version", module, r[1])
				}
				return r[2], nil
			}
		}
		return f[2], nil
	}
	return "", fmt.Errorf("not built from module %s:\n%s", module, buildInfo)
}
