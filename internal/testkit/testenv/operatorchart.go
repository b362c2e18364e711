package testenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/config"
)

// helmFileLimit is the size above which Helm refuses a chart file (5 MiB).
const helmFileLimit = 5 << 20

// OperatorChart generates, in dir, the kcp-operator chart the stack installs, made
// from the real chart templates in <thirdparty>/kcp-operator-chart (0.7.7, the newest
// available offline) brought to the pinned 0.7.10:
//   - Chart.yaml: version 0.7.10, appVersion v0.10.0;
//   - templates/crds.yaml and templates/crds-compiled.yaml: the operator.kcp.io and the
//     deploy.operator.kcp.io CRDs from <crdsDir>, inside {{- if .Values.crds.create }}, as
//     two files like upstream (together they exceed Helm's 5 MiB per file);
//   - templates/rbac.yaml: the chart's ClusterRole with its rules taken from the built
//     operator's own config/rbac/role.yaml (0.7.7 grants nothing on
//     deploy.operator.kcp.io, which the running operator writes);
//   - every other template (ServiceAccount, RBAC bindings, Deployment, Service) as is.
//
// It returns the chart directory.
func OperatorChart(dir, crdsDir, thirdparty string) (string, error) {
	src := filepath.Join(thirdparty, "kcp-operator-chart")
	chart := filepath.Join(dir, config.OperatorChartName)
	if err := os.MkdirAll(filepath.Join(chart, "templates"), 0o700); err != nil {
		return "", err
	}
	chartYAML, err := os.ReadFile(filepath.Join(src, "Chart.yaml"))
	if err != nil {
		return "", fmt.Errorf("the upstream chart (set %s): %w", EnvThirdpartyDir, err)
	}
	chartYAML, err = setChartField(chartYAML, "version", config.DefaultOperatorChartVersion)
	if err != nil {
		return "", err
	}
	if chartYAML, err = setChartField(chartYAML, "appVersion", fmt.Sprintf("%q", config.DefaultOperatorImageTag)); err != nil {
		return "", err
	}
	files := map[string][]byte{"Chart.yaml": chartYAML}
	if files["values.yaml"], err = os.ReadFile(filepath.Join(src, "values.yaml")); err != nil {
		return "", err
	}
	templates, err := os.ReadDir(filepath.Join(src, "templates"))
	if err != nil {
		return "", err
	}
	for _, e := range templates {
		if e.IsDir() || e.Name() == "crds.yaml" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, "templates", e.Name()))
		if err != nil {
			return "", err
		}
		files["templates/"+e.Name()] = data
	}
	rules, err := operatorRoleRules(filepath.Join(thirdparty, "kcp-operator", "config", "rbac", "role.yaml"))
	if err != nil {
		return "", err
	}
	if files["templates/rbac.yaml"], err = replaceClusterRoleRules(files["templates/rbac.yaml"], rules); err != nil {
		return "", err
	}
	for file, folder := range map[string]string{"templates/crds.yaml": "kcp-operator", "templates/crds-compiled.yaml": "kcp-operator-deploy"} {
		if files[file], err = crdTemplate(filepath.Join(crdsDir, folder)); err != nil {
			return "", err
		}
	}
	for name, content := range files {
		if len(content) > helmFileLimit {
			return "", fmt.Errorf("chart file %s is %d bytes; Helm refuses files over %d", name, len(content), helmFileLimit)
		}
		if err := os.WriteFile(filepath.Join(chart, name), content, 0o600); err != nil {
			return "", err
		}
	}
	return chart, nil
}

// setChartField replaces a top-level "key: value" line of Chart.yaml.
func setChartField(chartYAML []byte, key, value string) ([]byte, error) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `:.*$`)
	if !re.Match(chartYAML) {
		return nil, fmt.Errorf("the upstream Chart.yaml has no %s", key)
	}
	return re.ReplaceAll(chartYAML, []byte(key+": "+value)), nil
}

// crdTemplate concatenates the CRDs of a folder into one template guarded by crds.create.
func crdTemplate(folder string) ([]byte, error) {
	files, err := filepath.Glob(filepath.Join(folder, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", folder)
	}
	sort.Strings(files)
	var b bytes.Buffer
	b.WriteString("{{- if .Values.crds.create }}\n")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if bytes.Contains(data, []byte("{{")) {
			return nil, fmt.Errorf("%s contains template delimiters", f)
		}
		if data, err = withoutDescriptions(data); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	b.WriteString("{{- end }}\n")
	return b.Bytes(), nil
}

// withoutDescriptions drops the description texts from a CRD's schemas. Helm keeps each
// release (chart templates and rendered manifest, gzipped) in a Secret, which the API
// server caps at 1 MiB; with the descriptions the two CRD files do not fit ("Secret
// sh.helm.release.v1.kcp-operator.v1 is invalid: data: Too long"). Descriptions are
// documentation only: the API server validates the same schema without them.
func withoutDescriptions(crd []byte) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(crd, &doc); err != nil {
		return nil, err
	}
	var strip func(v any, inProperties bool)
	strip = func(v any, inProperties bool) {
		switch x := v.(type) {
		case map[string]any:
			if !inProperties {
				if _, ok := x["description"].(string); ok {
					delete(x, "description")
				}
			}
			for k, child := range x {
				// The keys of a properties map are field names, one may be "description".
				strip(child, !inProperties && (k == "properties" || k == "patternProperties"))
			}
		case []any:
			for _, child := range x {
				strip(child, false)
			}
		}
	}
	versions, _ := doc["spec"].(map[string]any)["versions"].([]any)
	for _, v := range versions {
		strip(v, false)
	}
	return yaml.Marshal(doc)
}

// operatorRoleRules returns the rules of the operator's generated ClusterRole, as YAML.
func operatorRoleRules(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the operator's RBAC (set %s): %w", EnvThirdpartyDir, err)
	}
	var role struct {
		Kind  string           `yaml:"kind"`
		Rules []map[string]any `yaml:"rules"`
	}
	if err := yaml.Unmarshal(data, &role); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if role.Kind != "ClusterRole" || len(role.Rules) == 0 {
		return nil, fmt.Errorf("%s is not a ClusterRole with rules", path)
	}
	return yaml.Marshal(map[string]any{"rules": role.Rules})
}

// replaceClusterRoleRules swaps the rules of the chart's ClusterRole (the first
// document of rbac.yaml, up to the ClusterRoleBinding's guard) for rules.
func replaceClusterRoleRules(rbac, rules []byte) ([]byte, error) {
	const guard = "{{- if .Values.serviceAccount.create }}"
	text := string(rbac)
	start := strings.Index(text, "\nrules:\n")
	end := strings.Index(text, guard)
	if start < 0 || end < start || !strings.Contains(text[:start], "kind: ClusterRole\n") {
		return nil, fmt.Errorf("the upstream rbac.yaml does not start with a ClusterRole followed by %q", guard)
	}
	return []byte(text[:start+1] + string(rules) + text[end:]), nil
}
