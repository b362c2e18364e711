package testenv

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// CopyProgram copies what the Go language host's `go build` of main.go reads into dst:
// go.mod, go.sum, Pulumi.yaml and the Go files of every package of this module that
// main imports. The CLI and the language host write beside Pulumi.yaml (the stack file,
// the built program), so a test runs the program from a copy and never writes to the
// repository.
func CopyProgram(t testing.TB, root, dst string) {
	t.Helper()
	list := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}|{{join .GoFiles \",\"}}{{end}}{{end}}", ".")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	files := []string{"go.mod", "go.sum", "Pulumi.yaml"}
	scanner := bufio.NewScanner(bytes.NewReader(out))
	for scanner.Scan() {
		dir, goFiles, _ := strings.Cut(scanner.Text(), "|")
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Split(goFiles, ",") {
			files = append(files, filepath.Join(rel, f))
		}
	}
	if !slices.Contains(files, "main.go") {
		t.Fatalf("go list did not list main.go: %s", out)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
