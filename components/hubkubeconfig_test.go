package components

import "testing"

func TestHubKubeconfigDetailsComeFromTheCertificate(t *testing.T) {
	if _, err := parseKubeconfig("not base64!"); err == nil {
		t.Fatal("garbage must be refused")
	}
}
