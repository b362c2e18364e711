//go:build linux

package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

// stackOverlay is what a run changes in the shipped Pulumi.kind.yaml: the chart sources
// (the test's mirrors on loopback, as on an offline machine) and, for killed-up only,
// cert-manager declared present.
type stackOverlay struct {
	mirrors testenv.KindChartMirrors
	// certManagerPresent: the test runs cert-manager's controller itself, without its own
	// approver (killed-up, approver_test.go); the stack then installs no cert-manager.
	certManagerPresent bool
	// oidcCA is the hub's Dex's CA (PEM), which the lifecycle's stack gives kcp.
	oidcCA string
}

// overlayKeys are the config keys, as dotted paths, in which the e2e stack file differs
// from the shipped Pulumi.kind.yaml, each with the reason: what an offline machine must
// change. Everything else is the user's file as shipped (the kubeconfig comes from
// $KUBECONFIG and its context is the one the shipped file names). checkOverlay fails
// when the file changes a key not listed here, or leaves a listed key unchanged.
var overlayKeys = map[string]string{
	"operator.chartRepository":          "the kcp-operator chart from the test's Helm repository on loopback, an offline machine's mirror",
	"operator.chartCAFile":              "that repository serves with a certificate of the test's CA",
	"kind.certManagerChart.repository":  "cert-manager's chart from the same Helm repository",
	"kind.certManagerChart.caFile":      "the same CA",
	"kind.envoyGatewayChart.repository": "Envoy Gateway's chart from the test's OCI registry on loopback (its CA reaches the CLI through SSL_CERT_FILE, as the README says)",
	"oidc.caCertificates":               "the hub's Dex serves the issuer's name with a certificate from a CA of the run's own",
	"hub.copySchedule":                  "every minute, so that the renewal step waits a minute for the copy, not the default's ten (renewals_test.go)",
}

// killedUpOverlayKeys are killed-up's: cert-manager is declared present instead of
// installed from its chart, because kill 3 needs cert-manager without its own approver
// and a test approver in its place, which the chart's release, with the values the
// program gives it, cannot run (approver_test.go).
var killedUpOverlayKeys = map[string]string{
	"operator.chartRepository":          overlayKeys["operator.chartRepository"],
	"operator.chartCAFile":              overlayKeys["operator.chartCAFile"],
	"kind.envoyGatewayChart.repository": overlayKeys["kind.envoyGatewayChart.repository"],
	"kind.certManagerPresent":           "the test runs cert-manager's controller without its own approver, so it can hold the hub credential's request until kill 3 has landed",
}

// keys are the overlay's keys with their reasons.
func (o stackOverlay) keys() map[string]string {
	if o.certManagerPresent {
		return killedUpOverlayKeys
	}
	if o.oidcCA == "" {
		keys := maps.Clone(overlayKeys)
		delete(keys, "oidc.caCertificates")
		return keys
	}
	return overlayKeys
}

// writeStackConfig writes the e2e stack file: the shipped kind stack file with the
// overlay's keys set.
func writeStackConfig(kindFile, out string, o stackOverlay) error {
	data, err := os.ReadFile(kindFile)
	if err != nil {
		return err
	}
	var file map[string]any
	if err := yaml.Unmarshal(data, &file); err != nil {
		return fmt.Errorf("%s: %w", kindFile, err)
	}
	cfg, _ := file["config"].(map[string]any)
	if cfg == nil {
		return fmt.Errorf("%s has no config", kindFile)
	}
	key := func(k string) string { return config.Project + ":" + k }
	kind, _ := cfg[key("kind")].(map[string]any)
	if kind == nil {
		kind = map[string]any{}
	}
	repo, registry := o.mirrors.Repository, o.mirrors.Registry
	if o.certManagerPresent {
		kind["certManagerPresent"] = true
	} else {
		kind["certManagerChart"] = map[string]any{"repository": repo.URL, "caFile": repo.CAFile}
	}
	kind["envoyGatewayChart"] = map[string]any{"repository": registry.Source().Repository}
	cfg[key("kind")] = kind
	operator, _ := cfg[key("operator")].(map[string]any)
	if operator == nil {
		operator = map[string]any{}
	}
	operator["chartRepository"], operator["chartCAFile"] = repo.URL, repo.CAFile
	cfg[key("operator")] = operator
	if !o.certManagerPresent {
		hub, _ := cfg[key("hub")].(map[string]any)
		if hub == nil {
			hub = map[string]any{}
		}
		hub["copySchedule"] = renewalCopySchedule
		cfg[key("hub")] = hub
	}
	if o.oidcCA != "" {
		oidc, _ := cfg[key("oidc")].(map[string]any)
		if oidc == nil {
			oidc = map[string]any{}
		}
		oidc["caCertificates"] = o.oidcCA
		cfg[key("oidc")] = oidc
	}
	encoded, err := yaml.Marshal(map[string]any{"config": cfg})
	if err != nil {
		return err
	}
	header := "# Written by tests/e2e from Pulumi.kind.yaml: the charts from the test's mirrors on loopback"
	if o.certManagerPresent {
		header += ",\n# cert-manager present (the test runs its controller)"
	}
	return os.WriteFile(out, append([]byte(header+".\n"), encoded...), 0o600)
}

// checkOverlay fails the test when the stack file differs from the shipped one in a key
// that the overlay does not list, or leaves a listed key as shipped: the e2e runs what a
// user runs, and the list says exactly what it changes.
func checkOverlay(t *testing.T, shippedFile, stackFile string, listed map[string]string) {
	t.Helper()
	changed, err := overlayDiff(shippedFile, stackFile, listed)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the e2e stack file is the shipped Pulumi.kind.yaml with %v set", changed)
}

// overlayDiff returns the keys in which stackFile differs from shippedFile, or an error
// naming the keys that listed does not hold and those it holds that are unchanged.
func overlayDiff(shippedFile, stackFile string, listed map[string]string) ([]string, error) {
	read := func(path string) (map[string]any, error) {
		var f struct {
			Config map[string]any `yaml:"config"`
		}
		data, err := os.ReadFile(path)
		if err == nil {
			err = yaml.Unmarshal(data, &f)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return f.Config, nil
	}
	shipped, err := read(shippedFile)
	if err != nil {
		return nil, err
	}
	stack, err := read(stackFile)
	if err != nil {
		return nil, err
	}
	var changed []string
	diffPaths("", shipped, stack, &changed)
	sort.Strings(changed)
	var unlisted, unchanged []string
	for _, k := range changed {
		if _, ok := listed[k]; !ok {
			unlisted = append(unlisted, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(listed)) {
		if !slices.Contains(changed, k) {
			unchanged = append(unchanged, k)
		}
	}
	if len(unlisted) > 0 || len(unchanged) > 0 {
		return changed, fmt.Errorf("the e2e stack file changes %v of the shipped Pulumi.kind.yaml, which the overlay does not list, and leaves %v it lists as shipped (overlay: %v)",
			unlisted, unchanged, slices.Sorted(maps.Keys(listed)))
	}
	return changed, nil
}

// diffPaths appends the dotted paths (without the project's prefix) at which a and b
// differ; mappings are compared key by key, anything else as a whole.
func diffPaths(prefix string, a, b map[string]any, out *[]string) {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		path := strings.TrimPrefix(k, config.Project+":")
		if prefix != "" {
			path = prefix + "." + k
		}
		am, aIsMap := a[k].(map[string]any)
		bm, bIsMap := b[k].(map[string]any)
		switch {
		case aIsMap && bIsMap:
			diffPaths(path, am, bm, out)
		case aIsMap && b[k] == nil:
			diffPaths(path, am, map[string]any{}, out)
		case bIsMap && a[k] == nil:
			diffPaths(path, map[string]any{}, bm, out)
		case !reflect.DeepEqual(a[k], b[k]):
			*out = append(*out, path)
		}
	}
}

// missingProjectConfig returns the config keys that Pulumi.yaml declares without a
// default or value and that the stack file does not set: the CLI refuses to run such a
// stack ("Stack '<name>' is missing configuration value '<key>'").
func missingProjectConfig(projectFile, stackFile string) ([]string, error) {
	var project struct {
		Config map[string]map[string]any `yaml:"config"`
	}
	data, err := os.ReadFile(projectFile)
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &project); err != nil {
		return nil, err
	}
	var stack struct {
		Config map[string]any `yaml:"config"`
	}
	if data, err = os.ReadFile(stackFile); err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &stack); err != nil {
		return nil, err
	}
	var missing []string
	for key, decl := range project.Config {
		_, hasDefault := decl["default"]
		_, hasValue := decl["value"]
		full := key
		if !strings.Contains(key, ":") {
			full = config.Project + ":" + key
		}
		if _, set := stack.Config[full]; !set && !hasDefault && !hasValue {
			missing = append(missing, key)
		}
	}
	sort.Strings(missing)
	return missing, nil
}

// dropProjectConfig removes config declarations from the workspace's Pulumi.yaml: the
// workaround for a project file the CLI refuses with the stack's config.
func (s *e2eStack) dropProjectConfig(keys []string) error {
	path := filepath.Join(s.dir, "Pulumi.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var project map[string]any
	if err := yaml.Unmarshal(data, &project); err != nil {
		return err
	}
	cfg, _ := project["config"].(map[string]any)
	for _, k := range keys {
		delete(cfg, k)
	}
	out, err := yaml.Marshal(project)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// TestTheE2EStackFileChangesExactlyItsListedKeys writes both runs' stack files, as the
// end-to-end test does, for mirrors on loopback (no server: only their addresses and CA
// file), and checks that each changes exactly the keys its overlay lists, that the
// program's config accepts it, and that a key outside the list, or a listed key left as
// shipped, is refused.
func TestTheE2EStackFileChangesExactlyItsListedKeys(t *testing.T) {
	root := testenv.RepoRoot(t)
	shipped := filepath.Join(root, "Pulumi.kind.yaml")
	dir := t.TempDir()
	ca, err := pki.NewCA("overlay-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	mirrors := testenv.KindChartMirrors{
		Repository: &testenv.ChartRepository{URL: "https://127.0.0.1:8443", CAFile: caFile},
		Registry:   &testenv.ChartRegistry{Repository: config.OCIScheme + "127.0.0.1:8444/charts", CAFile: caFile},
	}
	// The lifecycle's overlay (with the hub's Dex's CA) and killed-up's.
	for _, o := range []stackOverlay{{mirrors: mirrors, oidcCA: string(ca.PEM)}, {mirrors: mirrors, certManagerPresent: true}} {
		out := filepath.Join(dir, "Pulumi.e2e.yaml")
		if err := writeStackConfig(shipped, out, o); err != nil {
			t.Fatal(err)
		}
		changed, err := overlayDiff(shipped, out, o.keys())
		if err != nil {
			t.Errorf("certManagerPresent=%v: %v", o.certManagerPresent, err)
		}
		if _, err := config.ParseStackFile(out); err != nil {
			t.Errorf("certManagerPresent=%v: the program refuses the e2e stack file: %v", o.certManagerPresent, err)
		}
		for k, why := range o.keys() {
			if strings.TrimSpace(why) == "" {
				t.Errorf("overlay key %s has no reason", k)
			}
		}
		t.Logf("certManagerPresent=%v: %v", o.certManagerPresent, changed)

		// One key more than listed, and one listed key fewer, are both refused.
		fewer := map[string]string{}
		for k, v := range o.keys() {
			if k != "operator.chartCAFile" {
				fewer[k] = v
			}
		}
		if _, err := overlayDiff(shipped, out, fewer); err == nil || !strings.Contains(err.Error(), "[operator.chartCAFile]") {
			t.Errorf("a changed key the overlay does not list is not refused: %v", err)
		}
		more := map[string]string{"etcd.members": "not changed"}
		for k, v := range o.keys() {
			more[k] = v
		}
		if _, err := overlayDiff(shipped, out, more); err == nil || !strings.Contains(err.Error(), "[etcd.members]") {
			t.Errorf("a listed key left as shipped is not refused: %v", err)
		}
	}
}
