//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The sign-in steps of stage 3 (3_verify_test.go lists them): the OIDC path of the
// design, with the hub's Dex, real kubelogin and real kubectl on the pod network.

// signinWorkspace is where the users sign in: on alpha, so that a shard serves it.
const signinWorkspace = "e2e-signin"

// oidcDiscoveryFailure is what kcp's OIDC authenticator logs while it cannot fetch the
// issuer's discovery document (k8s.io/apiserver plugin/pkg/authenticator/token/oidc).
const oidcDiscoveryFailure = "oidc authenticator: initializing plugin"

// oidcDiscoveryRetry is how often that authenticator retries a failed discovery.
const oidcDiscoveryRetry = 10 * time.Second

// kcpServerPods are the kcp servers that validate tokens: those the operator gives the
// hub's issuer (--oidc-issuer-url): the shards and the front proxy, not the root shard's
// own proxy.
func kcpServerPods(ctx context.Context, c *cluster) ([]string, error) {
	pods, err := c.kube.CoreV1().Pods(naming.NamespaceKcp).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || len(p.Spec.Containers) == 0 {
			continue
		}
		c := p.Spec.Containers[0]
		if slices.ContainsFunc(append(slices.Clone(c.Command), c.Args...), func(a string) bool { return strings.HasPrefix(a, "--oidc-issuer-url") }) {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// discoveryFailures counts each kcp server's failed OIDC discovery lines since t.
func discoveryFailures(ctx context.Context, c *cluster, since time.Time) (map[string]int, error) {
	pods, err := kcpServerPods(ctx, c)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range pods {
		st := metav1.NewTime(since)
		opts := &corev1.PodLogOptions{SinceTime: &st}
		raw, err := c.kube.CoreV1().Pods(naming.NamespaceKcp).GetLogs(p, opts).DoRaw(ctx)
		if err != nil {
			return nil, err
		}
		out[p] = strings.Count(string(raw), oidcDiscoveryFailure)
	}
	return out, nil
}

// kcpServesWhileTheIssuerIsDown: before the hub's Dex runs, every kcp server logs its
// failed discovery of the issuer, as the design says it will, and kcp still serves (the
// hub's credential works).
func kcpServesWhileTheIssuerIsDown(t *testing.T, l *lifecycle) {
	failures, err := discoveryFailures(l.ctx, l.c, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(failures) == 0 {
		t.Fatal("no kcp server of " + naming.NamespaceKcp + " is given the hub's issuer (--oidc-issuer-url)")
	}
	for pod, n := range failures {
		if n == 0 {
			t.Errorf("kcp server %s logged no failed discovery of the issuer (%q) while nothing serves %s", pod, oidcDiscoveryFailure, l.plan.cfg.OIDC.IssuerURL)
		}
	}
	cctx, cancel := context.WithTimeout(l.ctx, time.Minute)
	defer cancel()
	if r := verify.VerifyHubCredential(cctx, hubSecretKubeconfig(l.ctx, l.env), frontProxyDial(l.env)); r.Status != verify.StatusPass {
		t.Errorf("kcp does not serve while the issuer is down: %s", r.Message)
	}
	t.Logf("before Dex: failed discovery lines per kcp server %v; kcp serves the hub's credential", failures)
}

// dexRunsAsTheHubRunsIt: the hub's Dex runs on the real node, behind a Service at the
// ClusterIP the kind split horizon answers the issuer's name with.
func dexRunsAsTheHubRunsIt(t *testing.T, l *lifecycle) {
	start := time.Now()
	if err := l.dex.deploy(l.ctx, l.c, testenv.DexImageRef(l.dexVersion), issuerClusterIP(l.plan)); err != nil {
		t.Fatalf("Dex: %v\n%s", err, testenv.PodProblems(l.ctx, l.c.kube, dexNamespace))
	}
	l.verify.dexUp = time.Now()
	t.Logf("Dex %s Ready behind %s:443 (%s) in %s", l.dexVersion, issuerClusterIP(l.plan), l.plan.cfg.OIDC.IssuerURL, time.Since(start).Round(100*time.Millisecond))
}

// issuerClusterIP is the ClusterIP the kind split horizon answers the issuer's name with.
func issuerClusterIP(p rendered) string { return p.cfg.Kind.IssuerClusterIP }

// usersSignInWithKubelogin: with kubectl and kubelogin (the password grant) on the pod
// network, alice signs in through the front proxy and at alpha directly as
// railgrid:alice@example.com in railgrid:ops and railgrid:devs; a RoleBinding lets her
// write in the workspace while bob gets 403; tokens for another client, from another
// Dex, expired, or with an unverified email get 401; and once Dex is up no kcp server
// logs a failed discovery any more.
func usersSignInWithKubelogin(t *testing.T, l *lifecycle) {
	ctx, p := l.ctx, l.plan
	cluster, err := makeWorkspaceOnShard(ctx, l.env, signinWorkspace, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	wantAlice, wantGroups := verify.WantOIDCIdentity(alice.email, alice.groups)
	wantBob, _ := verify.WantOIDCIdentity(bob.email, nil)
	l.grantSignin(t, wantAlice, wantBob)

	dir := t.TempDir()
	client := podNetClient{host: l.testHost, kubectl: l.bins.kubectl, dir: dir}
	kcpCA, err := verify.HubKubeconfigCA(ctx, l.c.kube, p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	output, err := l.stack.output(ctx, "userKubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	frontProxy := fmt.Sprintf("https://%s:%d/clusters/root:%s", naming.OperatorServiceHost(naming.FrontProxyDeployment(naming.FrontProxyName)), naming.KcpPort, signinWorkspace)
	// At alpha directly, the workspace is its logical cluster.
	alpha := fmt.Sprintf("https://%s/clusters/%s", shardHostname(p, "alpha"), cluster)
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	kubeconfigFor := func(server string, u signinUser, clientID, secret string) string {
		data, err := userKubeconfig([]byte(output), server, kcpCA, l.dex, u, clientID, secret, dir)
		if err != nil {
			t.Fatal(err)
		}
		return write(fmt.Sprintf("%s-%s-%s.kubeconfig", strings.Split(u.email, "@")[0], clientID, shortHost(server)), data)
	}
	aliceFront := kubeconfigFor(frontProxy, alice, l.dex.clientID, l.dex.clientSecret)

	// kcp retries the issuer's discovery every 10 s: the first sign-in waits for it.
	start := time.Now()
	var user string
	var groups []string
	if err := testenv.WaitFor(ctx, 2*time.Minute, nil, func() (bool, error) {
		user, groups, err = client.whoami(ctx, aliceFront)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("alice cannot sign in through the front proxy %s after Dex came up: %v", l.verify.dexUp.Format(time.TimeOnly), err)
	}
	signedIn := time.Now()
	t.Logf("alice signed in %s after Dex was Ready (first kubectl call %s after)", signedIn.Sub(l.verify.dexUp).Round(100*time.Millisecond), start.Sub(l.verify.dexUp).Round(100*time.Millisecond))
	checkIdentity := func(where string, user string, groups []string, wantUser string, wantGroups []string) {
		t.Helper()
		missing := slices.DeleteFunc(slices.Clone(wantGroups), func(g string) bool { return slices.Contains(groups, g) })
		if user != wantUser || len(missing) > 0 {
			t.Errorf("%s: kubectl auth whoami says %q in %v, want %q in %v", where, user, groups, wantUser, wantGroups)
		} else {
			t.Logf("%s: kubectl auth whoami says %q in %v", where, user, groups)
		}
	}
	checkIdentity("alice through the front proxy", user, groups, wantAlice, wantGroups)
	// Each kcp server discovers the issuer on its own 10 s retry: alpha may accept alice
	// a period after the front proxy did.
	aliceAlpha := kubeconfigFor(alpha, alice, l.dex.clientID, l.dex.clientSecret)
	var alphaErr error
	if err := testenv.WaitFor(ctx, time.Minute, nil, func() (bool, error) {
		user, groups, alphaErr = client.whoami(ctx, aliceAlpha)
		return alphaErr == nil, nil
	}); err != nil {
		t.Errorf("alice at alpha directly, a minute after Dex was Ready: %v", alphaErr)
	} else {
		t.Logf("alice signed in at alpha directly %s after Dex was Ready", time.Since(l.verify.dexUp).Round(100*time.Millisecond))
		checkIdentity("alice at alpha directly ("+alpha+")", user, groups, wantAlice, wantGroups)
	}

	// RBAC: alice writes and reads; bob is known (403), not refused (401).
	if out, err := client.run(ctx, aliceFront, "-n", "default", "create", "configmap", "written-by-alice", "--from-literal=by=alice"); err != nil {
		t.Errorf("alice may not write in root:%s: %v: %s", signinWorkspace, err, out)
	} else if out, err := client.run(ctx, aliceFront, "-n", "default", "get", "configmap", "written-by-alice", "-o", "jsonpath={.data.by}"); err != nil || out != "alice" {
		t.Errorf("alice reads back %q (%v)", out, err)
	} else {
		t.Logf("alice wrote and read ConfigMap written-by-alice in root:%s", signinWorkspace)
	}
	bobFront := kubeconfigFor(frontProxy, bob, l.dex.clientID, l.dex.clientSecret)
	out, err := client.run(ctx, bobFront, "-n", "default", "get", "configmaps")
	if err == nil || !strings.Contains(out, "Forbidden") && !strings.Contains(out, "forbidden") || strings.Contains(out, "Unauthorized") {
		t.Errorf("bob in root:%s: want 403 Forbidden, got %v: %s", signinWorkspace, err, out)
	} else {
		t.Logf("bob: %s", lastLineOf(out))
	}

	// 401: another audience, another Dex, an expired token, an unverified email.
	refused := func(what, token string) {
		t.Helper()
		kc := write(strings.ReplaceAll(what, " ", "-")+".kubeconfig", mustTokenKubeconfig(t, frontProxy, kcpCA, token))
		out, err := client.run(ctx, kc, "auth", "whoami")
		if err == nil || !strings.Contains(out, "Unauthorized") {
			t.Errorf("%s: want 401 Unauthorized, got %v: %s", what, err, out)
		} else {
			t.Logf("%s: %s", what, lastLineOf(out))
		}
	}
	hubDexFromHost, err := l.dex.fromHost(issuerClusterIP(p))
	if err != nil {
		t.Fatal(err)
	}
	grant := func(dex *testenv.Dex, clientID, secret string, u signinUser) string {
		t.Helper()
		token, err := dex.PasswordGrant(ctx, testenv.DexClient{ID: clientID, Secret: secret}, u.email, u.password, "email", "groups")
		if err != nil {
			t.Fatalf("a token for %s (client %s) from %s: %v", u.email, clientID, dex.Issuer, err)
		}
		return token
	}
	expiring := grant(hubDexFromHost, l.dex.clientID, l.dex.clientSecret, alice)
	expiresAt := time.Now().Add(dexIDTokenExpiry)
	refused("a token for another client ID ("+dexOtherClient+")", grant(hubDexFromHost, dexOtherClient, l.dex.otherSecret, alice))
	refused("a token with email_verified false (carol)", grant(hubDexFromHost, l.dex.clientID, l.dex.clientSecret, carol))
	other := testenv.StartDex(t, ctx, l.bins.dex, t.TempDir(), "other", testenv.DexConfig{Issuer: l.dex.issuer,
		Clients: []testenv.DexClient{{ID: l.dex.clientID, Secret: l.dex.clientSecret, Name: "the hub"}},
		Users:   []testenv.DexUser{{Email: alice.email, Username: "alice", UserID: "alice-id", Password: alice.password, Groups: alice.groups}}})
	refused("a token from another Dex with another CA and keys", grant(other, l.dex.clientID, l.dex.clientSecret, alice))
	time.Sleep(time.Until(expiresAt.Add(5 * time.Second)))
	refused("an expired token", expiring)

	// kcp retries a failed discovery every 10 s, so two periods after Dex is Ready every
	// server has found the issuer (an attempt that began before may still end in a
	// failure line), and no server logs a failure after that: one would show within 12 s.
	settled := l.verify.dexUp.Add(2 * oidcDiscoveryRetry)
	if signedIn.After(settled) {
		settled = signedIn
	}
	if wait := time.Until(settled.Add(oidcDiscoveryRetry + 2*time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	failures, err := discoveryFailures(ctx, l.c, settled)
	if err != nil {
		t.Fatal(err)
	}
	for pod, n := range failures {
		if n > 0 {
			t.Errorf("kcp server %s logged %d failed discoveries of the issuer since %s, two retry periods after Dex was Ready", pod, n, settled.Format(time.TimeOnly))
		}
	}
	t.Logf("after Dex: no failed discovery of the issuer since %s in %d kcp servers", settled.Format(time.TimeOnly), len(failures))
	l.verify.aliceToken = grant(hubDexFromHost, l.dex.clientID, l.dex.clientSecret, alice)
}

func mustTokenKubeconfig(t *testing.T, server string, ca []byte, token string) []byte {
	t.Helper()
	data, err := tokenKubeconfig(server, ca, token)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func shortHost(server string) string {
	h := strings.TrimPrefix(server, "https://")
	return strings.Split(h, ".")[0]
}

// shardHostname is a shard's public hostname in the stack's config.
func shardHostname(p rendered, shard string) string {
	for _, s := range p.cfg.Kcp.AllShards() {
		if s.Name == shard {
			return s.Hostname
		}
	}
	return ""
}

// grantSignin lets alice and bob into the sign-in workspace, and alice write there, as
// kcp's admin (the hub's credential through the front proxy).
func (l *lifecycle) grantSignin(t *testing.T, alice, bob string) {
	t.Helper()
	kube, err := kcpClient(l.ctx, l.env, "root:"+signinWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	roles, bindings, write := rbacForSignin(alice, bob)
	for _, r := range roles {
		if _, err := kube.RbacV1().ClusterRoles().Create(l.ctx, &r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range bindings {
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(l.ctx, &b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := testenv.WaitFor(l.ctx, time.Minute, nil, func() (bool, error) {
		_, err := kube.RbacV1().RoleBindings("default").Create(l.ctx, &write, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the RoleBinding for alice in root:%s: %v", signinWorkspace, err)
	}
}

// verifyOIDCUser: cmd/verify's oidc-user check passes with alice's token.
func verifyOIDCUser(t *testing.T, l *lifecycle) {
	if l.verify.aliceToken == "" {
		t.Fatal("no token of alice's from the sign-in step")
	}
	bin, err := l.verifyBin()
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "alice.token")
	if err := os.WriteFile(tokenFile, []byte(l.verify.aliceToken), 0o600); err != nil {
		t.Fatal(err)
	}
	runVerify(t, l.ctx, l.env, bin, []string{"-oidc-token-file", tokenFile, "-oidc-workspace", "root:" + signinWorkspace}, verify.CheckOIDCUser)
}
