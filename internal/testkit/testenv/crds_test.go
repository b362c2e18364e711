package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// upstreamCRD reads one upstream CRD file from ../shared/reference/crds (never copied
// into the repository).
func upstreamCRD(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(CRDsDir(RepoRoot(t)), rel))
	if err != nil {
		t.Fatalf("reading the upstream CRD %s: %v", rel, err)
	}
	return string(data)
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func loadedNames(t *testing.T, dir string) []string {
	t.Helper()
	crds, err := LoadCRDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, crd := range crds {
		got = append(got, crd.GetName()+"="+CRDKind(crd))
	}
	return got
}

// LoadCRDs reads the upstream CRD directory the conformance and end-to-end tests use:
// every subdirectory, in path order, multi-document files included, README.md passed over.
func TestLoadCRDsReadsTheUpstreamDirectoryInPathOrder(t *testing.T) {
	got := loadedNames(t, CRDsDir(RepoRoot(t)))
	index := func(name string) int {
		i := slices.Index(got, name)
		if i < 0 {
			t.Fatalf("LoadCRDs did not read %s; it read %v", name, got)
		}
		return i
	}
	order := []int{
		index("certificates.cert-manager.io=cert-manager.io/Certificate"),
		index("envoyproxies.gateway.envoyproxy.io=gateway.envoyproxy.io/EnvoyProxy"),
		index("gateways.gateway.networking.k8s.io=gateway.networking.k8s.io/Gateway"),
		index("tlsroutes.gateway.networking.k8s.io=gateway.networking.k8s.io/TLSRoute"),
		index("gcpbackendpolicies.networking.gke.io=networking.gke.io/GCPBackendPolicy"),
		// Paths sort as strings: "kcp-operator-deploy/" before "kcp-operator/".
		index("compiledshards.deploy.operator.kcp.io=deploy.operator.kcp.io/CompiledShard"),
		index("rootshards.operator.kcp.io=operator.kcp.io/RootShard"),
	}
	if !slices.IsSorted(order) {
		t.Errorf("not in path order (cert-manager, envoy-gateway, gateway-api, gke-gateway, kcp-operator-deploy, kcp-operator): %v", order)
	}
	seen := map[string]bool{}
	for _, n := range got {
		if seen[n] {
			t.Errorf("%s read twice", n)
		}
		seen[n] = true
	}
}

// Empty documents are skipped and JSON is read too; built at test time from upstream
// CRDs.
func TestLoadCRDsSkipsEmptyDocumentsAndReadsJSON(t *testing.T) {
	shards, rootShards := upstreamCRD(t, "kcp-operator/operator.kcp.io_shards.yaml"), upstreamCRD(t, "kcp-operator/operator.kcp.io_rootshards.yaml")
	asJSON, err := yaml.YAMLToJSON([]byte(upstreamCRD(t, "kcp-operator/operator.kcp.io_kubeconfigs.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"b/multi.yaml":  shards + "\n---\n---\n" + rootShards,
		"c/d/kc.json":   string(asJSON),
		"a/README.md":   "kind: not read\n",
		"a/shards.yaml": shards,
	})
	want := []string{
		"shards.operator.kcp.io=operator.kcp.io/Shard",
		"shards.operator.kcp.io=operator.kcp.io/Shard",
		"rootshards.operator.kcp.io=operator.kcp.io/RootShard",
		"kubeconfigs.operator.kcp.io=operator.kcp.io/Kubeconfig",
	}
	if got := loadedNames(t, dir); !slices.Equal(got, want) {
		t.Errorf("LoadCRDs = %v, want %v", got, want)
	}
}

func TestLoadCRDsRefusesWhatIsNotACRD(t *testing.T) {
	shards := upstreamCRD(t, "kcp-operator/operator.kcp.io_shards.yaml")
	for name, tc := range map[string]struct {
		files map[string]string
		want  []string
	}{
		"another kind": {
			files: map[string]string{"crds.yaml": shards + "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"},
			want:  []string{"crds.yaml", "document 2", "v1 ConfigMap"},
		},
		"an old CRD version": {
			files: map[string]string{"old.yaml": strings.Replace(shards, "apiVersion: apiextensions.k8s.io/v1\n", "apiVersion: apiextensions.k8s.io/v1beta1\n", 1)},
			want:  []string{"old.yaml", "document 1", "apiextensions.k8s.io/v1beta1"},
		},
		"no CRD at all": {
			files: map[string]string{"notes.txt": "nothing"},
			want:  []string{"no CustomResourceDefinition in"},
		},
		"broken YAML": {
			files: map[string]string{"broken.yaml": "kind: [unclosed\n"},
			want:  []string{"broken.yaml"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			_, err := LoadCRDs(dir)
			if err == nil {
				t.Fatal("LoadCRDs accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
		})
	}
	if _, err := LoadCRDs(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("LoadCRDs of a missing directory succeeded")
	}
}
