package testkit

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// listedFiles reads the file list of doc.go: the comment lines "//\t<path>  <what>", a
// path of this directory, then at least two spaces and what the file holds.
func listedFiles(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		entry, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			continue
		}
		path, what, _ := strings.Cut(entry, "  ")
		if what = strings.TrimSpace(what); what == "" {
			t.Errorf("doc.go lists %s without saying what it holds", path)
		}
		if _, dup := listed[path]; dup {
			t.Errorf("doc.go lists %s twice", path)
		}
		listed[path] = what
	}
	return listed
}

// The package documentation lists every file of every testkit package, each with what
// it holds, and no file that does not exist: a file added, moved or removed fails this
// test until doc.go says so.
func TestTheDocListsEveryFile(t *testing.T) {
	listed := listedFiles(t)
	var present []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			present = append(present, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range present {
		if _, ok := listed[path]; !ok {
			t.Errorf("%s is not in doc.go's list of testkit's files: add it with one line on what it holds", path)
		}
	}
	for path := range listed {
		if !slices.Contains(present, path) {
			t.Errorf("doc.go lists %s, which does not exist: remove it from the list", path)
		}
	}
	if len(listed) == 0 {
		t.Fatal("doc.go lists no files")
	}
}
