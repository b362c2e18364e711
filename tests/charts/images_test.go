package charts

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The images the real node is given for the add-ons' pods (testenv.CertManagerImage,
// testenv.EnvoyGatewayImage) carry exactly the names that the charts' Deployments and
// Jobs ask for, rendered by the Helm CLI from the charts at the versions the program
// pins, with their default values (the kind stack sets none about images). A name that
// differs leaves a pod waiting for an image no registry here can give it; a pod the
// charts add later without an image built for it fails here first.
func TestAddOnImagesAreTheOnesTheChartsRun(t *testing.T) {
	testenv.SkipIfShortOrDisabled(t, envSkip, "renders the add-ons' charts with the Helm CLI")
	helmBin := requireHelm(t, "the add-on image test")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	helm := testenv.Helm{Bin: helmBin, Home: t.TempDir()}
	// As the kube-apiserver the tests run: both charts require a minimum version, and
	// helm template assumes v1.20 otherwise.
	kubeVersion := toolsKubeVersion(t)

	certManagerVersion, envoyGatewayVersion := config.DefaultCertManagerVersion, config.DefaultEnvoyGatewayVersion
	var certManagerImages []string
	for _, c := range testenv.CertManagerComponents {
		certManagerImages = append(certManagerImages, testenv.CertManagerImage(c, certManagerVersion, "").Ref)
	}
	for _, c := range []struct {
		chart              func(ctx context.Context, version, dir string) (string, error)
		version            string
		release, namespace string
		want               []string
	}{
		{testenv.CertManagerChart, certManagerVersion, "cert-manager", naming.NamespaceCertManager, certManagerImages},
		{testenv.EnvoyGatewayChart, envoyGatewayVersion, "envoy-gateway", naming.NamespaceEnvoyGateway,
			[]string{testenv.EnvoyGatewayImage(envoyGatewayVersion, "").Ref}},
	} {
		t.Run(c.release, func(t *testing.T) {
			chart, err := c.chart(ctx, c.version, t.TempDir())
			if err != nil {
				t.Fatalf("the chart at %s: %v", c.version, err)
			}
			// Hooks included: cert-manager's startupapicheck Job and Envoy Gateway's
			// certgen Job run as hooks of the install.
			out, err := helm.Run(ctx, "template", c.release, chart, "--namespace", c.namespace, "--kube-version", kubeVersion)
			if err != nil {
				t.Fatal(err)
			}
			got, err := podImages(out)
			if err != nil {
				t.Fatalf("reading what helm rendered: %v", err)
			}
			if want := slices.Sorted(slices.Values(c.want)); !slices.Equal(got, want) {
				t.Errorf("the %s chart %s runs the images %q; the node is given %q", c.release, c.version, got, want)
			}
		})
	}
}

// podImages lists, sorted and once each, the images of the containers and init
// containers of every Deployment, DaemonSet, StatefulSet and Job in rendered manifests.
func podImages(manifests []byte) ([]string, error) {
	images := map[string]bool{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		switch (&unstructured.Unstructured{Object: obj}).GetKind() {
		case "Deployment", "DaemonSet", "StatefulSet", "Job":
		default:
			continue
		}
		for _, field := range []string{"containers", "initContainers"} {
			containers, _, err := unstructured.NestedSlice(obj, "spec", "template", "spec", field)
			if err != nil {
				return nil, err
			}
			for _, c := range containers {
				if image, _ := c.(map[string]any)["image"].(string); image != "" {
					images[image] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(images)), nil
}

// toolsKubeVersion is the version of k8s.io/kubernetes that tools/kube builds the
// kube-apiserver from.
func toolsKubeVersion(t *testing.T) string {
	t.Helper()
	path := filepath.Join(testenv.RepoRoot(t), "tools", "kube", "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == "k8s.io/kubernetes" {
			return r.Mod.Version
		}
	}
	t.Fatalf("%s requires no k8s.io/kubernetes", path)
	return ""
}
