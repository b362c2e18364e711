package e2e

import (
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
