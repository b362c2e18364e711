package config

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// Where each chart comes from: the rules chart-repository, chart-source and chart-ca-file.

// Why a CA file cannot go with an oci:// chart repository. The Kubernetes provider pulls
// an OCI chart with a registry client of its own, made without TLS options, so Helm's
// repository CA file would be silently ignored for it.
const ociCARule = "the Kubernetes provider pulls OCI charts with a registry client of its own that takes no CA file, so the file would be silently ignored; " +
	"an oci:// mirror behind a private CA needs that CA in the trust store of the machine that runs pulumi (SSL_CERT_FILE or SSL_CERT_DIR, which Go reads)"

func (c *Config) validateOperator(errs *Errors) {
	o := c.Operator
	if c.given["operator.chartPath"] {
		if c.given["operator.chartRepository"] {
			errs.addf(ruleChartSource, "operator.chartPath", o.ChartPath, "and operator.chartRepository are both set; set one (chartPath installs from a local directory and would ignore the repository)")
		}
		if c.given["operator.chartCAFile"] {
			errs.addf(ruleChartSource, "operator.chartCAFile", o.ChartCAFile, "is set with operator.chartPath: a local chart directory is not downloaded, so it needs no CA; remove one")
		}
		if strings.TrimSpace(o.ChartPath) == "" {
			errs.addf(ruleChartSource, "operator.chartPath", o.ChartPath, "must be a local chart directory; leave it out to install from operator.chartRepository")
		}
		return
	}
	c.validateChartSource(errs, "operator.chartRepository", "operator.chartCAFile", o.ChartSource())
}

// validateChartSource checks where a chart comes from: the repository (repositoryKey)
// and, when the config sets it, the CA file of an https repository (caFileKey).
func (c *Config) validateChartSource(errs *Errors, repositoryKey, caFileKey string, s ChartSource) {
	problem, shown := chartRepositoryProblem(s.Repository)
	if problem != "" {
		errs.addf(ruleChartRepository, repositoryKey, shown, "%s: %s", ruleChartRepository.Refuses, problem)
	}
	if !c.given[caFileKey] {
		return
	}
	switch {
	case s.IsOCI():
		errs.addf(ruleChartCAFile, caFileKey, s.CAFile, "is set with the oci:// repository %s: %s", shown, ociCARule)
	case s.CAFile == "":
		errs.addf(ruleChartCAFile, caFileKey, s.CAFile, "is empty: name a file of PEM certificates, or leave the key out to trust the system's CAs")
	default:
		if problem := caFileProblem(s.CAFile); problem != "" {
			errs.addf(ruleChartCAFile, caFileKey, s.CAFile, "must name a readable file of PEM certificates, each a valid X.509 certificate (a relative path is read from the directory the program runs in): %s", problem)
		}
	}
}

// chartRepositoryProblem says why repository cannot be a chart's source, or "" if it
// can; shown is the repository as an error may show it (a password is masked).
func chartRepositoryProblem(repository string) (problem, shown string) {
	u, err := url.Parse(repository)
	if urlErr := (*url.Error)(nil); errors.As(err, &urlErr) {
		// url.Error repeats the whole URL, password included: keep only its reason.
		return urlErr.Err.Error(), maskPassword(repository)
	}
	shown = repository
	if _, hasPassword := u.User.Password(); hasPassword {
		shown = u.Redacted()
	}
	switch {
	// Spelled exactly: Go's URL parser takes a scheme in capitals, but Helm tells an OCI
	// chart by the prefix oci:// in lower case.
	case !strings.HasPrefix(repository, "https://") && !strings.HasPrefix(repository, OCIScheme):
		return "it does not start with https:// or oci:// (in lower case)", shown
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return "it has no host", shown
	case u.User != nil:
		return "it has a user name", shown
	case u.RawQuery != "" || u.ForceQuery:
		return "it has a query", shown
	case u.Fragment != "" || strings.Contains(repository, "#"):
		return "it has a fragment", shown
	}
	return "", shown
}

// maskPassword masks the password of a URL that does not parse, as url.URL.Redacted
// does for one that does: scheme://user:xxxxx@rest.
func maskPassword(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	authority, _, _ := strings.Cut(rest, "/")
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return raw
	}
	user, _, hasPassword := strings.Cut(authority[:at], ":")
	if !hasPassword {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// caFileProblem says why path does not name a file of PEM certificates that Helm can
// trust, or "" if it does. Helm builds its trust pool with x509.CertPool.AppendCertsFromPEM,
// which silently skips a certificate it cannot parse, so each is parsed here.
func caFileProblem(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	certificates := 0
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Sprintf("its certificate %d does not parse as X.509: %v", certificates+1, err)
		}
		certificates++
	}
	if certificates == 0 {
		return "it holds no PEM certificate (no -----BEGIN CERTIFICATE----- block)"
	}
	return ""
}

// validateAddOnChart checks the chart source of an add-on the kind stack installs, key,
// unless the config says the cluster has it (presentKey): then a chart source set would
// be ignored, and is refused.
func (c *Config) validateAddOnChart(errs *Errors, key string, s ChartSource, presentKey string, present bool) {
	if present {
		for _, f := range []struct{ key, value string }{{key + ".repository", s.Repository}, {key + ".caFile", s.CAFile}} {
			if c.given[f.key] {
				errs.addf(ruleChartSource, f.key, f.value, "is set while %s is true: the stack does not install that chart, so its source would be ignored; remove one", presentKey)
			}
		}
		return
	}
	c.validateChartSource(errs, key+".repository", key+".caFile", s)
}
