package tests

import (
	"strings"
	"testing"
)

const modulePath = "github.com/railgrid/railgrid-kcp"

// The layers of the program, bottom first: a package imports only packages of its own
// layer or of the layers below it (docs/architecture.md, "Repository layout").
var layers = []string{"naming", "config", "components", "internal", "cmd", "tests"}

// layerOf is the index in layers of a package of this module; main.go is with cmd.
func layerOf(t *testing.T, pkg string) int {
	t.Helper()
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, modulePath), "/")
	top, _, _ := strings.Cut(rel, "/")
	if rel == "" {
		top = "cmd" // main.go composes the program as the commands do
	}
	for i, layer := range layers {
		if top == layer {
			return i
		}
	}
	t.Fatalf("package %s is in no layer: add its directory to the layers of tests/layering_test.go", pkg)
	return -1
}

// No import runs back up the layers: naming imports nothing of the program, config
// imports only naming, components neither internal nor cmd, and so on.
func TestNoImportRunsBackUpTheLayers(t *testing.T) {
	out := goOutput(t, "..", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		for _, imp := range imports {
			if imp != modulePath && !strings.HasPrefix(imp, modulePath+"/") {
				continue
			}
			if layerOf(t, imp) > layerOf(t, pkg) {
				t.Errorf("%s imports %s: an import runs back up from %s to %s", pkg, imp, layers[layerOf(t, pkg)], layers[layerOf(t, imp)])
			}
		}
	}
}

// naming is at the bottom of the tree: everything may import it because it imports
// nothing but the standard library.
func TestNamingIsALeafPackage(t *testing.T) {
	out := goOutput(t, "..", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./naming")
	for _, dep := range strings.Fields(out) {
		if dep != modulePath+"/naming" {
			t.Errorf("naming depends on %s; it must import only the standard library", dep)
		}
	}
}

// cmd/verify and cmd/kcpadmin read a stack file and look objects up by their names: they
// need the config and the names, not the Pulumi SDK, and neither do the fakes verify's
// checks are tested against (internal/testkit/verifytest), which take the names from
// naming, not from the components. Only config/stackconfig, which loads the config
// inside a running program, may bring Pulumi into the config. The etcd jobs' steps
// (components/etcdjobs) are the program's and cmd/etcdrestore's alike, so neither they
// nor cmd/etcdrestore link Pulumi.
func TestVerifyDoesNotLinkThePulumiSDK(t *testing.T) {
	for _, pkg := range []string{"./cmd/verify", "./cmd/kcpadmin", "./internal/testkit/verifytest", "./config", "./naming", "./components/etcdjobs", "./cmd/etcdrestore", "./internal/etcdrestore"} {
		out := goOutput(t, "..", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", pkg)
		var linked int
		var importers []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			fields := strings.Fields(line)
			if strings.HasPrefix(fields[0], "github.com/pulumi/") {
				linked++
				continue
			}
			if !strings.HasPrefix(fields[0], modulePath) {
				continue
			}
			for _, imp := range fields[1:] {
				if strings.HasPrefix(imp, "github.com/pulumi/") {
					importers = append(importers, fields[0]+" imports "+imp)
				}
			}
		}
		if linked > 0 {
			t.Errorf("%s links %d packages of the Pulumi SDK; brought in by:\n%s", pkg, linked, strings.Join(importers, "\n"))
		}
	}
}
