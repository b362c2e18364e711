package testenv

import (
	"strings"
	"testing"
)

// cert-manager's release fills in Chart.template.yaml with yq (make/manifests.mk): the
// version and appVersion, the pre-release annotation and the signing key; a placeholder
// left over fails rather than reaching a chart.
func TestCertManagerChartYAMLIsFilledInAsItsReleaseDoes(t *testing.T) {
	const tmpl = `apiVersion: v2
name: cert-manager
annotations:
  artifacthub.io/license: Apache-2.0
  artifacthub.io/prerelease: "{{IS_PRERELEASE}}"
# The version and appVersion fields are set automatically by the release tool
version: v0.0.0
appVersion: v0.0.0
`
	const signKey = "fingerprint: ABC\nurl: https://example.invalid/key.gpg\n"
	for _, c := range []struct{ version, prerelease string }{{"v1.20.2", "false"}, {"v1.21.0-alpha.1", "true"}} {
		out, err := certManagerChartYAML([]byte(tmpl), signKey, c.version)
		if err != nil {
			t.Fatalf("%s: %v", c.version, err)
		}
		meta, err := parseChartMetadata("Chart.yaml", out)
		if err != nil {
			t.Fatal(err)
		}
		if meta != (ChartMetadata{Name: "cert-manager", Version: c.version, AppVersion: c.version}) {
			t.Errorf("%s: Chart.yaml has %+v", c.version, meta)
		}
		for _, want := range []string{
			`artifacthub.io/prerelease: "` + c.prerelease + `"`,
			"artifacthub.io/signKey: |\n    fingerprint: ABC\n    url: https://example.invalid/key.gpg\n",
			"artifacthub.io/license: Apache-2.0",
		} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s: Chart.yaml lacks %q:\n%s", c.version, want, out)
			}
		}
	}
	if _, err := certManagerChartYAML([]byte(tmpl+"description: \"{{NEW_PLACEHOLDER}}\"\n"), signKey, "v1.20.2"); err == nil {
		t.Error("a template with a placeholder the release would fill was accepted")
	}
	if _, err := certManagerChartYAML([]byte("name: cert-manager\nversion: v0.0.0\n"), signKey, "v1.20.2"); err == nil {
		t.Error("a template without annotations was accepted")
	}
}
