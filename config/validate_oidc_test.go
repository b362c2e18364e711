package config_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
)

// The OIDC issuer and its CA (validate_oidc.go): each refusal below is refused naming
// its rule, key and value, and each acceptance, at the edge of a rule, is taken.
func TestOIDCRefusals(t *testing.T) { requireRefused(t, oidcRefusals) }

func TestOIDCAcceptances(t *testing.T) { requireAccepted(t, oidcAcceptances) }

var oidcRefusals = []refusal{
	{name: "OIDC issuer not https", rule: "issuer-url", stack: "kind",
		edit: set("oidc.issuerURL", "http://dex.kcp.localhost"),
		key:  "oidc.issuerURL", value: "http://dex.kcp.localhost",
		says: "https://"},
	{name: "OIDC client ID empty", rule: "client-id", stack: "kind",
		edit: set("oidc.clientID", ""),
		key:  "oidc.clientID", value: "",
		says: "hub's client ID"},
	{name: "OIDC username claim", rule: "oidc-fixed", stack: "kind",
		edit: set("oidc.usernameClaim", "sub"),
		key:  "oidc.usernameClaim", value: "sub",
		says: "railgrid:<email>"},
	{name: "OIDC groups prefix", rule: "oidc-fixed", stack: "gke",
		edit: set("oidc.groupsPrefix", "oidc:"),
		key:  "oidc.groupsPrefix", value: "oidc:",
		says: "fixed by the hub"},
	{name: "OIDC CA secret name", rule: "ca-secret-name", stack: "kind",
		edit: set("oidc.caSecret", map[string]any{"name": "Issuer CA"}),
		key:  "oidc.caSecret.name", value: "Issuer CA",
		says: "Secret in kcp-system"},
	{name: "OIDC CA secret name with an underscore", rule: "ca-secret-name", stack: "kind",
		edit: set("oidc.caSecret", map[string]any{"name": "issuer_ca", "key": "ca.crt"}),
		key:  "oidc.caSecret.name", value: "issuer_ca",
		says: "RFC 1123 subdomain"},
	{name: "OIDC CA secret key empty", rule: "ca-secret-key", stack: "kind",
		edit: set("oidc.caSecret", map[string]any{"name": "issuer-ca", "key": ""}),
		key:  "oidc.caSecret.key", value: "",
		says: "Secret key"},
	{name: "OIDC CA secret key a path", rule: "ca-secret-key", stack: "kind",
		edit: set("oidc.caSecret", map[string]any{"name": "issuer-ca", "key": "ca/ca.crt"}),
		key:  "oidc.caSecret.key", value: "ca/ca.crt",
		says: "must consist of alphanumeric characters, '-', '_' or '.'"},
	{name: "OIDC CA secret key with a space", rule: "ca-secret-key", stack: "kind",
		edit: set("oidc.caSecret", map[string]any{"name": "issuer-ca", "key": "ca crt"}),
		key:  "oidc.caSecret.key", value: "ca crt",
		says: "must consist of alphanumeric characters"},
	{name: "OIDC CA secret key ..", rule: "ca-secret-key", stack: "kind",
		edit: set("oidc.caSecret", map[string]any{"name": "issuer-ca", "key": ".."}),
		key:  "oidc.caSecret.key", value: "..",
		says: "must not be '..'"},
	{name: "OIDC CA as PEM text and as a Secret", rule: "ca-certificates-and-secret", stack: "kind",
		edit: edits(
			set("oidc.caCertificates", rootCA),
			set("oidc.caSecret", map[string]any{"name": "issuer-ca"}),
		),
		key: "oidc.caCertificates", value: pemShown(rootCA, "CERTIFICATE"),
		says: "and oidc.caSecret (Secret issuer-ca) are both set"},
	{name: "OIDC CA not PEM", rule: "ca-certificates-pem", stack: "kind",
		edit: set("oidc.caCertificates", "ca.pem"),
		key:  "oidc.caCertificates", value: pemShown("ca.pem"),
		says: "it is not PEM"},
	{name: "OIDC CA empty", rule: "ca-certificates-pem", stack: "gke",
		edit: set("oidc.caCertificates", ""),
		key:  "oidc.caCertificates", value: pemShown(""),
		says: "it is empty"},
	{name: "OIDC CA with a private key", rule: "ca-certificates-pem", stack: "kind",
		edit: set("oidc.caCertificates", rootCAWithKey),
		key:  "oidc.caCertificates", value: pemShown(rootCAWithKey, "CERTIFICATE", "PRIVATE KEY"),
		says: "its PEM block 2 is PRIVATE KEY, not a CERTIFICATE: a private key does not belong in stack config"},
	{name: "OIDC CA certificate that does not parse", rule: "ca-certificates-pem", stack: "gke",
		edit: set("oidc.caCertificates", rootCA+badCertificatePEM),
		key:  "oidc.caCertificates", value: pemShown(rootCA+badCertificatePEM, "CERTIFICATE", "CERTIFICATE"),
		says: "its certificate 2 does not parse as X.509"},
	{name: "OIDC CA with text after it", rule: "ca-certificates-pem", stack: "kind",
		edit: set("oidc.caCertificates", rootCA+"ca.crt\n"),
		key:  "oidc.caCertificates", value: pemShown(rootCA+"ca.crt\n", "CERTIFICATE"),
		says: "it has text after its PEM block 1"},
	{name: "OIDC CA a block without its end", rule: "ca-certificates-pem", stack: "kind",
		edit: set("oidc.caCertificates", "-----BEGIN CERTIFICATE-----\nMIIB\n"+rootCA),
		key:  "oidc.caCertificates", value: pemShown("-----BEGIN CERTIFICATE-----\nMIIB\n"+rootCA, "CERTIFICATE"),
		says: "its PEM block 1 does not decode"},
	{name: "OIDC CA a serving certificate", rule: "ca-certificates-ca", stack: "kind",
		edit: set("oidc.caCertificates", servingCert),
		key:  "oidc.caCertificates", value: pemShown(servingCert, "CERTIFICATE"),
		says: `certificate 1 of 1 (subject "CN=dex.kcp.localhost", valid`},
	{name: "OIDC CA chain with a serving certificate", rule: "ca-certificates-ca", stack: "gke",
		edit: set("oidc.caCertificates", caChain+servingCert),
		key:  "oidc.caCertificates", value: pemShown(caChain+servingCert, "CERTIFICATE", "CERTIFICATE", "CERTIFICATE"),
		says: "certificate 3 of 3 (subject \"CN=dex.kcp.localhost\""},
	{name: "OIDC CA expired", rule: "ca-certificates-validity", stack: "kind",
		edit: set("oidc.caCertificates", expiredCA),
		key:  "oidc.caCertificates", value: pemShown(expiredCA, "CERTIFICATE"),
		says: "expired at"},
	{name: "OIDC CA not valid yet", rule: "ca-certificates-validity", stack: "gke",
		edit: set("oidc.caCertificates", futureCA),
		key:  "oidc.caCertificates", value: pemShown(futureCA, "CERTIFICATE"),
		says: "is not valid before"},
}

// oidcAcceptances are values next to the refusals above that Kubernetes takes, so the
// config takes them too.
var oidcAcceptances = []acceptance{
	{name: "CA secret name starting with a digit, with dots", stack: "kind",
		edit: set("oidc.caSecret", map[string]any{"name": "1issuer.ca.v2", "key": "ca.crt"})},
	{name: "CA secret key with capitals and underscores", stack: "kind",
		edit: set("oidc.caSecret", map[string]any{"name": "issuer-ca", "key": "CA_Bundle-1.pem"})},
	{name: "CA secret key a dot file", stack: "kind",
		edit: set("oidc.caSecret", map[string]any{"name": "issuer-ca", "key": ".ca.crt"})},
	{name: "OIDC CA chain of a root and an intermediate", stack: "gke",
		edit: set("oidc.caCertificates", caChain)},
	{name: "OIDC CA with blank lines around it", stack: "kind",
		edit: set("oidc.caCertificates", "\n\n"+rootCA+"\n")},
}

// The issuer CAs of these tests (internal/testpki), each as the PEM text a stack config
// gives in oidc.caCertificates.
var (
	issuerCA = must(pki.NewCA("Railgrid hub issuer CA"))
	// rootCA and caChain (the root, then an intermediate CA it issued) are good.
	rootCA  = string(issuerCA.PEM)
	caChain = rootCA + intermediateCA(issuerCA, "Railgrid hub issuer intermediate CA")
	// Bad in one way each: a self-signed certificate that is not a CA, an expired CA, a
	// CA not valid yet, and the root followed by a private key (privateKey, which no
	// error may show).
	servingCert   = string(must(pki.NewCA("dex.kcp.localhost", pki.NotACA())).PEM)
	expiredCA     = string(must(pki.NewCA("Expired issuer CA", pki.Expired())).PEM)
	futureCA      = string(must(pki.NewCA("Future issuer CA", pki.Valid(inDays(1), inDays(2)))).PEM)
	privateKey    = string(must(issuerCA.ServerCert([]string{"dex.kcp.localhost"})).KeyPEM)
	rootCAWithKey = rootCA + privateKey
)

// badCertificatePEM is a CERTIFICATE block whose content is not a certificate.
const badCertificatePEM = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// inDays is the time n days from now.
func inDays(n int) time.Time { return time.Now().Add(time.Duration(n) * 24 * time.Hour) }

// intermediateCA is the PEM text of a CA certificate that ca issued.
func intermediateCA(ca *pki.CA, commonName string) string {
	cert, _, err := ca.Issue(&x509.Certificate{
		Subject: pkix.Name{CommonName: commonName}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	return string(must(cert, err))
}

// pemShown is how an error shows PEM text of n bytes with these blocks.
func pemShown(text string, blocks ...string) string {
	if len(blocks) == 0 {
		return fmt.Sprintf("%d bytes, no PEM block", len(text))
	}
	return fmt.Sprintf("%d bytes, PEM blocks: %s", len(text), strings.Join(blocks, ", "))
}

// A CA chain with Windows line ends, as a file copied from another system has them, is
// PEM all the same.
func TestIssuerCACertificatesWithCRLFAreTaken(t *testing.T) {
	crlf := strings.ReplaceAll(caChain, "\n", "\r\n")
	_, err := load(t, "gke", set("oidc.caCertificates", crlf), nil)
	require.NoError(t, err)
}

// A refused CA text is summarised in the error, and a private key pasted with it shows
// nowhere in it.
func TestRefusedIssuerCAIsSummarisedAndShowsNoKey(t *testing.T) {
	_, err := load(t, "kind", set("oidc.caCertificates", rootCAWithKey), nil)
	require.Error(t, err)
	msg := err.Error()
	shown := pemShown(rootCAWithKey, "CERTIFICATE", "PRIVATE KEY")
	require.Contains(t, msg, fmt.Sprintf("%s:oidc.caCertificates = %q", config.Project, shown))
	for _, line := range strings.Split(strings.TrimSpace(privateKey), "\n") {
		if !strings.HasPrefix(line, "-----") {
			require.NotContains(t, msg, line, "a line of the private key")
		}
	}
	require.NotContains(t, msg, strings.Split(rootCA, "\n")[1], "a line of the certificate")
	require.Less(t, len(msg), 1000, "a summary, not the text")
}
