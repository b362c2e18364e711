package tests

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docs/testing.md says what each test proves; it describes, it does not log, and it
// holds the one table of the environment variables the code reads.
const (
	testingDoc         = "docs/testing.md"
	testingDocMaxLines = 400
	// testingDocVariables is the heading of the section that holds the table.
	testingDocVariables = "## Environment variables"
)

// railgridVariable is a variable of the project's own: RAILGRID_ and a name in capitals.
var railgridVariable = regexp.MustCompile(`RAILGRID_[A-Z0-9_]+`)

// docs/testing.md stays within testingDocMaxLines: timings of past runs go to commit
// messages, not the page.
func TestTestingDocStaysShort(t *testing.T) {
	doc := readRepoFile(t, testingDoc)
	require.Empty(t, testingDocLengthProblem(doc, testingDocMaxLines))
}

// The table of docs/testing.md lists every RAILGRID_* variable that a Go file, a shell
// script or .ci/run names, and no other.
func TestTestingDocListsEveryVariable(t *testing.T) {
	doc := readRepoFile(t, testingDoc)
	read := variablesInCode(t, "..")
	require.NotEmpty(t, read, "no RAILGRID_* variable found in the code: the scan is broken")
	for _, p := range variableTableProblems(doc, read) {
		t.Error(p)
	}
}

// The checks find what they must: a page too long, a variable the code reads that the
// table lacks, a row for a variable no code reads, a row twice, a row with a cell
// missing, and no table at all.
func TestTestingDocChecksCanFail(t *testing.T) {
	require.Empty(t, testingDocLengthProblem("a\nb\n", 2))
	require.NotEmpty(t, testingDocLengthProblem("a\nb\nc\n", 2))
	require.NotEmpty(t, testingDocLengthProblem("a\nb\nc", 2), "a last line without a newline counts")

	// Built from parts, so that the scan of this file does not find them.
	known, missing, stale := "RAILGRID_"+"KNOWN", "RAILGRID_"+"MISSING", "RAILGRID_"+"STALE"
	row := func(v string) string { return "| `" + v + "` | `hack/x.sh` | does x | off |\n" }
	table := testingDocVariables + "\n\n| variable | read by | what it does | default |\n|---|---|---|---|\n"
	read := map[string][]string{known: {"hack/x.sh"}}

	require.Empty(t, variableTableProblems(table+row(known), read))
	got := variableTableProblems(table+row(known)+row(stale), map[string][]string{known: {"a.go"}, missing: {"b.sh"}})
	require.Len(t, got, 2, "%q", got)
	require.Contains(t, got[0], missing)
	require.Contains(t, got[0], "b.sh", "the miss names where the code reads it")
	require.Contains(t, got[1], stale)
	require.NotEmpty(t, variableTableProblems(table+row(known)+row(known), read), "a row twice")
	require.NotEmpty(t, variableTableProblems(table+"| `"+known+"` | `hack/x.sh` | does x |\n", read), "a cell missing")
	require.NotEmpty(t, variableTableProblems("# No table\n", read), "no section")
	// A variable named in prose, outside the section, is not a row.
	require.NotEmpty(t, variableTableProblems("Set `"+known+"`.\n\n"+table, read))
}

// testingDocLengthProblem says how far doc is over max lines, or "".
func testingDocLengthProblem(doc string, max int) string {
	lines := strings.Count(doc, "\n")
	if doc != "" && !strings.HasSuffix(doc, "\n") {
		lines++
	}
	if lines <= max {
		return ""
	}
	return fmt.Sprintf("%s has %d lines, more than %d: it says what each test proves; timings and the history of runs go to commit messages",
		testingDoc, lines, max)
}

// variableTableProblems compares the rows of doc's variable table with read (variable:
// the files that name it) and says what differs.
func variableTableProblems(doc string, read map[string][]string) []string {
	_, section, found := strings.Cut(doc, testingDocVariables+"\n")
	if !found {
		return []string{testingDoc + " has no section " + strings.TrimLeft(testingDocVariables, "# ")}
	}
	if next := strings.Index(section, "\n#"); next >= 0 {
		section = section[:next]
	}
	var problems []string
	rows := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `RAILGRID_") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if len(cells) != 4 || slices.ContainsFunc(cells, func(c string) bool { return strings.TrimSpace(c) == "" }) {
			problems = append(problems, "the row of "+name+" needs four cells: variable, read by, what it does, default")
		}
		if rows[name] {
			problems = append(problems, name+" has two rows")
		}
		rows[name] = true
	}
	for _, v := range slices.Sorted(maps.Keys(read)) {
		if !rows[v] {
			problems = append(problems, testingDoc+"'s table lacks "+v+", named in "+strings.Join(read[v], ", "))
		}
	}
	for _, v := range slices.Sorted(maps.Keys(rows)) {
		if _, ok := read[v]; !ok {
			problems = append(problems, testingDoc+"'s table lists "+v+", which no .go or .sh file nor .ci/run names")
		}
	}
	return problems
}

// variablesInCode finds the RAILGRID_* variables that the Go files, the shell scripts
// and .ci/run under root name, with the files (paths from root) that name each.
func variablesInCode(t *testing.T, root string) map[string][]string {
	t.Helper()
	read := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == ".git" || rel == "docs" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, ".sh") && rel != ".ci/run" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, v := range railgridVariable.FindAllString(string(data), -1) {
			if !slices.Contains(read[v], rel) {
				read[v] = append(read[v], rel)
			}
		}
		return nil
	})
	require.NoError(t, err)
	return read
}
