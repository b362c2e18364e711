package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func crdYAML(group, kind, plural string) string {
	return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: " + plural + "." + group +
		"\nspec:\n  group: " + group + "\n  names:\n    kind: " + kind + "\n    plural: " + plural + "\n"
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

// LoadCRDs reads YAML, multi-document YAML (empty documents skipped) and JSON, in
// subdirectories too, in path order, and passes over files that are not YAML or JSON.
func TestLoadCRDsReadsEveryCRDUnderTheDirectoryInPathOrder(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"b/multi.yaml": crdYAML("b.example.com", "Two", "twos") + "---\n---\n" + crdYAML("b.example.com", "Three", "threes"),
		"a.yml":        crdYAML("a.example.com", "One", "ones"),
		"c/d/four.json": `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",` +
			`"metadata":{"name":"fours.d.example.com"},"spec":{"group":"d.example.com","names":{"kind":"Four","plural":"fours"}}}`,
		"README.md": "kind: not read\n",
	})
	crds, err := LoadCRDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, crd := range crds {
		got = append(got, crd.GetName()+"="+CRDKind(crd))
	}
	want := "ones.a.example.com=a.example.com/One twos.b.example.com=b.example.com/Two " +
		"threes.b.example.com=b.example.com/Three fours.d.example.com=d.example.com/Four"
	if strings.Join(got, " ") != want {
		t.Errorf("LoadCRDs = %v, want %s", got, want)
	}
}

func TestLoadCRDsRefusesWhatIsNotACRD(t *testing.T) {
	for name, tc := range map[string]struct {
		files map[string]string
		want  []string
	}{
		"another kind": {
			files: map[string]string{"crds.yaml": crdYAML("a.example.com", "One", "ones") + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"},
			want:  []string{"crds.yaml", "document 2", "v1 ConfigMap"},
		},
		"an old CRD version": {
			files: map[string]string{"old.yaml": strings.Replace(crdYAML("a.example.com", "One", "ones"), "/v1\n", "/v1beta1\n", 1)},
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
