package tests

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// updateDocs rewrites the generated blocks of README.md and docs/ instead of comparing
// them; -run picks which.
var updateDocs = flag.Bool("update-docs", false, "rewrite the generated blocks of README.md and docs/*.md (the config rules, the plan changes, the dependency graphs) from the program")

// generatedBlock checks (or, with -update-docs, rewrites) the text of file, a path from
// the repository root, between "<!-- <marker>: begin -->" and "<!-- <marker>: end -->".
// regenerate names the command that rewrites it.
func generatedBlock(t *testing.T, file, marker, want, regenerate string) {
	t.Helper()
	path := filepath.Join("..", filepath.FromSlash(file))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(data)
	beginMark, endMark := "<!-- "+marker+": begin -->\n", "<!-- "+marker+": end -->"
	begin, end := strings.Index(doc, beginMark), strings.Index(doc, endMark)
	require.True(t, begin >= 0 && end > begin, "%s lacks the markers %q and %q", file, beginMark, endMark)
	if *updateDocs {
		doc = doc[:begin+len(beginMark)] + want + doc[end:]
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o644))
		return
	}
	require.Equal(t, want, doc[begin+len(beginMark):end], "%s's %s is not what the program generates; run %s", file, marker, regenerate)
}

// docFiles are README.md and every file of docs/, as paths from the repository root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs, "no docs/*.md")
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	return files
}

var (
	markdownLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	fence        = regexp.MustCompile("(?m)^```.*$")
	codeSpan     = regexp.MustCompile("`[^`]*`")
)

// prose is a markdown file without its fenced blocks and code spans (which may run over
// the lines of a paragraph), where a link is text.
func prose(doc string) string {
	var text strings.Builder
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if !inFence {
			text.WriteString(line + "\n")
		}
	}
	paragraphs := strings.Split(text.String(), "\n\n")
	for i, p := range paragraphs {
		paragraphs[i] = codeSpan.ReplaceAllString(p, "")
	}
	return strings.Join(paragraphs, "\n\n")
}

// anchors are the fragment names GitHub gives a markdown file's headings: lower case,
// spaces as hyphens, punctuation other than hyphens and underscores dropped, and -1, -2
// after a repeated name.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		name := b.String()
		for n, candidate := 0, name; ; n++ {
			if !out[candidate] {
				out[candidate] = true
				break
			}
			candidate = name + "-" + strconv.Itoa(n+1)
		}
	}
	return out
}

// Every relative link of README.md and docs/ leads to a file that exists, and a link
// with a fragment to a heading of that file.
func TestDocsLinksResolve(t *testing.T) {
	for _, file := range docFiles(t) {
		data, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(file)))
		require.NoError(t, err)
		links := markdownLink.FindAllStringSubmatch(prose(string(data)), -1)
		for _, m := range links {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, fragment, _ := strings.Cut(target, "#")
			resolved := file
			if path != "" {
				resolved = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
			}
			info, err := os.Stat(filepath.Join("..", filepath.FromSlash(resolved)))
			if !assertNoError(t, err, "%s links to %s, which does not exist", file, target) || fragment == "" {
				continue
			}
			require.False(t, info.IsDir(), "%s links to the directory %s with a fragment", file, target)
			linked, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(resolved)))
			require.NoError(t, err)
			if !anchors(string(linked))[fragment] {
				t.Errorf("%s links to %s, but %s has no heading #%s", file, target, resolved, fragment)
			}
		}
	}
}

func assertNoError(t *testing.T, err error, format string, args ...any) bool {
	t.Helper()
	if err != nil {
		t.Errorf(format, args...)
		return false
	}
	return true
}

// The link check finds what it must: a missing file, a missing heading, and GitHub's
// anchors for headings with code and punctuation.
func TestDocsLinkCheckCanFail(t *testing.T) {
	a := anchors("# Top\n## After a killed or interrupted `up`\n```sh\n# not a heading\n```\n## Restoring etcd (3 members) from a snapshot\n## Top\n")
	for _, want := range []string{"top", "after-a-killed-or-interrupted-up", "restoring-etcd-3-members-from-a-snapshot", "top-1"} {
		require.True(t, a[want], "no anchor %q in %v", want, a)
	}
	require.False(t, a["not-a-heading"], "a comment in a fenced block is not a heading")
	links := markdownLink.FindAllStringSubmatch(prose("see [a](docs/a.md#x) and `[b](b.md)`\n```\n[c](c.md)\n```\n"), -1)
	require.Len(t, links, 1)
	require.Equal(t, "docs/a.md#x", links[0][1])
}
