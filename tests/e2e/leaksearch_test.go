//go:build linux

package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestLeakSearchFindsANeedleUnderBase64AndPEM: the state search finds a secret as a leak
// would carry it (a JSON string holding base64 of a PEM block whose body holds it), once
// per document it is in, and nothing in a document without it.
func TestLeakSearchFindsANeedleUnderBase64AndPEM(t *testing.T) {
	const marker = "railgrid-e2e-marker-4711"
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("der prefix " + marker + " der suffix")})
	leaky := fmt.Sprintf(`{"outputs":{"data":{"kubeconfig":%q}}}`, base64.StdEncoding.EncodeToString(block))
	clean := `{"outputs":{"data":{"kubeconfig":"` + base64.StdEncoding.EncodeToString([]byte("nothing to see here, really")) + `"}}}`

	search := newLeakSearcher(marker, "another-needle-not-there")
	for i, doc := range []string{leaky, clean, leaky} {
		found := search.search([]byte(doc))
		want := 0
		if doc == leaky {
			want = 1
		}
		if len(found) != want {
			t.Errorf("document %d: found %v, want %d finding(s)", i, found, want)
		}
	}
	// Base64 of base64: the encoded forms find one level, decoding finds the next.
	twice := []byte(base64.StdEncoding.EncodeToString([]byte(base64.StdEncoding.EncodeToString([]byte("x " + marker + " y")))))
	if !deepContains(twice, []byte(marker), 1) || deepContains(twice, []byte(marker), 0) {
		t.Errorf("deepContains does not find the marker under two base64 layers with exactly one decode")
	}
}

// leakSearch looks for needles in a document (a JSON state export) the way a leak would
// show up: as is, or under any nesting of base64 and PEM inside any string of it (a
// Secret's data is base64 of a kubeconfig, whose certificate data is base64 of PEM,
// whose body is base64 of the DER certificate that carries the marker).
func leakSearch(doc []byte, needles ...string) []string {
	return newLeakSearcher(needles...).search(doc)
}

func newLeakSearcher(needles ...string) *leakSearcher {
	return &leakSearcher{needles: needles, found: map[string][]string{}}
}

// leakSearcher is leakSearch for many documents with the same needles: a string that
// recurs (the backend keeps many copies of one state) is decoded and searched once.
type leakSearcher struct {
	needles []string
	found   map[string][]string // string -> the needles in it
}

func (l *leakSearcher) search(doc []byte) []string {
	var found []string
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		root = string(doc)
	}
	walkStrings(root, "", func(path, s string) {
		in, seen := l.found[s]
		if !seen {
			layers := decodedLayers([]byte(s), 5, nil)
			for _, n := range l.needles {
				if layersContain(layers, []byte(n)) {
					in = append(in, n)
				}
			}
			l.found[s] = in
		}
		for _, n := range in {
			found = append(found, fmt.Sprintf("%q found under %s", n, path))
		}
	})
	return found
}

func walkStrings(v any, path string, fn func(path, s string)) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			walkStrings(x, path+"."+k, fn)
		}
	case []any:
		for i, x := range t {
			walkStrings(x, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	case string:
		fn(path, t)
	}
}

// deepContains reports whether needle is in data as is, base64-encoded, or in what
// decoding PEM blocks and base64 runs of data yields, depth levels deep.
func deepContains(data, needle []byte, depth int) bool {
	return layersContain(decodedLayers(data, depth, nil), needle)
}

var base64Run = regexp.MustCompile(`[A-Za-z0-9+/]{16,}={0,2}`)

// decodedLayers appends data and everything decoding it yields, depth levels deep: the
// bodies of its PEM blocks and its base64 runs, each decoded again.
func decodedLayers(data []byte, depth int, out [][]byte) [][]byte {
	out = append(out, data)
	if depth == 0 {
		return out
	}
	rest := data
	for {
		block, r := pem.Decode(rest)
		if block == nil {
			break
		}
		out = decodedLayers(block.Bytes, depth-1, out)
		rest = r
	}
	for _, run := range base64Run.FindAll(data, -1) {
		if decoded, ok := decodeBase64(run); ok {
			out = decodedLayers(decoded, depth-1, out)
		}
	}
	return out
}

// layersContain reports whether needle, as is or base64-encoded, is in any layer.
func layersContain(layers [][]byte, needle []byte) bool {
	forms := append([][]byte{needle}, base64Forms(needle)...)
	for _, layer := range layers {
		for _, f := range forms {
			if bytes.Contains(layer, f) {
				return true
			}
		}
	}
	return false
}

// base64Forms are the stable inner parts of the base64 encodings of s at the three
// possible alignments.
func base64Forms(s []byte) [][]byte {
	var out [][]byte
	for shift := 0; shift < 3; shift++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, shift), s...))
		// Drop the characters that depend on the bytes before and after.
		start := (shift*8 + 5) / 6
		end := len(enc) - 4
		if end-start > 8 {
			out = append(out, []byte(enc[start:end]))
		}
	}
	return out
}

func decodeBase64(run []byte) ([]byte, bool) {
	s := strings.TrimRight(string(run), "=")
	for trim := 0; trim < 4 && len(s) > trim; trim++ {
		if decoded, err := base64.RawStdEncoding.DecodeString(s[:len(s)-trim]); err == nil {
			return decoded, true
		}
	}
	return nil, false
}
