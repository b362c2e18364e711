package verifytest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// KcpBehaviour is how the fake kcp behind the owned Services answers. HealthyKcp gives
// the answers of the design document's "Verify" section and of a shard registered as
// the program configures it.
type KcpBehaviour struct {
	// ReadyzStatus and FrontAPIStatus are the front proxy's answers to an anonymous GET
	// /readyz and /api; ShardAPIStatus and ShardAPIBody every shard's to GET /api.
	ReadyzStatus   int
	FrontAPIStatus int
	ShardAPIStatus int
	ShardAPIBody   string
	// Shards are the Shards the root workspace lists.
	Shards []verify.KcpShard
	// OIDCUsers are the users kcp's OIDC authenticator accepts, by bearer token (an
	// unknown token is 401), and ForbiddenWorkspaces the workspaces where they lack the
	// access verb (403).
	OIDCUsers           map[string]OIDCUser
	ForbiddenWorkspaces []string
}

// OIDCUser is who kcp says an ID token's user is.
type OIDCUser struct {
	Username string
	Groups   []string
}

// Alice is the user of AliceToken: her email and groups, as the hub's issuer puts them
// in her ID token.
var (
	AliceEmail  = "alice@example.com"
	AliceGroups = []string{"ops", "devs"}
)

// AliceToken is an ID token of the hub's issuer for Alice, shaped as a JWT (header,
// claims, signature; the fake checks only that it knows the token, as kcp would after
// verifying it).
func AliceToken(issuer string) string {
	enc := func(v any) string {
		data, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(data)
	}
	return enc(map[string]any{"alg": "RS256", "typ": "JWT"}) + "." +
		enc(map[string]any{"iss": issuer, "aud": "railgrid", "email": AliceEmail, "email_verified": true, "groups": AliceGroups, "exp": Now.Add(time.Hour).Unix()}) +
		".c2lnbmF0dXJl"
}

// ForbiddenAnonymous is kcp's (kube-apiserver's) answer to an anonymous GET /api.
const ForbiddenAnonymous = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
	`"message":"forbidden: User \"system:anonymous\" cannot get path \"/api\"","reason":"Forbidden","details":{},"code":403}`

// HealthyKcp answers like the kcp the program deploys: readyz 200, anonymous /api 401
// at the front proxy and 403 for system:anonymous at a shard, and every configured shard
// registered with its base URL on its in-cluster Service and its virtual-workspace URL
// on its public hostname.
func HealthyKcp(cfg *config.Config) KcpBehaviour {
	b := KcpBehaviour{
		ReadyzStatus: http.StatusOK, FrontAPIStatus: http.StatusUnauthorized,
		ShardAPIStatus: http.StatusForbidden, ShardAPIBody: ForbiddenAnonymous,
	}
	user, groups := verify.WantOIDCIdentity(AliceEmail, AliceGroups)
	b.OIDCUsers = map[string]OIDCUser{AliceToken(cfg.OIDC.IssuerURL): {Username: user, Groups: append(groups, "system:authenticated")}}
	for _, s := range cfg.Kcp.AllShards() {
		name, service := naming.KcpShardName(s.Name), naming.ShardDeployment(s.Name)
		if s.Name == naming.RootShardName {
			name, service = naming.KcpRootShard, naming.RootShardDeployment(s.Name)
		}
		b.Shards = append(b.Shards, verify.KcpShard{
			Name:                name,
			BaseURL:             fmt.Sprintf("https://%s:%d", naming.OperatorServiceHost(service), naming.KcpPort),
			ExternalURL:         "https://" + verify.HubServerHost(),
			VirtualWorkspaceURL: naming.ShardVirtualWorkspaceURL(s.Hostname),
		})
	}
	return b
}

// Kcp is a fake kcp: one TLS server per owned Service (the front proxy, the root shard,
// each shard), reached through DialService as verify reaches them. Server certificates
// come from the CA with the names the operator and the program give them; the front
// proxy authenticates client certificates of the same CA (the user is the CN, the
// groups the O plus system:authenticated, as kcp's x509 authenticator reads them) and
// answers 401 to anything else.
type Kcp struct {
	servers map[string]*httptest.Server // by owned Service name

	mu    sync.Mutex
	dials []string
}

// NewKcp starts the fake kcp of cfg.
func NewKcp(t testing.TB, cfg *config.Config, ca *pki.CA, b KcpBehaviour) *Kcp {
	t.Helper()
	k := &Kcp{servers: map[string]*httptest.Server{}}
	front := naming.FrontProxyDeployment(naming.FrontProxyName)
	k.servers[naming.OwnedServiceName(naming.FrontProxyName)] = startKcpServer(t, ca, frontProxyHandler(ca, b), true,
		front, front+"."+naming.NamespaceKcp, naming.OperatorServiceHost(front), cfg.Kcp.FrontProxy.Hostname)
	for _, s := range cfg.Kcp.AllShards() {
		names := []string{"localhost", naming.OperatorServiceHost(naming.ShardDeployment(s.Name)), s.Hostname}
		if s.Name == naming.RootShardName {
			names = []string{naming.OperatorServiceHost(naming.RootShardDeployment(s.Name)), naming.OperatorServiceHost(front), s.Hostname}
		}
		k.servers[naming.OwnedServiceName(s.Name)] = startKcpServer(t, ca, shardHandler(b), false, names...)
	}
	return k
}

// DialService implements verify.ServiceDialer: it connects to the server behind an
// owned Service's kcp port and records the dial.
func (k *Kcp) DialService(ctx context.Context, namespace, service string, port int) (net.Conn, error) {
	k.mu.Lock()
	k.dials = append(k.dials, fmt.Sprintf("%s/%s:%d", namespace, service, port))
	k.mu.Unlock()
	srv, ok := k.servers[service]
	if namespace != naming.NamespaceKcp || port != naming.KcpPort || !ok {
		return nil, fmt.Errorf("no Service %s/%s port %d in the fake kcp", namespace, service, port)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
}

// Dials are the Services dialled so far, as namespace/name:port, deduplicated and sorted.
func (k *Kcp) Dials() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := slices.Clone(k.dials)
	slices.Sort(out)
	return slices.Compact(out)
}

func startKcpServer(t testing.TB, ca *pki.CA, h http.Handler, clientCerts bool, names ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverTLS(t, ca, names...)}, MinVersion: tls.VersionTLS12}
	if clientCerts {
		// Like kube-apiserver: ask for a certificate, verify it in the authenticator, so
		// a refused credential is a 401 rather than a failed handshake.
		srv.TLS.ClientAuth, srv.TLS.ClientCAs = tls.RequestClientCert, ca.Pool()
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

const unauthorized = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`

func frontProxyHandler(ca *pki.CA, b KcpBehaviour) http.Handler {
	pool := ca.Pool()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.WriteHeader(b.ReadyzStatus)
			_, _ = w.Write([]byte("ok"))
			return
		}
		user, groups, ok := authenticate(r, pool)
		bearer := false
		if token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found {
			u, known := b.OIDCUsers[token]
			user, groups, ok, bearer = u.Username, u.Groups, known, true
		}
		workspace, review := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/clusters/"), "/apis/authentication.k8s.io/v1/selfsubjectreviews")
		switch {
		case !ok && r.URL.Path == "/api":
			writeJSON(w, b.FrontAPIStatus, unauthorized)
		case !ok:
			writeJSON(w, http.StatusUnauthorized, unauthorized)
		case bearer && review && slices.Contains(b.ForbiddenWorkspaces, workspace):
			writeJSON(w, http.StatusForbidden, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"access denied"}`)
		case r.Method == http.MethodPost && review && (bearer || workspace == "root"):
			review, _ := json.Marshal(map[string]any{
				"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
				"metadata": map[string]any{"creationTimestamp": nil},
				"status":   map[string]any{"userInfo": map[string]any{"username": user, "groups": groups}},
			})
			writeJSON(w, http.StatusCreated, string(review))
		case r.Method == http.MethodGet && r.URL.Path == "/clusters/root/apis/core.kcp.io/v1alpha1/shards":
			writeJSON(w, http.StatusOK, shardList(b.Shards))
		default:
			http.NotFound(w, r)
		}
	})
}

// authenticate reads the user from a client certificate the CA issued for client
// authentication, at the fixed clock of the tests.
func authenticate(r *http.Request, pool *x509.CertPool) (user string, groups []string, ok bool) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return "", nil, false
	}
	cert := r.TLS.PeerCertificates[0]
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: Now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return "", nil, false
	}
	return cert.Subject.CommonName, append(slices.Clone(cert.Subject.Organization), "system:authenticated"), true
}

func shardList(shards []verify.KcpShard) string {
	items := make([]any, 0, len(shards))
	for _, s := range shards {
		items = append(items, map[string]any{
			"apiVersion": "core.kcp.io/v1alpha1", "kind": "Shard",
			"metadata": map[string]any{"name": s.Name},
			"spec":     map[string]any{"baseURL": s.BaseURL, "externalURL": s.ExternalURL, "virtualWorkspaceURL": s.VirtualWorkspaceURL},
		})
	}
	out, _ := json.Marshal(map[string]any{"apiVersion": "core.kcp.io/v1alpha1", "kind": "ShardList", "metadata": map[string]any{}, "items": items})
	return string(out)
}

func shardHandler(b KcpBehaviour) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api" {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, b.ShardAPIStatus, b.ShardAPIBody)
	})
}
