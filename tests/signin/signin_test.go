// Package signin proves, against real Dex processes and the real kubelogin and kubectl
// binaries, with no cluster, the tokens that users present to kcp: what Dex's password
// grant gives alice@example.com, what the command line of the kubectl oidc-login plugin
// prints, that kubectl runs it from a kubeconfig and sends its token, and each bad token
// the end-to-end test shows kcp refusing, bad in exactly one way. Every server listens on
// loopback.
//
// It runs dex (hack/build-tools.sh dex), kubectl-oidc_login (kubelogin) and kubectl
// (kube) from PATH. Without them it fails, unless RAILGRID_SKIP_SIGNIN=1; `go test
// -short` skips it.
package signin

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

const envSkip = "RAILGRID_SKIP_SIGNIN"

// clientID is the kind stack's oidc.clientID, the audience kcp accepts.
const clientID = "railgrid"

// binaries are the executables the tests run.
type binaries struct{ dex, kubelogin, kubectl string }

func requireBinaries(t *testing.T) binaries {
	t.Helper()
	testenv.SkipIfShortOrDisabled(t, envSkip, "starts Dex and runs kubelogin and kubectl")
	var exe testenv.Executables
	b := binaries{dex: exe.Find("dex", ""), kubelogin: exe.Find("kubectl-oidc_login", ""), kubectl: exe.Find("kubectl", "")}
	exe.Require(t, "the sign-in test", `Put them on PATH: eval "$(hack/build-tools.sh env dex kubelogin kube)"`, envSkip)
	return b
}

// users are the static users of the tests' Dex, each with a password of this run.
type users struct {
	// alice is in the groups ops and devs; bob is in none; carol's email is not verified.
	alice, bob, carol testenv.DexUser
}

func newUsers(t *testing.T) users {
	return users{
		alice: testenv.DexUser{Email: "alice@example.com", Username: "alice", UserID: "alice-id",
			Password: testenv.RandomHex(t, 12), Groups: []string{"ops", "devs"}},
		bob: testenv.DexUser{Email: "bob@example.com", Username: "bob", UserID: "bob-id",
			Password: testenv.RandomHex(t, 12)},
		carol: testenv.DexUser{Email: "carol@example.com", Username: "carol", UserID: "carol-id",
			Password: testenv.RandomHex(t, 12), Groups: []string{"ops"}, EmailUnverified: true},
	}
}

// signin is a Dex as the hub runs it, with the client kcp accepts and another.
type signin struct {
	bin           binaries
	dex           *testenv.Dex
	users         users
	client, other testenv.DexClient
}

func start(t *testing.T, ctx context.Context) *signin {
	t.Helper()
	s := &signin{
		bin:    requireBinaries(t),
		users:  newUsers(t),
		client: testenv.DexClient{ID: clientID, Secret: testenv.RandomHex(t, 16), Name: "kcp"},
		other:  testenv.DexClient{ID: "another-client", Secret: testenv.RandomHex(t, 16), Name: "another application"},
	}
	s.dex = testenv.StartDex(t, ctx, s.bin.dex, t.TempDir(), "hub", testenv.DexConfig{
		Clients: []testenv.DexClient{s.client, s.other},
		Users:   []testenv.DexUser{s.users.alice, s.users.bob, s.users.carol},
	})
	return s
}

// logClaims logs the claims kcp reads, for the reader of a test's log.
func logClaims(t *testing.T, what string, c testenv.IDTokenClaims) {
	t.Helper()
	verified := "missing"
	if c.EmailVerified != nil {
		verified = fmt.Sprint(*c.EmailVerified)
	}
	t.Logf("%s: iss %s, aud %v, sub %s, email %s, email_verified %s, groups %v, exp - iat %d s",
		what, c.Issuer, []string(c.Audience), c.Subject, c.Email, verified, c.Groups, c.Expiry-c.IssuedAt)
}

// goodClaims checks the claims of a token kcp would take as the user's: Dex's issuer,
// kcp's client as the only audience, the user's email, verified, and the user's groups.
func goodClaims(t *testing.T, c testenv.IDTokenClaims, issuer string, user testenv.DexUser) {
	t.Helper()
	require.Equal(t, issuer, c.Issuer, "iss")
	require.Equal(t, []string{clientID}, []string(c.Audience), "aud")
	require.Equal(t, user.Email, c.Email, "email")
	require.NotNil(t, c.EmailVerified, "email_verified is missing")
	require.True(t, *c.EmailVerified, "email_verified")
	require.Equal(t, user.Groups, c.Groups, "groups")
	require.Greater(t, c.Expiry, time.Now().Unix(), "exp is past")
}

func TestDexsPasswordGrantGivesAliceHerEmailAndGroups(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := start(t, ctx)

	token, err := s.dex.PasswordGrant(ctx, s.client, s.users.alice.Email, s.users.alice.Password, "email", "groups")
	require.NoError(t, err)
	claims, err := s.dex.VerifiedClaims(ctx, token)
	require.NoError(t, err)
	goodClaims(t, claims, s.dex.Issuer, s.users.alice)
	require.Equal(t, []string{"ops", "devs"}, claims.Groups)
	require.Equal(t, int64(24*time.Hour/time.Second), claims.Expiry-claims.IssuedAt, "Dex's default ID token lifetime is 24 h")
	logClaims(t, "alice's token", claims)

	// Groups come only with the groups scope, which kubelogin must ask for.
	token, err = s.dex.PasswordGrant(ctx, s.client, s.users.alice.Email, s.users.alice.Password, "email")
	require.NoError(t, err)
	claims, err = s.dex.VerifiedClaims(ctx, token)
	require.NoError(t, err)
	require.Equal(t, s.users.alice.Email, claims.Email)
	require.Empty(t, claims.Groups, "groups without the groups scope")

	// The same Dex reached as the end-to-end test reaches one in a pod.
	remote, err := testenv.DexAt(s.dex.Issuer, s.dex.URL, s.dex.CAPEM, nil)
	require.NoError(t, err)
	token, err = remote.PasswordGrant(ctx, s.client, s.users.alice.Email, s.users.alice.Password, "email", "groups")
	require.NoError(t, err)
	claims, err = remote.VerifiedClaims(ctx, token)
	require.NoError(t, err)
	goodClaims(t, claims, s.dex.Issuer, s.users.alice)
}

// getTokenArgs is the kubelogin command line that signs user in with the password grant,
// trusting Dex's CA, with its token cache in cacheDir.
func (s *signin) getTokenArgs(dex *testenv.Dex, user testenv.DexUser, cacheDir string) []string {
	return []string{"get-token",
		"--oidc-issuer-url=" + dex.Issuer,
		"--oidc-client-id=" + s.client.ID,
		"--oidc-client-secret=" + s.client.Secret,
		"--grant-type=password",
		"--username=" + user.Email,
		"--password=" + user.Password,
		"--certificate-authority=" + dex.CAFile,
		"--oidc-extra-scope=email",
		"--oidc-extra-scope=groups",
		"--token-cache-dir=" + cacheDir,
	}
}

// execCredential is what a kubectl credential plugin prints.
type execCredential struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Status     struct {
		Token               string    `json:"token"`
		ExpirationTimestamp time.Time `json:"expirationTimestamp"`
	} `json:"status"`
}

// getToken runs kubelogin's get-token and returns the credential it prints.
func (s *signin) getToken(t *testing.T, ctx context.Context, args []string) execCredential {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, s.bin.kubelogin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "kubectl-oidc_login get-token: %s", stderr.String())
	var cred execCredential
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &cred), "kubelogin's output: %s", stdout.String())
	return cred
}

func TestKubeloginSignsAliceInWithThePasswordGrant(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := start(t, ctx)
	cacheDir := t.TempDir()

	cred := s.getToken(t, ctx, s.getTokenArgs(s.dex, s.users.alice, cacheDir))
	require.Equal(t, "ExecCredential", cred.Kind)
	// Without KUBERNETES_EXEC_INFO (kubectl sets it), kubelogin speaks v1beta1.
	require.Equal(t, "client.authentication.k8s.io/v1beta1", cred.APIVersion)
	claims, err := s.dex.VerifiedClaims(ctx, cred.Status.Token)
	require.NoError(t, err)
	logClaims(t, "kubelogin's token for alice", claims)
	goodClaims(t, claims, s.dex.Issuer, s.users.alice)
	require.Equal(t, claims.Expiry, cred.Status.ExpirationTimestamp.Unix(), "the credential expires with its token")
	cached, err := os.ReadDir(cacheDir)
	require.NoError(t, err)
	require.NotEmpty(t, cached, "kubelogin cached no token in --token-cache-dir")

	t.Run("kubectl runs it from a kubeconfig and sends its token", func(t *testing.T) {
		got := s.kubectlBearer(t, ctx, s.getTokenArgs(s.dex, s.users.alice, t.TempDir()))
		claims, err := s.dex.VerifiedClaims(ctx, got)
		require.NoError(t, err)
		goodClaims(t, claims, s.dex.Issuer, s.users.alice)
	})

	t.Run("a wrong password gets no token", func(t *testing.T) {
		wrong := s.users.alice
		wrong.Password = "not-" + wrong.Password
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, s.bin.kubelogin, s.getTokenArgs(s.dex, wrong, t.TempDir())...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "kubelogin signed alice in with a wrong password: %s", stdout.String())
		require.Empty(t, stdout.String(), "kubelogin printed a credential for a wrong password")
		require.Contains(t, stderr.String(), "Invalid username or password")
	})
}

// kubectlBearer runs `kubectl get --raw /version` against an API server stand-in on
// loopback, with a kubeconfig whose user runs `kubectl oidc-login` with args, and returns
// the bearer token kubectl sent.
func (s *signin) kubectlBearer(t *testing.T, ctx context.Context, args []string) string {
	t.Helper()
	var mu sync.Mutex
	var bearer string
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			http.Error(w, "no bearer token", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		bearer = token
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"34","gitVersion":"v1.34.4"}`))
	}))
	server.StartTLS()
	t.Cleanup(server.Close)
	require.True(t, strings.HasPrefix(server.URL, "https://"+testenv.Loopback+":"), "the stand-in serves at %s", server.URL)

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kcp"] = &clientcmdapi.Cluster{Server: server.URL, CertificateAuthorityData: serverCA(t, server)}
	cfg.AuthInfos["oidc"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion:      "client.authentication.k8s.io/v1",
		Command:         "kubectl",
		Args:            append([]string{"oidc-login"}, args...),
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	cfg.Contexts["kcp"] = &clientcmdapi.Context{Cluster: "kcp", AuthInfo: "oidc"}
	cfg.CurrentContext = "kcp"
	require.NoError(t, clientcmd.WriteToFile(*cfg, kubeconfig))

	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, s.bin.kubectl, "--kubeconfig="+kubeconfig, "--cache-dir="+filepath.Join(dir, "cache"), "get", "--raw", "/version")
	// The plugin is found as kubectl finds plugins: kubectl-oidc_login on PATH.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(s.bin.kubelogin)+string(os.PathListSeparator)+filepath.Dir(s.bin.kubectl))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "kubectl: %s", stderr.String())
	require.Contains(t, stdout.String(), `"gitVersion":"v1.34.4"`)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, bearer, "kubectl sent no bearer token")
	return bearer
}

// serverCA is the stand-in's certificate, PEM-encoded: httptest's is its own CA.
func serverCA(t *testing.T, server *httptest.Server) []byte {
	t.Helper()
	cert := server.Certificate()
	require.NotNil(t, cert)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// The tokens the end-to-end test shows kcp refusing (or, for bob, authenticating but
// not authorizing) are each bad in one way, the rest of the token being as good as
// alice's.
func TestEachBadTokenIsBadInOneWay(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := start(t, ctx)
	alice := s.users.alice

	t.Run("for another client", func(t *testing.T) {
		token, err := s.dex.PasswordGrant(ctx, s.other, alice.Email, alice.Password, "email", "groups")
		require.NoError(t, err)
		claims, err := s.dex.VerifiedClaims(ctx, token)
		require.NoError(t, err)
		logClaims(t, "for another client", claims)
		require.Equal(t, []string{s.other.ID}, []string(claims.Audience), "aud")
		claims.Audience = []string{clientID}
		goodClaims(t, claims, s.dex.Issuer, alice)
	})

	t.Run("from another Dex with another CA", func(t *testing.T) {
		// It claims the hub's issuer, but signs with keys of its own and serves with a
		// certificate of another CA.
		other := testenv.StartDex(t, ctx, s.bin.dex, t.TempDir(), "impostor", testenv.DexConfig{
			Issuer:  s.dex.Issuer,
			Clients: []testenv.DexClient{s.client},
			Users:   []testenv.DexUser{alice},
		})
		token, err := other.PasswordGrant(ctx, s.client, alice.Email, alice.Password, "email", "groups")
		require.NoError(t, err)
		claims, err := other.VerifiedClaims(ctx, token)
		require.NoError(t, err)
		logClaims(t, "from another Dex", claims)
		goodClaims(t, claims, s.dex.Issuer, alice)
		_, err = s.dex.VerifiedClaims(ctx, token)
		require.Error(t, err, "the hub's Dex verifies a token another Dex signed")
		t.Logf("the hub's Dex refuses it: %v", err)

		// The hub's CA does not verify the other Dex's certificate.
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(s.dex.CAPEM))
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		defer client.CloseIdleConnections()
		resp, err := client.Get(other.URL + "/.well-known/openid-configuration")
		if err == nil {
			resp.Body.Close()
		}
		var unknownAuthority x509.UnknownAuthorityError
		require.ErrorAs(t, err, &unknownAuthority, "the other Dex's certificate, checked with the hub's CA")
	})

	t.Run("expired", func(t *testing.T) {
		// Dex takes any positive ID token lifetime; one second makes a token that
		// expires at once.
		short := testenv.StartDex(t, ctx, s.bin.dex, t.TempDir(), "short-lived", testenv.DexConfig{
			Clients:       []testenv.DexClient{s.client},
			Users:         []testenv.DexUser{alice},
			IDTokenExpiry: time.Second,
		})
		token, err := short.PasswordGrant(ctx, s.client, alice.Email, alice.Password, "email", "groups")
		require.NoError(t, err)
		claims, err := short.VerifiedClaims(ctx, token)
		require.NoError(t, err)
		logClaims(t, "expired", claims)
		require.Equal(t, int64(1), claims.Expiry-claims.IssuedAt, "exp - iat")
		waitPast(t, ctx, claims.Expiry)
		require.LessOrEqual(t, claims.Expiry, time.Now().Unix()-1, "exp is not past")
		claims.Expiry = time.Now().Add(time.Hour).Unix()
		goodClaims(t, claims, short.Issuer, alice)

		// kubelogin hands out no expired token from its cache: it signs in again.
		cacheDir := t.TempDir()
		first := s.getToken(t, ctx, s.getTokenArgs(short, alice, cacheDir))
		firstClaims, err := short.VerifiedClaims(ctx, first.Status.Token)
		require.NoError(t, err)
		waitPast(t, ctx, firstClaims.Expiry)
		second := s.getToken(t, ctx, s.getTokenArgs(short, alice, cacheDir))
		require.NotEqual(t, first.Status.Token, second.Status.Token, "kubelogin printed its cached, expired token")
		secondClaims, err := short.VerifiedClaims(ctx, second.Status.Token)
		require.NoError(t, err)
		require.Greater(t, secondClaims.Expiry, firstClaims.Expiry)
	})

	t.Run("with an unverified email", func(t *testing.T) {
		carol := s.users.carol
		token, err := s.dex.PasswordGrant(ctx, s.client, carol.Email, carol.Password, "email", "groups")
		require.NoError(t, err)
		claims, err := s.dex.VerifiedClaims(ctx, token)
		require.NoError(t, err)
		logClaims(t, "with an unverified email", claims)
		require.NotNil(t, claims.EmailVerified, "email_verified is missing")
		require.False(t, *claims.EmailVerified, "email_verified")
		verified := true
		claims.EmailVerified = &verified
		goodClaims(t, claims, s.dex.Issuer, carol)
	})

	t.Run("bob, in no group", func(t *testing.T) {
		bob := s.users.bob
		token, err := s.dex.PasswordGrant(ctx, s.client, bob.Email, bob.Password, "email", "groups")
		require.NoError(t, err)
		claims, err := s.dex.VerifiedClaims(ctx, token)
		require.NoError(t, err)
		logClaims(t, "bob's token", claims)
		require.Empty(t, claims.Groups)
		goodClaims(t, claims, s.dex.Issuer, bob)
	})
}

// waitPast waits until the clock is past exp (seconds since the epoch): a token whose
// exp is before now is expired to kcp and to kubelogin.
func waitPast(t *testing.T, ctx context.Context, exp int64) {
	t.Helper()
	select {
	case <-time.After(time.Until(time.Unix(exp+1, 0))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}

func TestDexRefusesAWrongPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := start(t, ctx)
	for _, c := range []struct{ name, email, password string }{
		{"alice with another password", s.users.alice.Email, "not-" + s.users.alice.Password},
		{"alice with bob's password", s.users.alice.Email, s.users.bob.Password},
		{"someone Dex does not know", "mallory@example.com", s.users.alice.Password},
	} {
		t.Run(c.name, func(t *testing.T) {
			token, err := s.dex.PasswordGrant(ctx, s.client, c.email, c.password, "email", "groups")
			var refused *testenv.DexTokenError
			require.ErrorAs(t, err, &refused, "Dex gave a token: %s", token)
			require.Equal(t, http.StatusUnauthorized, refused.Status)
			require.Equal(t, "access_denied", refused.Code)
		})
	}
	// The right password still works: the refusals were the password's.
	_, err := s.dex.PasswordGrant(ctx, s.client, s.users.alice.Email, s.users.alice.Password, "email", "groups")
	require.NoError(t, err)
}
