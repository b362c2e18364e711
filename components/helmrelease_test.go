package components

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/config"
)

// releaseMocks records what the engine receives for each resource and answers a Helm
// release with the status object the provider returns.
type releaseMocks struct {
	mu       sync.Mutex
	inputs   map[string]resource.PropertyMap
	versions map[string]string
}

func (m *releaseMocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inputs[args.Name] = args.Inputs
	m.versions[args.Name] = args.RegisterRPC.GetVersion()
	out := args.Inputs.Copy()
	out["status"] = resource.NewObjectProperty(resource.PropertyMap{
		"status": resource.NewStringProperty("deployed"), "revision": resource.NewNumberProperty(1),
	})
	return args.Name + "-id", out, nil
}

func (m *releaseMocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return args.Args, nil
}

// HelmRelease sends what the SDK's helmv3.NewRelease sends: the provider's property names,
// compat "true" (the state of existing stacks holds it) and the provider version the
// Kubernetes SDK pins; and it reads Helm's status back.
func TestHelmReleaseSendsTheSDKsInputs(t *testing.T) {
	mocks := &releaseMocks{inputs: map[string]resource.PropertyMap{}, versions: map[string]string{}}
	statuses := make(chan string, 2)
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		repo, err := NewHelmRelease(ctx, "from-repo", &HelmReleaseArgs{
			Name: pulumi.String("cert-manager"), Namespace: pulumi.String("cert-manager"),
			Chart: pulumi.String("cert-manager"), Version: pulumi.String("v1.19.2"),
			Repo:            pulumi.String("https://charts.example.org"),
			Values:          pulumi.Map{"crds": pulumi.Map{"enabled": pulumi.Bool(true)}},
			CreateNamespace: true, Timeout: 600,
		})
		if err != nil {
			return err
		}
		path, err := NewHelmRelease(ctx, "from-path", &HelmReleaseArgs{Chart: pulumi.String("/charts/kcp-operator")})
		if err != nil {
			return err
		}
		for _, r := range []*HelmRelease{repo, path} {
			r.HelmStatus().ApplyT(func(s string) string { statuses <- s; return s })
		}
		return nil
	}, pulumi.WithMocks("railgrid-kcp", "test", mocks))
	if err != nil {
		t.Fatal(err)
	}
	close(statuses)
	var got []string
	for s := range statuses {
		got = append(got, s)
	}
	if len(got) != 2 || got[0] != "deployed" || got[1] != "deployed" {
		t.Errorf("HelmStatus of the two releases = %q, want the provider's status.status of each (deployed)", got)
	}

	want := resource.NewPropertyMapFromMap(map[string]interface{}{
		"name": "cert-manager", "namespace": "cert-manager", "chart": "cert-manager", "version": "v1.19.2",
		"repositoryOpts":  map[string]interface{}{"repo": "https://charts.example.org"},
		"values":          map[string]interface{}{"crds": map[string]interface{}{"enabled": true}},
		"createNamespace": true, "timeout": 600, "compat": "true",
	})
	if got := mocks.inputs["from-repo"]; !got.DeepEquals(want) {
		t.Errorf("inputs of a release from a repository:\n got %v\nwant %v", got, want)
	}
	wantPath := resource.NewPropertyMapFromMap(map[string]interface{}{"chart": "/charts/kcp-operator", "compat": "true"})
	if got := mocks.inputs["from-path"]; !got.DeepEquals(wantPath) {
		t.Errorf("inputs of a release from a chart path (unset fields must stay unset):\n got %v\nwant %v", got, wantPath)
	}
	sdk := requiredVersion(t, "github.com/pulumi/pulumi-kubernetes/sdk/v4")
	for name, v := range mocks.versions {
		if "v"+v != sdk {
			t.Errorf("%s: provider version %q, want the Kubernetes SDK's own (%s), as its constructors pin it", name, v, sdk)
		}
	}
}

// requiredVersion is the version of module in the repository's go.mod.
func requiredVersion(t *testing.T, module string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require ")); len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("go.mod does not require %s", module)
	return ""
}

// A chart's source becomes the release's chart and repositoryOpts: from an https
// repository the chart's name, with repo and (only when set) caFile; from an oci:// one
// the reference <repository>/<name>, with no repositoryOpts at all.
func TestHelmReleaseTakesItsChartFromASource(t *testing.T) {
	mocks := &releaseMocks{inputs: map[string]resource.PropertyMap{}, versions: map[string]string{}}
	sources := map[string]config.ChartSource{
		"https-with-ca": {Repository: "https://charts.mirror.example.com/jetstack", CAFile: "certs/mirror-ca.pem"},
		"https":         {Repository: "https://charts.jetstack.io"},
		"oci":           {Repository: "oci://registry.mirror.example.com/jetstack/"},
	}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		for name, source := range sources {
			args := &HelmReleaseArgs{}
			args.setChart("cert-manager", source)
			if _, err := NewHelmRelease(ctx, name, args); err != nil {
				return err
			}
		}
		_, err := NewHelmRelease(ctx, "ca-without-repo", &HelmReleaseArgs{Chart: pulumi.String("oci://registry.example.com/c"), CAFile: pulumi.String("ca.pem")})
		if err == nil || !strings.Contains(err.Error(), "CAFile") {
			t.Errorf("a CA file without a repository: error %v, want one that names CAFile", err)
		}
		return nil
	}, pulumi.WithMocks("railgrid-kcp", "test", mocks))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]resource.PropertyMap{
		"https-with-ca": resource.NewPropertyMapFromMap(map[string]interface{}{"chart": "cert-manager", "compat": "true",
			"repositoryOpts": map[string]interface{}{"repo": "https://charts.mirror.example.com/jetstack", "caFile": "certs/mirror-ca.pem"}}),
		"https": resource.NewPropertyMapFromMap(map[string]interface{}{"chart": "cert-manager", "compat": "true",
			"repositoryOpts": map[string]interface{}{"repo": "https://charts.jetstack.io"}}),
		"oci": resource.NewPropertyMapFromMap(map[string]interface{}{"chart": "oci://registry.mirror.example.com/jetstack/cert-manager", "compat": "true"}),
	}
	for name, w := range want {
		if got := mocks.inputs[name]; !got.DeepEquals(w) {
			t.Errorf("%s:\n got %v\nwant %v", name, got, w)
		}
	}
	if _, declared := mocks.inputs["ca-without-repo"]; declared {
		t.Error("a release with a CA file and no repository was declared")
	}
}
