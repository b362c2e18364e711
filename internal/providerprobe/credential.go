package providerprobe

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/railgrid/railgrid-kcp/internal/errtext"
	"github.com/railgrid/railgrid-kcp/internal/pemcert"
)

// Credential is what the probe takes from the hub's kubeconfig: the front proxy's URL
// and the client certificate. Nothing else of the kubeconfig is used: not its CA (the
// probe trusts only what Options.Trust says), not a token, plugin or file.
type Credential struct {
	// Server is the kubeconfig's server URL as written (the in-cluster front proxy,
	// usually with the root workspace's path).
	Server string
	// CertPEM and KeyPEM are the inline client certificate and key.
	CertPEM, KeyPEM []byte
	// Subject names the certificate in the report: subject and issuer.
	Subject string
}

// LoadCredential reads the current context of a kubeconfig as the hub has it: an https
// server and an inline client certificate and key, nothing else. A kubeconfig that asks
// for more (an exec plugin, a token, files to read, skipping TLS verification, a TLS
// server name of its own) is refused rather than half used.
func LoadCredential(kubeconfig []byte) (Credential, error) {
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return Credential{}, fmt.Errorf("not a valid kubeconfig: %s", errtext.FirstLine(err.Error()))
	}
	name := kc.CurrentContext
	kctx := kc.Contexts[name]
	if kctx == nil && name == "" && len(kc.Contexts) == 1 {
		for n, c := range kc.Contexts {
			name, kctx = n, c
		}
	}
	if kctx == nil {
		return Credential{}, fmt.Errorf("kubeconfig has no usable current context (current-context %q)", kc.CurrentContext)
	}
	cluster, user := kc.Clusters[kctx.Cluster], kc.AuthInfos[kctx.AuthInfo]
	var problems []string
	switch {
	case cluster == nil:
		problems = append(problems, fmt.Sprintf("context %q names cluster %q, which is missing", name, kctx.Cluster))
	case cluster.InsecureSkipTLSVerify:
		problems = append(problems, "the cluster skips TLS verification (insecure-skip-tls-verify)")
	case cluster.TLSServerName != "":
		problems = append(problems, "the cluster sets a TLS server name (tls-server-name); the probe verifies the URL's own host")
	case cluster.ProxyURL != "":
		problems = append(problems, "the cluster names an HTTP proxy (proxy-url); the probe dials every URL as written")
	}
	switch {
	case user == nil:
		problems = append(problems, fmt.Sprintf("context %q names user %q, which is missing", name, kctx.AuthInfo))
	case user.Exec != nil || user.AuthProvider != nil:
		problems = append(problems, "the user runs an exec plugin or auth provider")
	case user.ClientCertificate != "" || user.ClientKey != "" || user.TokenFile != "":
		problems = append(problems, "the user names files (client-certificate, client-key or tokenFile)")
	case user.Token != "" || user.Username != "" || user.Password != "" || user.Impersonate != "" || len(user.ImpersonateGroups) > 0:
		problems = append(problems, "the user carries a token, a password or impersonation besides a client certificate")
	case len(user.ClientCertificateData) == 0 || len(user.ClientKeyData) == 0:
		problems = append(problems, "the user has no inline client certificate and key (client-certificate-data, client-key-data)")
	}
	if len(problems) > 0 {
		return Credential{}, errors.New(strings.Join(problems, "; "))
	}
	if _, err := HTTPSURL(cluster.Server, false); err != nil {
		return Credential{}, fmt.Errorf("the cluster's server: %v", err)
	}
	cert, err := pemcert.Leaf(user.ClientCertificateData)
	if err != nil {
		return Credential{}, fmt.Errorf("client certificate: %v", err)
	}
	return Credential{
		Server: cluster.Server, CertPEM: user.ClientCertificateData, KeyPEM: user.ClientKeyData,
		Subject: fmt.Sprintf("client certificate %s issued by %s", cert.Subject, cert.Issuer),
	}, nil
}

// HTTPSURL parses raw as a URL the probe may follow: https, a host name (never an IP
// address: the probe reaches kcp by the names kcp's certificates carry, as the hub and
// providers do), no user info. With defaultPortOnly, a port other than 443 is refused
// too: the slice URLs are what providers anywhere follow, and a port only an edge or a
// port-forward answers on would work from one place only.
func HTTPSURL(raw string, defaultPortOnly bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%q is not a URL: %v", raw, err)
	case u.Scheme != "https":
		return nil, fmt.Errorf("%q is not an https URL", raw)
	case u.Hostname() == "":
		return nil, fmt.Errorf("%q has no host", raw)
	case u.User != nil:
		return nil, fmt.Errorf("%q carries user info", redact(u))
	}
	if _, err := netip.ParseAddr(u.Hostname()); err == nil {
		return nil, fmt.Errorf("%q names the address %s, not a host name: an address is where one network path ends, and kcp's serving certificates name hosts", raw, u.Hostname())
	}
	if defaultPortOnly && u.Port() != "" && u.Port() != "443" {
		return nil, fmt.Errorf("%q names port %s: a public shard URL is on port 443, the port of the shard's Service; another port is one only an edge or a port-forward answers on", raw, u.Port())
	}
	return u, nil
}

func redact(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// Trust is which certificate authorities verify kcp's servers.
type Trust struct {
	// CAPEM is the only CA bundle trusted (kcp's root-server-ca); with System it is nil.
	CAPEM []byte
	// System trusts the system's roots instead (the negative case: kcp's CA is private,
	// so every request must fail verification).
	System bool
}

// Client builds client-go configs for URLs with one credential and one trust.
type Client struct {
	Credential Credential
	Trust      Trust
	// DialContext, when set, replaces the dialer. The command never sets it: it dials
	// the URL's own host, resolved by the system's resolver. The unit tests set it to
	// reach their loopback servers under kcp's names.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// Timeout bounds each request that is not a watch.
	Timeout time.Duration
}

// Config is a client-go config for raw, used as written: the URL's host is the TLS
// server name (no override), the credential's client certificate is the only
// authentication, the trust is Trust's alone, and no HTTP proxy is used.
func (c *Client) Config(raw string, defaultPortOnly bool) (*rest.Config, error) {
	if _, err := HTTPSURL(raw, defaultPortOnly); err != nil {
		return nil, err
	}
	cfg := &rest.Config{
		Host: raw,
		TLSClientConfig: rest.TLSClientConfig{
			CertData: c.Credential.CertPEM,
			KeyData:  c.Credential.KeyPEM,
		},
		UserAgent: "railgrid-kcp-provider-probe",
		Timeout:   c.Timeout,
		Proxy:     func(*http.Request) (*url.URL, error) { return nil, nil },
		QPS:       50,
		Burst:     100,
	}
	if !c.Trust.System {
		// With CAData, client-go trusts exactly these certificates and not the system's.
		cfg.TLSClientConfig.CAData = c.Trust.CAPEM
	}
	if c.DialContext != nil {
		cfg.Dial = c.DialContext
	}
	return cfg, nil
}

// WatchConfig is Config without the request timeout, which would cut a watch.
func (c *Client) WatchConfig(raw string, defaultPortOnly bool) (*rest.Config, error) {
	cfg, err := c.Config(raw, defaultPortOnly)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 0
	return cfg, nil
}

// ReadCABundle checks that data holds at least one PEM certificate and nothing that is
// not one.
func ReadCABundle(data []byte) error {
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if strings.TrimSpace(string(rest)) != "" {
				return errors.New("holds data that is not PEM")
			}
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("holds a PEM %s block, not only certificates", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("a certificate does not parse: %v", err)
		}
		n++
	}
	if n == 0 {
		return errors.New("holds no PEM certificate")
	}
	return nil
}
