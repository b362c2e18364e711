package verify

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/errtext"
)

// CheckOIDCUser signs a user in with an ID token from the hub's issuer and asks kcp, at
// the front proxy, who that is: the design's rule that every user is railgrid:<email>.
const CheckOIDCUser = "oidc-user"

// OIDCUser is what the oidc-user check signs in with.
type OIDCUser struct {
	// Token is an ID token the user's client got from the issuer (kubelogin's, say).
	Token string
	// Workspace is the workspace the user may access (the access verb), where kcp is
	// asked: "root" when empty.
	Workspace string
}

// noOIDCUser is why oidc-user is skipped when it is given no token.
const noOIDCUser = "no user's ID token given (-oidc-token-file, or -oidc-kubeconfig with a token or an exec plugin that prints one): nothing to sign in with"

// tokenClaims are the claims of an ID token the check compares kcp's answer with. The
// token is not verified here: kcp verifies it, which is what the check asks.
type tokenClaims struct {
	Issuer        string   `json:"iss"`
	Email         string   `json:"email"`
	EmailVerified *bool    `json:"email_verified"`
	Groups        []string `json:"groups"`
	Expiry        int64    `json:"exp"`
}

// parseTokenClaims reads a JWT's payload without verifying it.
func parseTokenClaims(token string) (tokenClaims, error) {
	var c tokenClaims
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return c, errors.New("not a JWT (three dot-separated parts)")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return c, fmt.Errorf("its payload is not base64url: %v", err)
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return c, fmt.Errorf("its payload is not JSON: %v", err)
	}
	return c, nil
}

// WantOIDCIdentity is the user and groups kcp must give a token's claims: the email
// behind the hub's fixed prefix, and each group behind its fixed prefix.
func WantOIDCIdentity(email string, groups []string) (string, []string) {
	var want []string
	for _, g := range groups {
		want = append(want, config.FixedGroupsPrefix+g)
	}
	return config.FixedUsernamePrefix + email, want
}

func checkOIDCUser(ctx context.Context, o *Options) []Result {
	if o.OIDCUser == nil || strings.TrimSpace(o.OIDCUser.Token) == "" {
		return []Result{{Check: CheckOIDCUser, Item: "OIDC user", Status: StatusSkip, Message: "skipped: " + noOIDCUser}}
	}
	claims, err := parseTokenClaims(o.OIDCUser.Token)
	if err != nil {
		return []Result{fail(CheckOIDCUser, "OIDC user", "the token: %v", err)}
	}
	workspace := o.OIDCUser.Workspace
	if workspace == "" {
		workspace = "root"
	}
	front := frontProxyService(o.Config)
	item := fmt.Sprintf("SelfSubjectReview as %s in %s through Service %s", claims.Email, workspace, front.id())
	return poll(ctx, o.Interval, func(ctx context.Context) []Result {
		ca, err := servingCAPEM(ctx, o.Kube, front)
		if err != nil {
			return []Result{fail(CheckOIDCUser, item, "%v", err)}
		}
		cfg := &rest.Config{
			Host:            "https://" + front.hostname + "/clusters/" + workspace,
			BearerToken:     o.OIDCUser.Token,
			Dial:            front.dial(o),
			TLSClientConfig: rest.TLSClientConfig{CAData: ca},
			Timeout:         15 * time.Second,
		}
		return []Result{reviewOIDCUser(ctx, cfg, item, claims, front, o.Config)}
	})
}

// reviewOIDCUser asks kcp who the token's user is and compares with the design's rule.
func reviewOIDCUser(ctx context.Context, cfg *rest.Config, item string, claims tokenClaims, front kcpService, stack *config.Config) Result {
	token := fmt.Sprintf("token of %s from %s", claims.Email, claims.Issuer)
	if claims.Expiry > 0 {
		token += ", valid until " + time.Unix(claims.Expiry, 0).UTC().Format(time.RFC3339)
	}
	user, err := ReviewSelf(ctx, cfg)
	switch {
	case apierrors.IsUnauthorized(err):
		return fail(CheckOIDCUser, item, "kcp answered 401 Unauthorized (%s): it refused the token. kcp must trust the issuer's CA (oidc.caCertificates or oidc.caSecret), "+
			"the token's issuer must be %s and its audience %s, its email must be verified and it must not have expired; look at %s",
			token, stack.OIDC.IssuerURL, stack.OIDC.ClientID, front.logs())
	case apierrors.IsForbidden(err):
		return fail(CheckOIDCUser, item, "kcp answered 403 Forbidden (%s): it knows the user but the user may not access the workspace (bind a ClusterRole with the access verb on nonResourceURLs [\"/\"] there): %v", token, err)
	case err != nil:
		return fail(CheckOIDCUser, item, "%v (%s)", err, token)
	}
	wantUser, wantGroups := WantOIDCIdentity(claims.Email, claims.Groups)
	seen := fmt.Sprintf("kcp sees user %q in groups [%s]", user.Username, strings.Join(user.Groups, ", "))
	var problems []string
	if user.Username != wantUser {
		problems = append(problems, fmt.Sprintf("want user %q: the hub binds every user as %s<email>", wantUser, config.FixedUsernamePrefix))
	}
	for _, g := range wantGroups {
		if !slices.Contains(user.Groups, g) {
			problems = append(problems, fmt.Sprintf("want group %s", g))
		}
	}
	if len(problems) > 0 {
		return fail(CheckOIDCUser, item, "%s: %s (%s)", seen, strings.Join(problems, "; "), token)
	}
	return pass(CheckOIDCUser, item, "%s (%s)", seen, token)
}

// KubeconfigToken is the bearer token of a kubeconfig's current user: its token, or
// what its exec plugin prints (an ExecCredential), run as kubectl runs it.
func KubeconfigToken(ctx context.Context, path string) (string, error) {
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return "", err
	}
	_, kctx := currentContext(kc)
	if kctx == nil || kc.AuthInfos[kctx.AuthInfo] == nil {
		return "", fmt.Errorf("%s has no current context with a user", path)
	}
	user := kc.AuthInfos[kctx.AuthInfo]
	switch {
	case user.Token != "":
		return user.Token, nil
	case user.Exec != nil:
		return execToken(ctx, user.Exec)
	}
	return "", fmt.Errorf("the user %q of %s has neither a token nor an exec plugin", kctx.AuthInfo, path)
}

// execToken runs a kubeconfig's exec plugin and returns the token of the ExecCredential
// it prints.
func execToken(ctx context.Context, e *clientcmdapi.ExecConfig) (string, error) {
	cmd := exec.CommandContext(ctx, e.Command, e.Args...)
	cmd.Env = os.Environ()
	for _, v := range e.Env {
		cmd.Env = append(cmd.Env, v.Name+"="+v.Value)
	}
	cmd.Env = append(cmd.Env, fmt.Sprintf(`KUBERNETES_EXEC_INFO={"apiVersion":%q,"kind":"ExecCredential","spec":{"interactive":false}}`, e.APIVersion))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("the exec plugin %s failed: %v: %s", e.Command, err, errtext.FirstLine(stderr.String()))
	}
	var cred struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal(out, &cred); err != nil || cred.Status.Token == "" {
		return "", fmt.Errorf("the exec plugin %s printed no ExecCredential with a token (%v)", e.Command, err)
	}
	return cred.Status.Token, nil
}
