// Package verify runs the design document's "Verify" checks against a deployed stack:
// rollout of every workload and kcp object, the split-horizon DNS answers inside the
// cluster, the anonymous answers through the ingress and the hub's kubeconfig; then,
// asked of running kcp through the Services this program owns (reached the way
// `kubectl port-forward svc/NAME` does), the anonymous answers again, the hub's
// credential and the shards kcp has registered. It reads the same validated stack
// config as the Pulumi program and derives every name from package naming, as the
// program does, so a check looks at exactly what the program deployed, without linking
// the Pulumi SDK.
//
// Everything that talks to the outside is injected (Kubernetes clients, the pod runner,
// the HTTP client, the Service dialer and the clock), so every check is tested without
// a cluster or network.
package verify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/railgrid/railgrid-kcp/config"
)

// Status is the outcome of one checked item.
type Status string

const (
	StatusPass Status = "pass"
	// StatusWarn passes, but needs attention soon (a hub credential close to expiry).
	StatusWarn Status = "warn"
	StatusFail Status = "fail"
	// StatusSkip: the check was not run because the caller asked to skip it (with a
	// reason); it neither passes nor fails.
	StatusSkip Status = "skip"
)

// Result is one checked item: one line of output.
type Result struct {
	// Check is the check the item belongs to (see CheckNames).
	Check string `json:"check"`
	// Item names what was checked, for example "Deployment kcp-system/root-kcp".
	Item    string `json:"item"`
	Status  Status `json:"status"`
	Message string `json:"message"`
}

// Check names, in the order they run.
const (
	CheckRollout       = "rollout"
	CheckSplitHorizon  = "split-horizon"
	CheckIngress       = "ingress"
	CheckHubKubeconfig = "hub-kubeconfig"
	CheckAnonymous     = "anonymous"
	CheckHubCredential = "hub-credential"
	CheckShards        = "shards"
	// CheckProviderPath is defined with the check (providerpath.go).
)

// CheckNames lists every check in the order Run runs them.
var CheckNames = []string{CheckRollout, CheckSplitHorizon, CheckIngress, CheckHubKubeconfig, CheckCertificates, CheckAnonymous, CheckHubCredential, CheckShards, CheckProviderPath, CheckOIDCUser}

// Defaults of Options fields left zero.
const (
	DefaultTimeout         = 2 * time.Minute
	DefaultInterval        = 5 * time.Second
	DefaultMinValidityDays = 30
)

// Options carries the stack config and every injected dependency.
type Options struct {
	Config *config.Config

	// Kube and Dynamic reach the cluster (rollout, split-horizon, hub-kubeconfig).
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Pods runs the short-lived probe Pods: the DNS probe (split-horizon) and, with
	// ProviderImage, the provider probe (provider-path, hub-credential from a pod).
	Pods PodRunner
	// HTTP reaches the ingress (ingress). NewHTTPClient builds the real one.
	HTTP *http.Client
	// Services reaches the Services this program owns in front of kcp (anonymous,
	// hub-credential, shards). PortForwardDialer is the real one.
	Services ServiceDialer

	// Timeout bounds each check; Interval is the pause between attempts of a check that
	// waits (rollout, ingress, anonymous, hub-credential, shards).
	Timeout  time.Duration
	Interval time.Duration
	// MinValidity: a hub client certificate expiring sooner is a warning.
	MinValidity time.Duration
	// MinCertificateValidity: any certificate of the platform expiring sooner fails
	// certificates (DefaultMinCertificateValidity).
	MinCertificateValidity time.Duration
	// DNSCheckImage is the probe Pod's image (config.DefaultDNSCheckImage).
	DNSCheckImage string
	// ProviderImage is the provider probe's image (built from cmd/provider-probe).
	// Without it, provider-path and hub-credential's pod mode are reported skipped.
	ProviderImage string
	// OIDCUser is what oidc-user signs in with; without it the check is skipped.
	OIDCUser *OIDCUser
	// Now is the clock (time.Now).
	Now func() time.Time
	// Skip maps a check to skip to the reason, reported instead of running it.
	Skip map[string]string
}

func (o *Options) withDefaults() Options {
	out := *o
	if out.Timeout <= 0 {
		out.Timeout = DefaultTimeout
	}
	if out.Interval <= 0 {
		out.Interval = DefaultInterval
	}
	if out.MinValidity <= 0 {
		out.MinValidity = DefaultMinValidityDays * 24 * time.Hour
	}
	if out.MinCertificateValidity <= 0 {
		out.MinCertificateValidity = DefaultMinCertificateValidity
	}
	if out.DNSCheckImage == "" {
		out.DNSCheckImage = config.DefaultDNSCheckImage
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out
}

// checkFunc runs one check within ctx (already bounded by the check timeout).
type checkFunc func(ctx context.Context, o *Options) []Result

var checks = map[string]checkFunc{
	CheckRollout:       checkRollout,
	CheckSplitHorizon:  checkSplitHorizon,
	CheckIngress:       checkIngress,
	CheckHubKubeconfig: checkHubKubeconfig,
	CheckCertificates:  checkCertificates,
	CheckAnonymous:     checkAnonymous,
	CheckHubCredential: checkHubCredentialBothWays,
	CheckShards:        checkShards,
	CheckProviderPath:  checkProviderPath,
	CheckOIDCUser:      checkOIDCUser,
}

// ParseCheckNames turns a comma-separated list into check names ("" or "all": every check).
func ParseCheckNames(list string) ([]string, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "all" {
		return slices.Clone(CheckNames), nil
	}
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(CheckNames, name) {
			return nil, fmt.Errorf("unknown check %q (checks: %s)", name, strings.Join(CheckNames, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// Run runs the named checks (all when names is empty) one after another, each bounded
// by o.Timeout, and returns every result in order. A dependency a selected check needs
// but o lacks is a programming error and is reported as an error.
func Run(ctx context.Context, o Options, names []string) ([]Result, error) {
	if o.Config == nil {
		return nil, errors.New("verify: Options.Config is required")
	}
	if len(names) == 0 {
		names = CheckNames
	}
	opts := o.withDefaults()
	for name := range opts.Skip {
		if _, known := checks[name]; !known {
			return nil, fmt.Errorf("verify: unknown check %q to skip", name)
		}
	}
	for _, name := range names {
		if _, known := checks[name]; !known {
			return nil, fmt.Errorf("verify: unknown check %q", name)
		}
		if _, skip := opts.Skip[name]; skip {
			continue
		}
		if err := opts.requireFor(name); err != nil {
			return nil, err
		}
	}
	var results []Result
	for _, name := range CheckNames { // run order is fixed, whatever order names has
		if !slices.Contains(names, name) {
			continue
		}
		if reason, skip := opts.Skip[name]; skip {
			results = append(results, Result{Check: name, Item: "check " + name, Status: StatusSkip, Message: "skipped: " + reason})
			continue
		}
		checkCtx, cancel := context.WithTimeout(ctx, opts.Timeout)
		results = append(results, checks[name](checkCtx, &opts)...)
		cancel()
	}
	return results, nil
}

func (o *Options) requireFor(check string) error {
	var missing []string
	need := func(ok bool, what string) {
		if !ok {
			missing = append(missing, what)
		}
	}
	switch check {
	case CheckRollout:
		need(o.Kube != nil, "Kube")
		need(o.Dynamic != nil, "Dynamic")
	case CheckSplitHorizon:
		need(o.Kube != nil, "Kube")
		need(o.Pods != nil, "Pods")
	case CheckIngress:
		need(o.HTTP != nil, "HTTP")
	case CheckHubKubeconfig, CheckCertificates:
		need(o.Kube != nil, "Kube")
	case CheckAnonymous, CheckHubCredential, CheckShards:
		// Kube reads the serving certificates' CA (anonymous) or the hub Secret.
		need(o.Kube != nil, "Kube")
		need(o.Services != nil, "Services")
	case CheckOIDCUser:
		if o.OIDCUser == nil {
			break // skipped: nothing to sign in with
		}
		// Kube reads the front proxy's serving CA; Services reaches it.
		need(o.Kube != nil, "Kube")
		need(o.Services != nil, "Services")
	}
	switch check {
	case CheckHubCredential, CheckProviderPath:
		// Kube reads the hub Secret's CA; Pods runs the provider probe, if there is one.
		need(o.Kube != nil, "Kube")
		need(o.ProviderImage == "" || o.Pods != nil, "Pods")
	}
	if len(missing) > 0 {
		return fmt.Errorf("verify: check %s needs Options.%s", check, strings.Join(missing, ", Options."))
	}
	return nil
}

// Summary counts results by status.
type Summary struct {
	Pass int `json:"pass"`
	Warn int `json:"warn"`
	Fail int `json:"fail"`
	Skip int `json:"skip"`
}

// Summarize counts results by status.
func Summarize(results []Result) Summary {
	var s Summary
	for _, r := range results {
		switch r.Status {
		case StatusPass:
			s.Pass++
		case StatusWarn:
			s.Warn++
		case StatusSkip:
			s.Skip++
		default:
			s.Fail++
		}
	}
	return s
}

// Passed reports whether no result failed; with strict, warnings count as failures.
func Passed(results []Result, strict bool) bool {
	s := Summarize(results)
	return s.Fail == 0 && (!strict || s.Warn == 0)
}

// poll runs attempt until none of its results fails or ctx ends, pausing interval
// between attempts, and returns the last complete attempt's results. An attempt cut
// short by the deadline does not replace the previous attempt's (more telling) reasons.
func poll(ctx context.Context, interval time.Duration, attempt func(ctx context.Context) []Result) []Result {
	var last []Result
	tries := 0
	for {
		got := attempt(ctx)
		tries++
		if !expired(ctx) || last == nil || !anyFailed(got) {
			last = got
		}
		if !anyFailed(last) {
			return last
		}
		if expired(ctx) {
			return markTimedOut(last, tries)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return markTimedOut(last, tries)
		case <-t.C:
		}
	}
}

// expired reports whether ctx ended or its deadline passed. ctx.Err lags the deadline
// by the time its timer takes to fire, and an attempt can fail at the deadline before it
// does (client-go's rate limiter refuses a request that would end past the deadline).
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && !time.Now().Before(deadline)
}

func anyFailed(results []Result) bool {
	for _, r := range results {
		if r.Status == StatusFail {
			return true
		}
	}
	return false
}

func markTimedOut(results []Result, tries int) []Result {
	out := slices.Clone(results)
	for i := range out {
		if out[i].Status == StatusFail {
			out[i].Message += fmt.Sprintf(" (still failing when the check timed out, after %d attempt(s))", tries)
		}
	}
	return out
}

func pass(check, item, format string, args ...any) Result {
	return Result{Check: check, Item: item, Status: StatusPass, Message: fmt.Sprintf(format, args...)}
}

func fail(check, item, format string, args ...any) Result {
	return Result{Check: check, Item: item, Status: StatusFail, Message: fmt.Sprintf(format, args...)}
}

func warn(check, item, format string, args ...any) Result {
	return Result{Check: check, Item: item, Status: StatusWarn, Message: fmt.Sprintf(format, args...)}
}
