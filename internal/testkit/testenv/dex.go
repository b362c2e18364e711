package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/crypto/bcrypt"
	"sigs.k8s.io/yaml"

	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
)

// DexConfig is the configuration of a Dex that signs users in with the password grant:
// static clients, static users in its password database, memory storage, and HTTPS
// only. YAML renders it in the format of Dex's cmd/dex/config.go.
type DexConfig struct {
	// Issuer is the URL Dex names itself by (iss) and serves discovery under.
	Issuer string
	// HTTPSAddress is where Dex serves (web.https), with TLSCert and TLSKey, the paths of
	// its serving certificate and key as Dex sees them.
	HTTPSAddress    string
	TLSCert, TLSKey string
	// TelemetryAddress, when set, serves /healthz/live and /healthz/ready over http
	// (telemetry.http), which Dex's chart probes.
	TelemetryAddress string
	// Clients are the OAuth2 clients; Users the users of the password database.
	Clients []DexClient
	Users   []DexUser
	// IDTokenExpiry is how long an ID token is valid (expiry.idTokens); zero means
	// Dex's default, 24 hours. Dex takes any positive duration.
	IDTokenExpiry time.Duration
}

// DexClient is a static OAuth2 client.
type DexClient struct {
	ID, Secret, Name string
}

// DexUser is a static user of Dex's password database. Users sign in with Email.
type DexUser struct {
	Email, Username, UserID string
	// Password is the plain password: YAML stores only its bcrypt hash.
	Password string
	// Groups are the user's groups, in ID tokens asked for with the groups scope.
	Groups []string
	// EmailUnverified makes the user's ID tokens say email_verified: false (Dex's
	// default for a static user is true).
	EmailUnverified bool
}

// dexConfigFile mirrors the fields of Dex's Config (cmd/dex/config.go) that DexConfig sets.
type dexConfigFile struct {
	Issuer           string              `json:"issuer"`
	Storage          dexStorage          `json:"storage"`
	Web              dexWeb              `json:"web"`
	Telemetry        *dexTelemetry       `json:"telemetry,omitempty"`
	OAuth2           dexOAuth2           `json:"oauth2"`
	Expiry           *dexExpiry          `json:"expiry,omitempty"`
	EnablePasswordDB bool                `json:"enablePasswordDB"`
	StaticClients    []dexStaticClient   `json:"staticClients"`
	StaticPasswords  []dexStaticPassword `json:"staticPasswords"`
}

type dexStorage struct {
	Type string `json:"type"`
}

type dexWeb struct {
	HTTPS   string `json:"https"`
	TLSCert string `json:"tlsCert"`
	TLSKey  string `json:"tlsKey"`
}

type dexTelemetry struct {
	HTTP string `json:"http"`
}

type dexOAuth2 struct {
	// PasswordConnector names the connector the password grant signs in with: "local"
	// is the password database.
	PasswordConnector string `json:"passwordConnector"`
}

type dexExpiry struct {
	IDTokens string `json:"idTokens"`
}

type dexStaticClient struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
	Name   string `json:"name,omitempty"`
}

type dexStaticPassword struct {
	Email         string   `json:"email"`
	Hash          string   `json:"hash"`
	Username      string   `json:"username"`
	UserID        string   `json:"userID"`
	Groups        []string `json:"groups,omitempty"`
	EmailVerified bool     `json:"emailVerified"`
}

// YAML renders c as Dex's configuration file, with each user's password bcrypt-hashed at
// Dex's minimum cost (10; Dex refuses a hash below it).
func (c DexConfig) YAML() ([]byte, error) {
	f := dexConfigFile{
		Issuer:           c.Issuer,
		Storage:          dexStorage{Type: "memory"},
		Web:              dexWeb{HTTPS: c.HTTPSAddress, TLSCert: c.TLSCert, TLSKey: c.TLSKey},
		OAuth2:           dexOAuth2{PasswordConnector: "local"},
		EnablePasswordDB: true,
	}
	if c.TelemetryAddress != "" {
		f.Telemetry = &dexTelemetry{HTTP: c.TelemetryAddress}
	}
	if c.IDTokenExpiry != 0 {
		f.Expiry = &dexExpiry{IDTokens: c.IDTokenExpiry.String()}
	}
	for _, cl := range c.Clients {
		f.StaticClients = append(f.StaticClients, dexStaticClient(cl))
	}
	for _, u := range c.Users {
		hash, err := bcrypt.GenerateFromPassword([]byte(u.Password), bcrypt.DefaultCost)
		if err != nil {
			return nil, fmt.Errorf("hashing the password of %s: %w", u.Email, err)
		}
		f.StaticPasswords = append(f.StaticPasswords, dexStaticPassword{
			Email: u.Email, Hash: string(hash), Username: u.Username, UserID: u.UserID,
			Groups: u.Groups, EmailVerified: !u.EmailUnverified,
		})
	}
	return yaml.Marshal(f)
}

// Dex is a Dex process serving on loopback with a CA of its own, stopped when the test
// that started it ends.
type Dex struct {
	// Issuer is the issuer URL it names itself by; URL is where it serves the issuer's
	// endpoints, https://127.0.0.1:<port> and the issuer's path: the same unless StartDex
	// was given another Dex's issuer (Dex routes under its issuer's path, whatever the
	// host).
	Issuer, URL string
	// CAFile holds CAPEM, the CA of its serving certificate, as kubelogin's
	// --certificate-authority and kcp's --oidc-ca-file take it (empty for DexAt).
	CAFile string
	CAPEM  []byte
	// Process is the running server (nil for DexAt).
	Process *Process

	client *http.Client
}

// StartDex starts bin (hack/build-tools.sh dex) serving cfg on a free port of loopback,
// with a serving certificate from a new CA named after name; it sets cfg's HTTPSAddress,
// TLSCert and TLSKey, and its Issuer to where it serves unless cfg names one: another
// Dex's issuer makes a Dex whose tokens claim that issuer but are signed with keys of its
// own. Its configuration, certificates and log go to dir. It returns once the discovery
// document answers with the issuer.
func StartDex(t *testing.T, ctx context.Context, bin, dir, name string, cfg DexConfig) *Dex {
	t.Helper()
	if cfg.HTTPSAddress != "" || cfg.TLSCert != "" || cfg.TLSKey != "" {
		t.Fatal("StartDex chooses the address and the serving certificate; leave them empty")
	}
	address := net.JoinHostPort(Loopback, strconv.Itoa(freePorts(t, 1)[0]))
	cfg.HTTPSAddress = address
	if cfg.Issuer == "" {
		cfg.Issuer = "https://" + address
	}
	issuer, err := url.Parse(cfg.Issuer)
	if err != nil || issuer.Scheme != "https" {
		t.Fatalf("Dex's issuer %q is not an https URL (%v)", cfg.Issuer, err)
	}
	cfg.TLSCert, cfg.TLSKey = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	d := &Dex{Issuer: cfg.Issuer, URL: "https://" + address + strings.TrimSuffix(issuer.Path, "/"), CAFile: filepath.Join(dir, "ca.crt")}
	if d.CAPEM, err = writeDexServingCertificate(name, cfg.TLSCert, cfg.TLSKey, d.CAFile); err != nil {
		t.Fatalf("Dex's serving certificate: %v", err)
	}
	config, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	configFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configFile, config, 0o600); err != nil {
		t.Fatal(err)
	}
	if d.client, err = dexClient(d.CAPEM, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.client.CloseIdleConnections)

	d.Process = StartProcess(t, "dex "+name, bin, filepath.Join(dir, "dex.log"), "serve", configFile)
	var last string
	if err := WaitFor(ctx, 30*time.Second, d.Process, func() (bool, error) {
		issuer, err := d.discoveredIssuer(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if issuer != d.Issuer {
			return false, fmt.Errorf("Dex's discovery names the issuer %q, want %q", issuer, d.Issuer)
		}
		return true, nil
	}); err != nil {
		t.Fatalf("Dex did not serve its discovery document: %v (last: %s)\n%s", err, last, d.Process.Tail(30))
	}
	return d
}

// DexAt is a Dex that runs elsewhere (a pod), for its password grant and its keys:
// issuer is the issuer it names itself by, url where this process reaches its endpoints,
// caPEM the CA of its serving certificate, and dial, if not nil, how to reach url (from
// another network namespace, say). It has no Process.
func DexAt(issuer, url string, caPEM []byte, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*Dex, error) {
	client, err := dexClient(caPEM, dial)
	if err != nil {
		return nil, err
	}
	return &Dex{Issuer: issuer, URL: strings.TrimSuffix(url, "/"), CAPEM: caPEM, client: client}, nil
}

// dexClient is an HTTP client that trusts only caPEM.
func dexClient(caPEM []byte, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in Dex's CA PEM")
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DialContext:     dial,
	}}, nil
}

// writeDexServingCertificate makes a CA named after name and a serving certificate for
// Loopback signed by it, and writes the certificate, its key and the CA.
func writeDexServingCertificate(name, certFile, keyFile, caFile string) (caPEM []byte, err error) {
	ca, err := pki.NewCA("railgrid-kcp-" + name + "-dex-ca")
	if err != nil {
		return nil, err
	}
	serving, err := ca.ServerCert([]string{Loopback}, pki.CommonName("dex"))
	if err != nil {
		return nil, err
	}
	for path, data := range map[string][]byte{certFile: serving.CertPEM, keyFile: serving.KeyPEM, caFile: ca.PEM} {
		if err := pki.WriteFile(path, data); err != nil {
			return nil, err
		}
	}
	return ca.PEM, nil
}

// discoveredIssuer reads the issuer from Dex's discovery document.
func (d *Dex) discoveredIssuer(ctx context.Context) (string, error) {
	var doc struct {
		Issuer string `json:"issuer"`
	}
	err := d.getJSON(ctx, d.URL+"/.well-known/openid-configuration", &doc)
	return doc.Issuer, err
}

func (d *Dex) getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, v)
}

// DexTokenError is Dex's refusal of a token request: the HTTP status and the OAuth2
// error and its description.
type DexTokenError struct {
	Status            int
	Code, Description string
}

func (e *DexTokenError) Error() string {
	return fmt.Sprintf("Dex refused the token request: %d %s: %s", e.Status, e.Code, e.Description)
}

// PasswordGrant asks Dex for an ID token with the password grant, as the client
// (authenticated with its secret) for the user with email and password, with the scope
// openid and the extra scopes (email, groups). A refusal is a *DexTokenError.
func (d *Dex) PasswordGrant(ctx context.Context, client DexClient, email, password string, extraScopes ...string) (string, error) {
	form := url.Values{
		"grant_type": {"password"},
		"username":   {email},
		"password":   {password},
		"scope":      {strings.Join(append([]string{"openid"}, extraScopes...), " ")},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(client.ID), url.QueryEscape(client.Secret))
	resp, err := d.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	var tok struct {
		IDToken          string `json:"id_token"`
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &tok); err != nil {
		return "", fmt.Errorf("Dex's token response (%s): %w: %s", resp.Status, err, body)
	}
	if resp.StatusCode != http.StatusOK {
		return "", &DexTokenError{Status: resp.StatusCode, Code: tok.Error, Description: tok.ErrorDescription}
	}
	if tok.IDToken == "" {
		return "", fmt.Errorf("Dex's token response has no id_token: %s", body)
	}
	return tok.IDToken, nil
}

// DexVersion is the version the dex binary reports (dex version), the tag of its image.
func DexVersion(bin string) (string, error) {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w", bin, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "Dex Version: "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s version printed no Dex Version: %s", bin, out)
}

// IDTokenClaims are the claims of a Dex ID token that kcp's OIDC authenticator reads.
type IDTokenClaims struct {
	Issuer   string        `json:"iss"`
	Subject  string        `json:"sub"`
	Audience tokenAudience `json:"aud"`
	// Expiry and IssuedAt are seconds since the epoch.
	Expiry        int64    `json:"exp"`
	IssuedAt      int64    `json:"iat"`
	Email         string   `json:"email"`
	EmailVerified *bool    `json:"email_verified"`
	Groups        []string `json:"groups"`
	Name          string   `json:"name"`
}

// tokenAudience is aud, which a JWT gives as one string or as a list.
type tokenAudience []string

func (a *tokenAudience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = tokenAudience{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(a))
}

// VerifiedClaims checks the signature of idToken against this Dex's signing keys (its
// jwks_uri, /keys) and returns its claims. It checks neither the expiry nor the audience:
// the tests look at those claims themselves.
func (d *Dex) VerifiedClaims(ctx context.Context, idToken string) (IDTokenClaims, error) {
	var claims IDTokenClaims
	// Dex signs with RS256 (its signer's default).
	jws, err := jose.ParseSigned(idToken, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return claims, fmt.Errorf("not a signed JWT: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return claims, fmt.Errorf("%d signatures, want 1", len(jws.Signatures))
	}
	var keys jose.JSONWebKeySet
	if err := d.getJSON(ctx, d.URL+"/keys", &keys); err != nil {
		return claims, err
	}
	kid := jws.Signatures[0].Header.KeyID
	candidates := keys.Key(kid)
	if len(candidates) == 0 {
		return claims, fmt.Errorf("signed with key %q, which %s does not publish", kid, d.Issuer)
	}
	payload, err := jws.Verify(candidates[0])
	if err != nil {
		return claims, fmt.Errorf("signature by key %q of %s: %w", kid, d.Issuer, err)
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return claims, fmt.Errorf("the token's claims: %w", err)
	}
	return claims, nil
}
