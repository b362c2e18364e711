package pemcert

import (
	"encoding/pem"
	"strings"
	"testing"

	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
)

func TestLeafIsTheFirstCertificateAfterOtherBlocks(t *testing.T) {
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.ClientCert("kcp-admin", []string{"system:kcp:admin"})
	if err != nil {
		t.Fatal(err)
	}
	bundle := append(append(append([]byte{}, leaf.KeyPEM...), leaf.CertPEM...), ca.PEM...)
	got, err := Leaf(bundle)
	if err != nil || got.Subject.CommonName != "kcp-admin" {
		t.Fatalf("Leaf = %v, %v; want the client certificate kcp-admin", got, err)
	}
}

func TestLeafRefusesWhatHoldsNoCertificate(t *testing.T) {
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"empty":    {nil, "no PEM CERTIFICATE block"},
		"key only": {pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), "no PEM CERTIFICATE block"},
		"garbled":  {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}), "cannot parse"},
	} {
		if _, err := Leaf(c.data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Leaf error %v, want %q", name, err, c.want)
		}
	}
}
