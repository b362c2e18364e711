package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/tests/internal/testenv"
)

// TestTheE2EStackFileChangesExactlyItsListedKeys writes both runs' stack files, as the
// end-to-end test does, for mirrors on loopback (no server: only their addresses and CA
// file), and checks that each changes exactly the keys its overlay lists, that the
// program's config accepts it, and that a key outside the list, or a listed key left as
// shipped, is refused.
func TestTheE2EStackFileChangesExactlyItsListedKeys(t *testing.T) {
	root := testenv.RepoRoot(t)
	shipped := filepath.Join(root, "Pulumi.kind.yaml")
	dir := t.TempDir()
	ca, err := testenv.NewCA("overlay-test-ca")
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
	for _, o := range []stackOverlay{{mirrors: mirrors}, {mirrors: mirrors, certManagerPresent: true}} {
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
