package config

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The hub's OIDC issuer: the rules issuer-url, client-id, oidc-fixed, ca-secret-name,
// ca-secret-key and ca-certificates-*.

// Values fixed by the hub: it hard-codes every user's RBAC identity as railgrid:<email>.
const (
	FixedUsernameClaim  = "email"
	FixedGroupsClaim    = "groups"
	FixedUsernamePrefix = "railgrid:"
	FixedGroupsPrefix   = "railgrid:"
)

const oidcFixedRule = "is fixed by the hub, which hard-codes every user's RBAC identity as railgrid:<email>: " +
	"kcp must use usernameClaim email, groupsClaim groups and the railgrid: prefixes"

func (c *Config) validateOIDC(errs *Errors) {
	o := c.OIDC
	if u, err := url.Parse(o.IssuerURL); err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		errs.add(ruleIssuerURL, "oidc.issuerURL", o.IssuerURL)
	}
	if strings.TrimSpace(o.ClientID) == "" {
		errs.add(ruleClientID, "oidc.clientID", o.ClientID)
	}
	fixed := []struct {
		key   string
		value *string
		want  string
	}{
		{"oidc.usernameClaim", o.UsernameClaim, FixedUsernameClaim},
		{"oidc.groupsClaim", o.GroupsClaim, FixedGroupsClaim},
		{"oidc.usernamePrefix", o.UsernamePrefix, FixedUsernamePrefix},
		{"oidc.groupsPrefix", o.GroupsPrefix, FixedGroupsPrefix},
	}
	for _, f := range fixed {
		if f.value != nil && *f.value != f.want {
			errs.add(ruleOIDCFixed, f.key, *f.value)
		}
	}
	if o.CASecret != nil {
		kubeName(errs, ruleCASecretName, "oidc.caSecret.name", o.CASecret.Name, validation.IsDNS1123Subdomain)
		kubeName(errs, ruleCASecretKey, "oidc.caSecret.key", o.CASecret.Key, validation.IsConfigMapKey)
	}
	if c.HasIssuerCACertificates() {
		c.validateIssuerCACertificates(errs, time.Now())
	}
}

// caCertificatesKey is the key of the issuer's CA chain as PEM text.
const caCertificatesKey = "oidc.caCertificates"

const caCertificatesPEMRule = "must be PEM text of one or more CERTIFICATE blocks and nothing else, each an X.509 certificate that parses " +
	"(pulumi config set --path 'railgrid-kcp:oidc.caCertificates' -- \"$(cat ca.pem)\"); an error shows the text's size and the types of its blocks, never the text"

// HasIssuerCACertificates says whether the config gives the issuer's CA chain as PEM
// text (oidc.caCertificates): the program then owns the Secret kcp reads it from.
func (c *Config) HasIssuerCACertificates() bool {
	return c.given[caCertificatesKey] || c.OIDC.CACertificates != ""
}

// validateIssuerCACertificates checks the issuer's CA chain: PEM certificates only,
// every one a CA, valid at now. kcp reads the file with every certificate in it, so one
// bad certificate is refused even when another would do. The value an error shows is
// a summary: the text may be kilobytes long, and a private key pasted by mistake must
// not reach a log.
func (c *Config) validateIssuerCACertificates(errs *Errors, now time.Time) {
	o := c.OIDC
	shown := pemSummary(o.CACertificates)
	if o.CASecret != nil {
		errs.addf(ruleCACertificatesAndSecret, caCertificatesKey, shown,
			"and oidc.caSecret (Secret %s) are both set: each gives the issuer's CA, and kcp reads one CA file; keep caCertificates (the program owns the Secret) or caSecret (a Secret made by hand), not both",
			o.CASecret.Name)
	}
	certs, problem := parseCertificatesPEM(o.CACertificates)
	if problem != "" {
		errs.addf(ruleCACertificatesPEM, caCertificatesKey, shown, "%s: %s", caCertificatesPEMRule, problem)
		return
	}
	for i, cert := range certs {
		which := describeCertificate(i, len(certs), cert)
		if !cert.BasicConstraintsValid || !cert.IsCA {
			errs.addf(ruleCACertificatesCA, caCertificatesKey, shown,
				"%s is not a CA (its basic constraints do not say CA:TRUE): give the CA that issued the issuer's serving certificate, not a serving certificate", which)
		}
		switch {
		case now.After(cert.NotAfter):
			errs.addf(ruleCACertificatesValidity, caCertificatesKey, shown,
				"%s expired at %s: kcp could not verify the issuer's certificate with it, and would refuse every user's token; give the issuer's current CA", which, cert.NotAfter.UTC().Format(time.RFC3339))
		case now.Before(cert.NotBefore):
			errs.addf(ruleCACertificatesValidity, caCertificatesKey, shown,
				"%s is not valid before %s: until then kcp could not verify the issuer's certificate with it, and would refuse every user's token", which, cert.NotBefore.UTC().Format(time.RFC3339))
		}
	}
}

// describeCertificate names certificate i of n for an error: its subject and validity,
// which are public.
func describeCertificate(i, n int, cert *x509.Certificate) string {
	return fmt.Sprintf("certificate %d of %d (subject %q, valid %s to %s)", i+1, n, cert.Subject.String(),
		cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
}

const pemBegin = "-----BEGIN "

// parseCertificatesPEM parses text made of PEM CERTIFICATE blocks and nothing else
// (whitespace aside), or says why it is not.
func parseCertificatesPEM(text string) ([]*x509.Certificate, string) {
	var certs []*x509.Certificate
	rest := []byte(text)
	for i := 0; ; i++ {
		rest = bytes.TrimSpace(rest)
		if len(rest) == 0 {
			break
		}
		if !bytes.HasPrefix(rest, []byte(pemBegin)) {
			if i == 0 {
				return nil, "it is not PEM: it does not start with " + pemBegin + "CERTIFICATE-----"
			}
			return nil, fmt.Sprintf("it has text after its PEM block %d", i)
		}
		// pem.Decode skips a block it cannot decode and takes the next one; a block
		// must decode where it starts.
		block, after := pem.Decode(rest)
		if block == nil || bytes.Count(rest[:len(rest)-len(after)], []byte(pemBegin)) != 1 {
			return nil, fmt.Sprintf("its PEM block %d does not decode (an END line missing or not matching, or base64 that does not decode)", i+1)
		}
		if block.Type != "CERTIFICATE" {
			problem := fmt.Sprintf("its PEM block %d is %s, not a CERTIFICATE", i+1, clip(block.Type))
			if strings.Contains(block.Type, "PRIVATE KEY") {
				problem += ": a private key does not belong in stack config (remove it, and treat it as exposed)"
			}
			return nil, problem
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Sprintf("its certificate %d does not parse as X.509: %v", i+1, err)
		}
		certs = append(certs, cert)
		rest = after
	}
	if len(certs) == 0 {
		return nil, "it is empty"
	}
	return certs, ""
}

// pemSummary is PEM text as an error shows it: its size and the types of its blocks.
func pemSummary(text string) string {
	var types []string
	for block, rest := pem.Decode([]byte(text)); block != nil; block, rest = pem.Decode(rest) {
		types = append(types, clip(block.Type))
	}
	switch {
	case len(types) == 0:
		return fmt.Sprintf("%d bytes, no PEM block", len(text))
	case len(types) > 5:
		types = append(types[:5], fmt.Sprintf("and %d more", len(types)-5))
	}
	return fmt.Sprintf("%d bytes, PEM blocks: %s", len(text), strings.Join(types, ", "))
}

// clip shortens a PEM block type for an error.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
