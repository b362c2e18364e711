// Package providerprobe is the provider probe: what an in-cluster provider of the hub
// does with kcp, done once and reported. With the hub's kubeconfig (its client
// certificate and the in-cluster front proxy it names) and kcp's root-server-ca as the
// only trusted CA, it publishes an API in a scratch workspace on a named shard, binds it
// from a second one, follows the URL the export's endpoint slice advertises exactly as
// written (the public shard name, resolved by whatever DNS the caller has: split horizon
// in a pod), and does the same through a ClusterCachedResource; and it asks kcp who the
// credential is, through the front proxy and at each shard's public URL.
//
// It is the logic of cmd/provider-probe, kept here so that it is unit-tested. Every URL
// is used as written: the TLS server name is the URL's host, no address or port-forward
// is dialled, the client certificate is the only authentication, and no HTTP proxy is
// used. The report is one JSON object per check (Line), written as the check ends.
package providerprobe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The steps, as the report and cmd/verify name them.
const (
	StepProviderPath = "provider-path"
	StepHubIdentity  = "hub-identity"
)

// Steps lists every step in the order Run runs them.
var Steps = []string{StepProviderPath, StepHubIdentity}

// ShardURL is a shard's public URL, by the name of its kcp Shard object.
type ShardURL struct {
	Name string
	URL  string
}

// Options is what a run needs; the command fills it from its flags.
type Options struct {
	// Client carries the credential and the trust, and builds every client.
	Client *Client
	// Steps to run (Steps when empty).
	Steps []string

	// Shard is the kcp Shard the scratch workspaces are placed on (its name), and
	// ShardHostname the public hostname its endpoint-slice URLs must be on.
	Shard         string
	ShardHostname string
	// ShardURLs are the shards' public URLs, at which hub-identity asks kcp directly.
	ShardURLs []ShardURL

	// NamePrefix starts the scratch workspaces' names; Keep leaves them in place.
	NamePrefix string
	Keep       bool

	// WantUser and WantGroups are what kcp must report for the credential.
	WantUser   string
	WantGroups []string

	// Wait bounds each wait for kcp to reconcile something; Interval is the pause
	// between reads while waiting.
	Wait     time.Duration
	Interval time.Duration

	// Report receives every line.
	Report *Reporter
}

// Validate refuses options a run cannot use, naming the option and the rule.
func (o *Options) Validate() error {
	var problems []string
	if o.Client == nil {
		problems = append(problems, "no client")
	}
	for _, s := range o.Steps {
		if !slices.Contains(Steps, s) {
			problems = append(problems, fmt.Sprintf("unknown step %q (steps: %s)", s, strings.Join(Steps, ", ")))
		}
	}
	steps := o.steps()
	if slices.Contains(steps, StepProviderPath) {
		if o.Shard == "" {
			problems = append(problems, "the shard to place the scratch workspaces on is empty")
		}
		if o.ShardHostname == "" {
			problems = append(problems, "the shard's public hostname is empty")
		} else if u, err := HTTPSURL("https://"+o.ShardHostname, true); err != nil || u.Host != o.ShardHostname {
			problems = append(problems, fmt.Sprintf("the shard's public hostname %q is not a host name", o.ShardHostname))
		}
		if msg := nameProblem(o.NamePrefix); msg != "" {
			problems = append(problems, fmt.Sprintf("the name prefix %q %s", o.NamePrefix, msg))
		}
	}
	if slices.Contains(steps, StepHubIdentity) {
		if o.WantUser == "" {
			problems = append(problems, "the user kcp must report is empty")
		}
		seen := map[string]bool{}
		for _, s := range o.ShardURLs {
			if seen[s.Name] {
				problems = append(problems, fmt.Sprintf("shard %q has two URLs", s.Name))
			}
			seen[s.Name] = true
			if _, err := HTTPSURL(s.URL, true); err != nil {
				problems = append(problems, fmt.Sprintf("shard %q: %v", s.Name, err))
			}
		}
	}
	if o.Wait <= 0 || o.Interval <= 0 {
		problems = append(problems, "the wait and the interval must be positive")
	}
	if o.Report == nil {
		problems = append(problems, "no report")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func (o *Options) steps() []string {
	if len(o.Steps) == 0 {
		return Steps
	}
	return o.Steps
}

// nameProblem checks a workspace name prefix: the scratch names add a dash, eight
// characters and a role ("-provider"), and must stay a DNS label.
func nameProblem(prefix string) string {
	const maxPrefix = 63 - len("-01234567-provider")
	switch {
	case prefix == "":
		return "is empty"
	case len(prefix) > maxPrefix:
		return fmt.Sprintf("is longer than %d characters", maxPrefix)
	}
	for i, r := range prefix {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' && i > 0) {
			return "must be lower-case letters, digits and dashes, starting with a letter or digit"
		}
	}
	return ""
}

// Run runs the steps one after the other and reports every check. It returns an error
// only when ctx ended; failed checks are in the report (Reporter.Failed).
func Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	for _, step := range Steps {
		if !slices.Contains(o.steps(), step) {
			continue
		}
		switch step {
		case StepProviderPath:
			runProviderPath(ctx, &o)
		case StepHubIdentity:
			runHubIdentity(ctx, &o)
		}
	}
	return ctx.Err()
}

// frontProxyBase is the kubeconfig's server without the workspace path the operator
// writes into it (/clusters/root): scheme, host and port as written.
func frontProxyBase(server string) (string, error) {
	u, err := HTTPSURL(server, false)
	if err != nil {
		return "", err
	}
	if i := strings.Index(u.Path, "/clusters/"); i >= 0 {
		u.Path = u.Path[:i]
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}

// workspaceURL is base followed by a workspace's path, the way kcp's URLs name one.
func workspaceURL(base, path string) string {
	return strings.TrimSuffix(base, "/") + "/clusters/" + path
}

// randomSuffix is eight lower-case hex characters, so that runs never share names.
func randomSuffix() string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// poll calls try every interval until it reports done or wait has passed (or ctx
// ended); it returns try's last error, or the timeout with the last state seen.
func poll(ctx context.Context, wait, interval time.Duration, try func(ctx context.Context) (done bool, state string, err error)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var state string
	var lastErr error
	for {
		done, s, err := try(ctx)
		if s != "" {
			state = s
		}
		if done && err == nil {
			return state, nil
		}
		if err != nil && ctx.Err() == nil {
			lastErr = err
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			if lastErr != nil {
				return state, fmt.Errorf("still failing after %s: %w", wait, lastErr)
			}
			return state, fmt.Errorf("not done after %s (last seen: %s)", wait, orNothing(state))
		case <-t.C:
		}
	}
}

func orNothing(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// urlHost is the host of a URL, "" when it does not parse.
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
