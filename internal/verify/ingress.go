package verify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode"
)

// probe is one anonymous request through the ingress and the answer it must get.
type probe struct {
	url        string
	wantStatus int
	// wantBody, when set, must appear in the response body.
	wantBody string
	why      string
}

func ingressProbes(o *Options) []probe {
	k := o.Config.Kcp
	probes := []probe{{
		url: "https://" + k.FrontProxy.Hostname + "/readyz", wantStatus: http.StatusOK,
		why: "the front proxy's readiness endpoint",
	}}
	for _, s := range k.AllShards() {
		probes = append(probes, probe{
			url: "https://" + s.Hostname + "/api", wantStatus: http.StatusForbidden, wantBody: "system:anonymous",
			why: "a healthy shard answers anonymous requests with 403 for system:anonymous",
		})
	}
	probes = append(probes, probe{
		url: "https://" + k.FrontProxy.Hostname + "/api", wantStatus: http.StatusUnauthorized,
		why: "the front proxy rejects unauthenticated requests",
	})
	return probes
}

// checkIngress sends anonymous requests through the ingress, retrying until every
// endpoint gives its expected answer or the check times out.
func checkIngress(ctx context.Context, o *Options) []Result {
	probes := ingressProbes(o)
	return poll(ctx, o.Interval, func(ctx context.Context) []Result {
		out := make([]Result, 0, len(probes))
		for _, p := range probes {
			out = append(out, runProbe(ctx, o.HTTP, p))
		}
		return out
	})
}

const bodyExcerpt = 120

func runProbe(ctx context.Context, client *http.Client, p probe) Result {
	item := "GET " + p.url
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return fail(CheckIngress, item, "bad request: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the item already names the method and URL
		}
		return fail(CheckIngress, item, "request failed: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	excerpt := describeBody(body)
	switch {
	case resp.StatusCode != p.wantStatus:
		return fail(CheckIngress, item, "answered %d, want %d (%s); %s", resp.StatusCode, p.wantStatus, p.why, excerpt)
	case p.wantBody != "" && !strings.Contains(string(body), p.wantBody):
		return fail(CheckIngress, item, "answered %d but the body does not mention %s (%s); %s", resp.StatusCode, p.wantBody, p.why, excerpt)
	case p.wantBody != "":
		return pass(CheckIngress, item, "%d for %s", resp.StatusCode, p.wantBody)
	}
	return pass(CheckIngress, item, "%d", resp.StatusCode)
}

// HTTPOptions configures the client that reaches the ingress.
type HTTPOptions struct {
	// Address, as host:port, is dialled for every request instead of resolving the URL's
	// host (the URL's host still gives SNI and the Host header). kind: 127.0.0.1:8443.
	Address string
	// CAFile is a PEM bundle to trust instead of the system roots.
	CAFile string
	// ExtraRootsPEM are PEM certificates trusted in addition to the system roots (when
	// CAFile is empty): kcp's CA on kind, whose edge passes TLS through to kcp.
	ExtraRootsPEM []byte
	// InsecureSkipVerify skips server certificate verification.
	InsecureSkipVerify bool
	// Dialer dials the connections (a net.Dialer when nil); tests inject one.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// RequestTimeout bounds one request (default 15s).
	RequestTimeout time.Duration
}

// NewHTTPClient builds the ingress client. It never follows redirects, so a status is
// the ingress's own answer, and it sends no credentials.
func NewHTTPClient(o HTTPOptions) (*http.Client, error) {
	if o.InsecureSkipVerify && o.CAFile != "" {
		return nil, errors.New("-ca-file and -insecure-skip-tls-verify exclude each other")
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.InsecureSkipVerify} //nolint:gosec // opt-in flag
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", o.CAFile)
		}
		tlsConfig.RootCAs = pool
	} else if len(o.ExtraRootsPEM) > 0 && !o.InsecureSkipVerify {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(o.ExtraRootsPEM) {
			return nil, errors.New("extra roots hold no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	dial := o.Dialer
	if dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		dial = d.DialContext
	}
	if o.Address != "" {
		if _, _, err := net.SplitHostPort(o.Address); err != nil {
			return nil, fmt.Errorf("ingress address %q must be host:port: %w", o.Address, err)
		}
		base := dial
		dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return base(ctx, network, o.Address)
		}
	}
	timeout := o.RequestTimeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:         dial,
			TLSClientConfig:     tlsConfig,
			TLSHandshakeTimeout: 10 * time.Second,
			DisableKeepAlives:   true,
			Proxy:               nil, // dial the ingress itself, never an HTTP proxy
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// describeBody summarises a response body for a message: the message of a Kubernetes
// Status, or the first characters of anything else, on one printable line.
func describeBody(body []byte) string {
	var status struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}
	label, text := "body", string(body)
	if json.Unmarshal(body, &status) == nil && status.Kind == "Status" && status.Message != "" {
		label, text = "message", status.Message
	}
	text = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, text)), " ")
	if text == "" {
		return "empty body"
	}
	if r := []rune(text); len(r) > bodyExcerpt {
		text = string(r[:bodyExcerpt]) + "..."
	}
	return label + ": " + text
}
