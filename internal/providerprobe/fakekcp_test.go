package providerprobe_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/railgrid/railgrid-kcp/internal/providerprobe"
	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
)

// Names of the fake kcp: the front proxy the hub kubeconfig names, and two shards'
// public names. The probe reaches them by these names only; the tests' dialer sends
// every connection to the one loopback listener, as split-horizon DNS sends them to the
// Services.
const (
	frontHost = "frontproxy-front-proxy.kcp-system.svc.cluster.local"
	frontURL  = "https://" + frontHost + ":6443"
	rootHost  = "root.kcp.test"
	alphaHost = "alpha.kcp.test"
)

// request is what the fake kcp saw of one request.
type request struct {
	Method, Host, Path, ServerName, User string
}

// fakeKcp is one TLS listener that answers for the front proxy and the shards: its
// serving certificate names all three hosts and comes from serverCA; it asks for client
// certificates of clientCA and reads the user from them as kcp's x509 authenticator
// does (CN the user, O the groups). handle answers what the test scripts.
type fakeKcp struct {
	srv      *httptest.Server
	serverCA *pki.CA
	clientCA *pki.CA

	mu       sync.Mutex
	requests []request
}

func newFakeKcp(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, user string, groups []string)) *fakeKcp {
	t.Helper()
	k := &fakeKcp{serverCA: pki.MustCA(t, "root-server-ca"), clientCA: pki.MustCA(t, "root-client-ca")}
	pair := k.serverCA.MustServerCert(t, []string{frontHost, rootHost, alphaHost}).MustTLS(t)
	clients := k.clientCA.Pool()
	k.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// As kcp's x509 authenticator: a certificate of another CA is no user (401),
		// not a failed handshake.
		var user string
		var groups []string
		if peers := r.TLS.PeerCertificates; len(peers) > 0 {
			if _, err := peers[0].Verify(x509.VerifyOptions{Roots: clients, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
				user, groups = peers[0].Subject.CommonName, append(peers[0].Subject.Organization, "system:authenticated")
			}
		}
		k.mu.Lock()
		k.requests = append(k.requests, request{Method: r.Method, Host: r.Host, Path: r.URL.Path, ServerName: r.TLS.ServerName, User: user})
		k.mu.Unlock()
		if user == "" {
			writeStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
			return
		}
		handle(w, r, user, groups)
	}))
	k.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequestClientCert}
	k.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	k.srv.StartTLS()
	t.Cleanup(k.srv.Close)
	return k
}

// dial sends every connection to the fake, whatever name it was for.
func (k *fakeKcp) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, k.srv.Listener.Addr().String())
}

func (k *fakeKcp) seen() []request {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]request(nil), k.requests...)
}

// client is the probe's client with the hub credential issued by clientCA and the
// trust given.
func (k *fakeKcp) client(t *testing.T, clientCA *pki.CA, trust providerprobe.Trust, user string, groups ...string) *providerprobe.Client {
	t.Helper()
	c := clientCA.MustClientCert(t, user, groups)
	cred, err := providerprobe.LoadCredential(verifytest.Kubeconfig(t, frontURL+"/clusters/root", k.serverCA.PEM, c.CertPEM, c.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	return &providerprobe.Client{Credential: cred, Trust: trust, DialContext: k.dial, Timeout: 5 * time.Second}
}

func writeJSON(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(obj)
}

func writeStatus(w http.ResponseWriter, code int, reason, message string) {
	writeJSON(w, code, map[string]any{
		"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": message,
	})
}

// selfSubjectReview answers a SelfSubjectReview with the user the certificate names.
func selfSubjectReview(w http.ResponseWriter, r *http.Request, user string, groups []string) bool {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/apis/authentication.k8s.io/v1/selfsubjectreviews") {
		return false
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
		"status": map[string]any{"userInfo": map[string]any{"username": user, "groups": groups}},
	})
	return true
}
