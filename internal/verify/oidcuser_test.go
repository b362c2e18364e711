package verify_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

func runOIDCUser(t *testing.T, f *fixture) verify.Result {
	t.Helper()
	results := f.run(t, verify.CheckOIDCUser)
	if len(results) != 1 {
		t.Fatalf("oidc-user gave %d results: %+v", len(results), results)
	}
	return results[0]
}

// kcp's answer for Alice's token is railgrid:<email> with railgrid:-prefixed groups,
// which is what the hub binds: the check passes and says so.
func TestOIDCUserPassesWhenKcpSeesTheHubsIdentity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := runOIDCUser(t, f)
	if r.Status != verify.StatusPass || !strings.Contains(r.Message, `kcp sees user "railgrid:alice@example.com"`) ||
		!strings.Contains(r.Message, "railgrid:ops") || !strings.Contains(r.Message, "railgrid:devs") {
		t.Fatalf("%+v", r)
	}
}

// A token kcp refuses is a 401 that names what kcp checks: the issuer's CA, issuer,
// audience, email_verified and expiry.
func TestOIDCUserFailsOnATokenKcpRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.opts.OIDCUser = &verify.OIDCUser{Token: verifytest.AliceToken("https://another-issuer.example")}
	r := runOIDCUser(t, f)
	if r.Status != verify.StatusFail || !strings.Contains(r.Message, "401") || !strings.Contains(r.Message, "oidc.caCertificates") ||
		!strings.Contains(r.Message, "its audience railgrid") {
		t.Fatalf("%+v", r)
	}
}

// A user kcp knows but who may not access the workspace gets 403, which says how to
// grant access.
func TestOIDCUserFailsWithoutAccessToTheWorkspace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := verifytest.HealthyKcp(f.cfg)
	b.ForbiddenWorkspaces = []string{"root:team"}
	f.withKcp(t, b)
	f.opts.OIDCUser.Workspace = "root:team"
	r := runOIDCUser(t, f)
	if r.Status != verify.StatusFail || !strings.Contains(r.Message, "403") || !strings.Contains(r.Message, "access verb") {
		t.Fatalf("%+v", r)
	}
}

// kcp that maps the token to another name (no prefix: the hub's RBAC would not match)
// fails the check.
func TestOIDCUserFailsWhenKcpSeesAnotherName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := verifytest.HealthyKcp(f.cfg)
	token := verifytest.AliceToken(f.cfg.OIDC.IssuerURL)
	b.OIDCUsers = map[string]verifytest.OIDCUser{token: {Username: "alice@example.com", Groups: []string{"ops", "devs"}}}
	f.withKcp(t, b)
	r := runOIDCUser(t, f)
	if r.Status != verify.StatusFail || !strings.Contains(r.Message, `want user "railgrid:alice@example.com"`) || !strings.Contains(r.Message, "want group railgrid:ops") {
		t.Fatalf("%+v", r)
	}
}

// Without a token the check is skipped with the reason, never passed.
func TestOIDCUserIsSkippedWithoutAToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.opts.OIDCUser = nil
	r := runOIDCUser(t, f)
	if r.Status != verify.StatusSkip || !strings.Contains(r.Message, "no user's ID token given") {
		t.Fatalf("%+v", r)
	}
}

// A kubeconfig gives its user's token, or what its exec plugin prints.
func TestKubeconfigTokenReadsATokenOrRunsTheExecPlugin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plugin := filepath.Join(dir, "plugin")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-the-plugin\"}}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig := func(user string) string {
		path := filepath.Join(dir, strings.Fields(user)[0]+".kubeconfig")
		data := "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://kcp.example.com\n" +
			"contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n" + user
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for file, want := range map[string]string{
		kubeconfig("    token: a-token\n"): "a-token",
		kubeconfig("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: " + plugin + "\n      interactiveMode: Never\n"): "from-the-plugin",
	} {
		got, err := verify.KubeconfigToken(t.Context(), file)
		if err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", filepath.Base(file), got, err, want)
		}
	}
	if _, err := verify.KubeconfigToken(t.Context(), kubeconfig("    username: nobody\n")); err == nil || !strings.Contains(err.Error(), "neither a token nor an exec plugin") {
		t.Errorf("a user with neither: %v", err)
	}
}
