package providerprobe

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// CheckFrontProxy is hub-identity's check through the front proxy; a shard's check is
// named ShardCheck(name).
const CheckFrontProxy = "front-proxy"

// ShardCheck names hub-identity's check at a shard's public URL.
func ShardCheck(shard string) string { return "shard " + shard }

// IdentityWorkspacePath is where hub-identity asks, through the front proxy and at every
// shard: the root workspace. Only the root shard hosts it, but every shard knows it (the
// root LogicalCluster reaches every shard through kcp's cache server), so a shard
// authenticates the certificate itself, authorizes the request against the root
// workspace and answers the review; that is what shows that the credential works at the
// shard directly and not only through the front proxy.
const IdentityWorkspacePath = "root"

func runHubIdentity(ctx context.Context, o *Options) {
	front, err := frontProxyBase(o.Client.Credential.Server)
	targets := []struct{ check, url string }{{CheckFrontProxy, workspaceURL(front, IdentityWorkspacePath)}}
	if err != nil {
		targets[0].url = o.Client.Credential.Server
	}
	for _, s := range o.ShardURLs {
		targets = append(targets, struct{ check, url string }{ShardCheck(s.Name), workspaceURL(s.URL, IdentityWorkspacePath)})
	}
	for _, t := range targets {
		c := &check{step: StepHubIdentity, name: t.check, credential: o.Client.Credential.Subject, started: time.Now(), url: t.url}
		msg, err := reviewIdentity(ctx, o, c, t.check != CheckFrontProxy)
		if err != nil {
			o.Report.Add(c.line(Fail, msg, err))
			continue
		}
		o.Report.Add(c.line(Pass, msg, nil))
	}
}

// reviewIdentity asks kcp at c.url who the credential is (a SelfSubjectReview,
// authentication.k8s.io/v1) and compares the answer with the user and groups wanted.
func reviewIdentity(ctx context.Context, o *Options, c *check, shardURL bool) (string, error) {
	cfg, err := o.Client.Config(c.url, shardURL)
	if err != nil {
		return "", err
	}
	client, err := authenticationv1client.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	review, err := client.SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("SelfSubjectReview: %w", err)
	}
	user := review.Status.UserInfo
	c.identity = fmt.Sprintf("user %q in groups [%s]", user.Username, strings.Join(user.Groups, ", "))
	var problems []string
	if user.Username != o.WantUser {
		problems = append(problems, fmt.Sprintf("want user %q", o.WantUser))
	}
	for _, g := range o.WantGroups {
		if !slices.Contains(user.Groups, g) {
			problems = append(problems, fmt.Sprintf("want group %s", g))
		}
	}
	if len(problems) > 0 {
		return "kcp sees " + c.identity, fmt.Errorf("kcp sees %s: %s", c.identity, strings.Join(problems, "; "))
	}
	return "kcp sees " + c.identity, nil
}
