package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/config"
)

// The Go modules whose sources hold the add-ons' charts: cert-manager's is
// deploy/charts/cert-manager, Envoy Gateway's charts/gateway-helm. The module cache keeps
// them by exact version and the Go module proxy serves them, so a test builds the chart
// of the very version the kind stack pins.
const (
	CertManagerModule  = "github.com/cert-manager/cert-manager"
	EnvoyGatewayModule = "github.com/envoyproxy/gateway"
)

// ModuleDir returns the directory of module at version in the module cache, downloading
// it first if needed.
func ModuleDir(ctx context.Context, module, version string) (string, error) {
	moduleAtVersion := module + "@" + version
	dl := exec.CommandContext(ctx, "go", "mod", "download", "-json", moduleAtVersion)
	dl.Env = append(os.Environ(), "GOFLAGS=")
	dl.Dir = os.TempDir() // outside any module: nothing is written to a go.mod or go.sum
	out, err := dl.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %v\n%s", moduleAtVersion, err, out)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no module directory (%v %s)", moduleAtVersion, err, info.Error)
	}
	return info.Dir, nil
}

// CertManagerChart writes cert-manager's chart at version into dir/cert-manager as
// cert-manager's release builds it (make/manifests.mk in the module): the templates,
// values.yaml and values.schema.json as they are; README.md from README.template.md
// with the version; Chart.yaml from Chart.template.yaml with version and appVersion set
// to the version, the artifacthub.io/prerelease annotation filled in and the signing
// key of signkey_annotation.txt added. values.yaml has no placeholder: the images' tag
// is the chart's appVersion. It returns the chart directory.
func CertManagerChart(ctx context.Context, version, dir string) (string, error) {
	module, err := ModuleDir(ctx, CertManagerModule, version)
	if err != nil {
		return "", err
	}
	src := filepath.Join(module, "deploy", "charts", "cert-manager")
	chart := filepath.Join(dir, config.CertManagerChartName)
	if err := os.RemoveAll(chart); err != nil {
		return "", err
	}
	if err := os.CopyFS(filepath.Join(chart, "templates"), os.DirFS(filepath.Join(src, "templates"))); err != nil {
		return "", err
	}
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(src, name)) }
	files := map[string][]byte{}
	for _, name := range []string{"values.yaml", "values.schema.json"} {
		if files[name], err = read(name); err != nil {
			return "", err
		}
	}
	readme, err := read("README.template.md")
	if err != nil {
		return "", err
	}
	files["README.md"] = []byte(strings.ReplaceAll(string(readme), "{{RELEASE_VERSION}}", version))
	tmpl, err := read("Chart.template.yaml")
	if err != nil {
		return "", err
	}
	signKey, err := read("signkey_annotation.txt")
	if err != nil {
		return "", err
	}
	if files["Chart.yaml"], err = certManagerChartYAML(tmpl, string(signKey), version); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Join(src, "Chart.template.yaml"), err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(chart, name), data, 0o600); err != nil {
			return "", err
		}
	}
	return chart, nil
}

// certManagerChartYAML fills in Chart.template.yaml as the release's yq does:
// .annotations."artifacthub.io/signKey" = the signing key, .annotations."artifacthub.io/
// prerelease" = "true" or "false", .version and .appVersion = the version. A version is a
// pre-release, for the release, when its tag has a "-" (the Makefile's IS_PRERELEASE).
func certManagerChartYAML(tmpl []byte, signKey, version string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(tmpl, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a YAML mapping")
	}
	chart := doc.Content[0]
	annotations := mappingValue(chart, "annotations")
	if annotations == nil || annotations.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("no annotations")
	}
	prerelease := fmt.Sprint(strings.Contains(version, "-"))
	for _, set := range []struct {
		node       *yaml.Node
		key, value string
	}{
		{annotations, "artifacthub.io/signKey", signKey},
		{annotations, "artifacthub.io/prerelease", prerelease},
		{chart, "version", version},
		{chart, "appVersion", version},
	} {
		setMappingString(set.node, set.key, set.value)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2) // as the template, and yq, indent
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	if strings.Contains(out.String(), "{{") {
		return nil, fmt.Errorf("a placeholder is left that the release fills and this test does not:\n%s", out.String())
	}
	return out.Bytes(), nil
}

// mappingValue is the value of key in a YAML mapping, or nil.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// setMappingString sets key of a YAML mapping to the string value, adding the key if
// the mapping has none; the value stays a string however it reads ("false").
func setMappingString(m *yaml.Node, key, value string) {
	if v := mappingValue(m, key); v != nil {
		v.Kind, v.Tag, v.Value = yaml.ScalarNode, "!!str", value
		return
	}
	m.Content = append(m.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value})
}

// EnvoyGatewayChart writes Envoy Gateway's chart at version into dir/gateway-helm as
// its release packages it (tools/make/helm.mk in Envoy Gateway's repository, which the
// module leaves out): values.yaml from values.tmpl.yaml with the control plane image of
// this version (docker.io/envoyproxy/gateway:<version>, pull policy IfNotPresent), and
// Chart.yaml versioned as the release (version and appVersion both the release's tag).
// The crds subchart is in the source's charts/ already. It returns the chart directory.
func EnvoyGatewayChart(ctx context.Context, version, dir string) (string, error) {
	module, err := ModuleDir(ctx, EnvoyGatewayModule, version)
	if err != nil {
		return "", err
	}
	src := filepath.Join(module, "charts", config.EnvoyGatewayChartName)
	chart := filepath.Join(dir, config.EnvoyGatewayChartName)
	if err := os.RemoveAll(chart); err != nil {
		return "", err
	}
	if err := os.CopyFS(chart, os.DirFS(src)); err != nil {
		return "", err
	}
	tmpl, err := os.ReadFile(filepath.Join(chart, "values.tmpl.yaml"))
	if err != nil {
		return "", err
	}
	values := strings.NewReplacer(
		"${GatewayImage}", EnvoyGatewayImageRef(version),
		"${GatewayImagePullPolicy}", "IfNotPresent",
	).Replace(string(tmpl))
	if strings.Contains(values, "${") {
		return "", fmt.Errorf("%s has a placeholder the test does not fill", filepath.Join(src, "values.tmpl.yaml"))
	}
	if err := os.WriteFile(filepath.Join(chart, "values.yaml"), []byte(values), 0o600); err != nil {
		return "", err
	}
	meta, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		return "", err
	}
	versioned := strings.NewReplacer("version: v0.0.0-latest", "version: "+version, `appVersion: "latest"`, `appVersion: "`+version+`"`).Replace(string(meta))
	if versioned == string(meta) {
		return "", fmt.Errorf("%s: no version placeholder to set", filepath.Join(src, "Chart.yaml"))
	}
	if err := os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte(versioned), 0o600); err != nil {
		return "", err
	}
	return chart, nil
}
