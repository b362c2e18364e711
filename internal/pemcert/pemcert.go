// Package pemcert reads the certificate a client presents from a PEM bundle, as
// kubeconfigs and Secrets hold it: the first CERTIFICATE block is the leaf.
package pemcert

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// Leaf parses the first CERTIFICATE block of data; other blocks (a key) are skipped.
func Leaf(data []byte) (*x509.Certificate, error) {
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM CERTIFICATE block")
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("cannot parse: %v", err)
		}
		return cert, nil
	}
}
