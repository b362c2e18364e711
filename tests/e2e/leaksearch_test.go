package e2e

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
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
