package tests

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"strings"
	"time"

	testpki "github.com/railgrid/railgrid-kcp/internal/testkit/pki"
)

// issuerPKI holds the issuer CAs of the tests, as PEM text a stack config gives in
// oidc.caCertificates.
type issuerPKI struct {
	// root and chain (root, then an intermediate CA it issued) are good.
	root, chain string
	// Bad in one way each: a self-signed certificate that is not a CA, an expired CA, a CA
	// not valid yet, and the root followed by its private key.
	notACA, expired, notYetValid, withKey string
	// key is the private key in withKey, which no error may show.
	key string
}

var issuerCAs = newIssuerPKI()

func newIssuerPKI() issuerPKI {
	must := func(ca *testpki.CA, err error) *testpki.CA {
		if err != nil {
			panic(err)
		}
		return ca
	}
	root := must(testpki.NewCA("Railgrid hub issuer CA"))
	intermediate, _, err := root.Issue(&x509.Certificate{
		Subject: pkix.Name{CommonName: "Railgrid hub issuer intermediate CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	if err != nil {
		panic(err)
	}
	leaf, err := root.ServerCert([]string{"dex.kcp.localhost"})
	if err != nil {
		panic(err)
	}
	now := time.Now()
	return issuerPKI{
		root:        string(root.PEM),
		chain:       string(root.PEM) + string(intermediate),
		notACA:      string(must(testpki.NewCA("dex.kcp.localhost", testpki.NotACA())).PEM),
		expired:     string(must(testpki.NewCA("Expired issuer CA", testpki.Expired())).PEM),
		notYetValid: string(must(testpki.NewCA("Future issuer CA", testpki.Valid(now.Add(24*time.Hour), now.Add(48*time.Hour)))).PEM),
		withKey:     string(root.PEM) + string(leaf.KeyPEM),
		key:         string(leaf.KeyPEM),
	}
}

// pemShown is how an error shows PEM text of n bytes with these blocks.
func pemShown(text string, blocks ...string) string {
	if len(blocks) == 0 {
		return fmt.Sprintf("%d bytes, no PEM block", len(text))
	}
	return fmt.Sprintf("%d bytes, PEM blocks: %s", len(text), strings.Join(blocks, ", "))
}

// badCertificatePEM is a CERTIFICATE block whose content is not a certificate.
const badCertificatePEM = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
