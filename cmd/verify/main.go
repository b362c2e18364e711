// Command verify runs the design document's "Verify" checks against a deployed stack,
// reading the same Pulumi.<stack>.yaml as the program:
//
//	go run ./cmd/verify -stack gke
//	go run ./cmd/verify -stack kind       # dials the edge at 127.0.0.1:8443
//
// The checks that ask running kcp (anonymous, hub-credential, shards) reach the Services
// the program owns through the API server's port-forward, as `kubectl port-forward
// svc/NAME` does, so they need no route to the cluster's Service network.
//
// It prints one line per checked item (✓ pass, ⚠ warning, ✗ failure) and exits 0 when
// nothing failed, 1 when a check failed, 2 for bad usage, config or kubeconfig.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

// KindIngressAddress is where the kind edge listens on the host: kind/cluster.yaml maps
// the Envoy Gateway NodePort to host port 8443.
const KindIngressAddress = "127.0.0.1:8443"

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, defaultDeps())
	stop()
	os.Exit(code)
}

// deps are the outside world, replaced in tests.
type deps struct {
	// clients connects to the cluster; it returns the context name actually used.
	clients func(kubeconfig, kubeContext string) (clusterClients, error)
	// pods builds the probe Pod runner.
	pods func(kube kubernetes.Interface, namespace string) verify.PodRunner
	// services builds the dialer of the owned Services (the API server's port-forward).
	services func(c clusterClients) verify.ServiceDialer
	// httpOptions lets tests add a dialer to the ingress client.
	httpOptions func(verify.HTTPOptions) verify.HTTPOptions
	now         func() time.Time
}

func defaultDeps() deps {
	return deps{
		clients: kubeClients,
		pods: func(kube kubernetes.Interface, namespace string) verify.PodRunner {
			return &verify.KubePodRunner{Client: kube, Namespace: namespace}
		},
		services: func(c clusterClients) verify.ServiceDialer {
			return &verify.PortForwardDialer{Kube: c.kube, Config: c.rest}
		},
		httpOptions: func(o verify.HTTPOptions) verify.HTTPOptions { return o },
		now:         time.Now,
	}
}

const usageHeader = `usage: go run ./cmd/verify -stack kind|gke [flags]

Runs the checks of the design's "Verify" section against the cluster of the current
kubeconfig context (the kind stack defaults to its kind.context), reading the stack
config from Pulumi.<stack>.yaml in the current directory:

  rollout         the kcp-operator Deployment, every etcd StatefulSet and the kcp
                  Deployments are fully rolled out, and the RootShard, Shards,
                  FrontProxy and Kubeconfig report Available=True (waits up to -timeout)
  split-horizon   from a short-lived Pod, each shard hostname resolves to its owned
                  Service's ClusterIP, not to the edge (the Pod is always deleted)
  ingress         https://<front proxy>/readyz is 200, https://<shard>/api is 403 for
                  system:anonymous, https://<front proxy>/api is 401 (waits up to -timeout);
                  the kind stack dials 127.0.0.1:8443 and trusts kcp's CA from the hub
                  kubeconfig unless -ingress-address, -ca-file or -insecure-skip-tls-verify
  hub-kubeconfig  the hub Secret's admin.kubeconfig points at the in-cluster front-proxy
                  Service and its client certificate is valid; expiring within
                  -min-validity-days is a warning (a failure with -strict)
  certificates    every TLS Secret in kcp-system (each kcp server's serving and client
                  certificates, each CA once), the OIDC issuer's CA and the hub's
                  credential: fails on one expiring within -cert-min-validity, and when
                  the hub's copy is not the operator's current certificate

The next three ask running kcp through the Services the program owns (kcp-<component>,
port 6443), reached through the API server's port-forward like kubectl port-forward
svc/NAME (needs create on pods/portforward in kcp-system); they wait up to -timeout:

  anonymous       without credentials: the front proxy's /readyz is 200 and /api 401,
                  each shard's /api is 403 for system:anonymous; server certificates
                  verified for the public hostname with the CA of their Secret
  hub-credential  the hub Secret's kubeconfig, used as the hub uses it, authenticates at
                  the front proxy as kcp-admin in group system:kcp:admin (SelfSubjectReview
                  in the root workspace)
  shards          with that credential, every configured shard is registered in kcp's
                  root workspace (shards.core.kcp.io); each shard's virtualWorkspaceURL is
                  on its public hostname and no baseURL is (root's URLs are reported)

With -provider-image (the provider probe, built from cmd/provider-probe), from a Pod in
the hub's namespace that mounts the hub Secret and trusts only kcp's root-server-ca:

  hub-credential  also from that Pod: kcp-admin in system:kcp:admin through the front
                  proxy and at each shard's public URL
  provider-path   as an in-cluster provider: two scratch workspaces on a shard, an API
                  published and bound, the export's endpoint slice followed as written
                  (public shard name, split horizon, client certificate): list, create,
                  watch; the same through a cached resource; the workspaces deleted

With a user's ID token (-oidc-token-file, or -oidc-kubeconfig whose user has a token or
an exec plugin such as kubectl oidc-login get-token):

  oidc-user       kcp sees the token's user as railgrid:<email> in the railgrid:-prefixed
                  groups of its groups claim (SelfSubjectReview through the front proxy's
                  Service, in -oidc-workspace, where the user needs the access verb)

A check named by -skip (e.g. -skip split-horizon,ingress -skip-reason "no pods run here") is not
run and is reported as skipped with the reason: never as passed.

Exit status: 0 nothing failed, 1 a check failed, 2 bad usage, config or kubeconfig.

Flags:
`

// run is the command: the flags into options, the stack config, the clients the checks
// need, then the checks and their report. It returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, d deps) int {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return stop(stderr, err)
	}
	cfg, err := loadConfig(o.configPath())
	if err != nil {
		return stop(stderr, err)
	}
	if o.stack == "" {
		o.stack = string(cfg.Platform)
	}
	checks, usedContext, err := o.checkOptions(ctx, cfg, d, stderr)
	if err != nil {
		return stop(stderr, err)
	}
	return o.runChecks(ctx, checks, usedContext, stdout, stderr)
}

// options are the command line, parsed and checked.
type options struct {
	stack, configFile       string
	kubeconfig, kubeContext string
	asJSON, strict          bool
	timeout, interval       time.Duration
	// checks are the selected checks; skip maps each skipped one to the reason reported.
	checks          []string
	skip            map[string]string
	ingressAddr     string
	insecure        bool
	caFile          string
	minDays         int
	certMinValidity time.Duration
	podNS           string
	dnsImage        string
	probeImage      string
	// oidcTokenFile, oidcKubeconfig and oidcWorkspace are what oidc-user signs in with.
	oidcTokenFile, oidcKubeconfig, oidcWorkspace string
}

// The ways the command stops before its report: a bad command line (usageError, shown
// with a pointer to -h), one the flag package has shown already (errShown), or -h.
type usageError string

func (e usageError) Error() string { return string(e) }

func usagef(format string, a ...any) error { return usageError(fmt.Sprintf(format, a...)) }

var errShown = errors.New("shown by the flag package")

// stop shows err and returns the exit status of a command that stops before its report:
// 0 for -h, 2 otherwise.
func stop(stderr io.Writer, err error) int {
	var usage usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errShown):
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "verify: %s\n", usage)
		fmt.Fprintln(stderr, "run with -h for usage")
	default:
		fmt.Fprintln(stderr, err)
	}
	return exitUsage
}

// parseOptions parses and checks the command line.
func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	var lists checkLists
	flags := flag.NewFlagSet("verify", flag.ContinueOnError)
	flags.SetOutput(stderr)
	o.define(flags, &lists)
	flags.Usage = func() {
		fmt.Fprint(stderr, usageHeader)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, errShown
	}
	return o, o.check(flags.Args(), lists)
}

// checkLists are the flags that name checks, as given.
type checkLists struct{ checks, skip, skipReason string }

// define defines the flags into o and lists.
func (o *options) define(flags *flag.FlagSet, lists *checkLists) {
	flags.StringVar(&o.stack, "stack", "", "stack to verify: kind or gke (reads Pulumi.<stack>.yaml in the current directory)")
	flags.StringVar(&o.configFile, "config", "", "stack file to read instead of Pulumi.<stack>.yaml")
	flags.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	flags.StringVar(&o.kubeContext, "context", "", "kubeconfig context (default: the current context; for the kind stack, kind.context from the stack config)")
	flags.BoolVar(&o.asJSON, "json", false, "print a JSON report instead of text")
	flags.DurationVar(&o.timeout, "timeout", verify.DefaultTimeout, "time limit of each check")
	flags.DurationVar(&o.interval, "interval", verify.DefaultInterval, "pause between attempts of the checks that wait (rollout, ingress, anonymous, hub-credential, shards)")
	flags.StringVar(&lists.checks, "checks", "all", "comma-separated checks to run: "+strings.Join(verify.CheckNames, ","))
	flags.StringVar(&lists.skip, "skip", "", "comma-separated checks not to run; each is reported as skipped (with -skip-reason), never as passed")
	flags.StringVar(&lists.skipReason, "skip-reason", "skipped on request (-skip)", "the reason reported for each check named by -skip")
	flags.StringVar(&o.ingressAddr, "ingress-address", "", "host:port to dial for the ingress checks instead of resolving the hostnames (default for the kind stack: "+KindIngressAddress+")")
	flags.BoolVar(&o.insecure, "insecure-skip-tls-verify", false, "do not verify the ingress's server certificates")
	flags.StringVar(&o.caFile, "ca-file", "", "PEM CA bundle to verify the ingress's server certificates with instead of the system roots (for the kind stack, kcp's CA from the hub kubeconfig is trusted by default)")
	flags.IntVar(&o.minDays, "min-validity-days", verify.DefaultMinValidityDays, "warn when the hub's client certificate expires within this many days")
	flags.DurationVar(&o.certMinValidity, "cert-min-validity", verify.DefaultMinCertificateValidity, "certificates fails on a certificate that expires within this long")
	flags.BoolVar(&o.strict, "strict", false, "treat warnings as failures (exit status 1)")
	flags.StringVar(&o.podNS, "pod-namespace", "default", "namespace of the split-horizon probe Pod")
	flags.StringVar(&o.dnsImage, "dns-image", config.DefaultDNSCheckImage, "image of the split-horizon probe Pod (needs /bin/sh and nslookup)")
	flags.StringVar(&o.oidcTokenFile, "oidc-token-file", "", "file holding a user's ID token from the hub's issuer, for oidc-user")
	flags.StringVar(&o.oidcKubeconfig, "oidc-kubeconfig", "", "a user's kubeconfig whose user has a token or an exec plugin that prints one (kubectl oidc-login get-token, say), for oidc-user")
	flags.StringVar(&o.oidcWorkspace, "oidc-workspace", "root", "workspace where oidc-user asks who the user is (the user needs the access verb there)")
	flags.StringVar(&o.probeImage, "provider-image", "", "image of the provider probe (cmd/provider-probe), which provider-path and hub-credential run as a Pod in the hub's namespace; without it those are reported skipped")
}

// check refuses a bad command line (extra are the arguments after the flags) and
// parses the lists of checks into o.
func (o *options) check(extra []string, lists checkLists) error {
	switch {
	case len(extra) > 0:
		return usagef("unexpected arguments: %s", strings.Join(extra, " "))
	case o.stack == "" && o.configFile == "":
		return usagef("-stack (or -config) is required")
	case o.timeout <= 0:
		return usagef("-timeout must be positive")
	case o.interval <= 0:
		return usagef("-interval must be positive")
	case o.minDays < 0:
		return usagef("-min-validity-days must be 0 or more")
	case o.certMinValidity <= 0:
		return usagef("-cert-min-validity must be positive")
	case o.insecure && o.caFile != "":
		return usagef("-ca-file and -insecure-skip-tls-verify exclude each other")
	}
	var err error
	if o.checks, err = verify.ParseCheckNames(lists.checks); err != nil {
		return usagef("%v", err)
	}
	o.skip = map[string]string{}
	if strings.TrimSpace(lists.skip) == "" {
		return nil
	}
	skipped, err := verify.ParseCheckNames(lists.skip)
	if err != nil {
		return usagef("-skip: %v", err)
	}
	if strings.TrimSpace(lists.skipReason) == "" {
		return usagef("-skip-reason must not be empty")
	}
	for _, name := range skipped {
		o.skip[name] = lists.skipReason
	}
	return nil
}

// configPath is the stack file to read: -config, or Pulumi.<stack>.yaml.
func (o options) configPath() string {
	if o.configFile != "" {
		return o.configFile
	}
	return "Pulumi." + o.stack + ".yaml"
}

// loadConfig reads and validates the stack file at path; a config it refuses is shown
// with the file's name.
func loadConfig(path string) (*config.Config, error) {
	cfg, err := config.ParseStackFile(path)
	var invalid config.Errors
	switch {
	case errors.As(err, &invalid):
		return nil, fmt.Errorf("%s: %s", path, invalid.Error())
	case err != nil:
		return nil, fmt.Errorf("verify: %w", err)
	}
	return cfg, nil
}

// running are the checks that run: the selected ones minus the skipped ones.
func (o options) running() []string {
	return slices.DeleteFunc(slices.Clone(o.checks), func(n string) bool { _, s := o.skip[n]; return s })
}

// checkOptions are the checks' options: the config, the limits, and the clients of the
// cluster and of the ingress that the checks which run need. usedContext is the
// kubeconfig context the clients use ("" when no check needs the cluster).
func (o options) checkOptions(ctx context.Context, cfg *config.Config, d deps, stderr io.Writer) (opts verify.Options, usedContext string, err error) {
	opts = verify.Options{
		Config:                 cfg,
		Timeout:                o.timeout,
		Interval:               o.interval,
		MinValidity:            time.Duration(o.minDays) * 24 * time.Hour,
		DNSCheckImage:          o.dnsImage,
		MinCertificateValidity: o.certMinValidity,
		ProviderImage:          o.probeImage,
		Now:                    d.now,
		Skip:                   o.skip,
	}
	if o.minDays == 0 {
		opts.MinValidity = time.Nanosecond // only an expired certificate counts
	}
	running := o.running()
	if slices.Contains(running, verify.CheckOIDCUser) {
		if opts.OIDCUser, err = o.oidcUser(ctx); err != nil {
			return opts, "", err
		}
	}
	if needsCluster(running) {
		ctxName := o.kubeContext
		if ctxName == "" && cfg.Platform == config.PlatformKind && cfg.Kind != nil {
			ctxName = cfg.Kind.Context
		}
		cluster, err := d.clients(o.kubeconfig, ctxName)
		if err != nil {
			return opts, "", fmt.Errorf("verify: kubeconfig: %w", err)
		}
		opts.Kube, opts.Dynamic, usedContext = cluster.kube, cluster.dynamic, cluster.context
		opts.Pods = d.pods(cluster.kube, o.podNS)
		opts.Services = d.services(cluster)
	}
	if slices.Contains(running, verify.CheckIngress) {
		if opts.HTTP, err = o.ingressClient(ctx, cfg, opts.Kube, d, stderr); err != nil {
			return opts, "", err
		}
	}
	return opts, usedContext, nil
}

// ingressClient is the HTTP client of the ingress check. The kind edge passes TLS
// through: the shards and the front proxy present certificates from kcp's own CA, which
// the hub kubeconfig carries, so on kind that CA is trusted unless the command line says
// whom to trust.
func (o options) ingressClient(ctx context.Context, cfg *config.Config, kube kubernetes.Interface, d deps, stderr io.Writer) (*http.Client, error) {
	httpOpts := verify.HTTPOptions{Address: o.ingressAddr, CAFile: o.caFile, InsecureSkipVerify: o.insecure}
	if cfg.Platform == config.PlatformKind {
		if httpOpts.Address == "" {
			httpOpts.Address = KindIngressAddress
		}
		if o.caFile == "" && !o.insecure && kube != nil {
			caCtx, cancel := context.WithTimeout(ctx, o.timeout)
			ca, err := verify.HubKubeconfigCA(caCtx, kube, cfg)
			cancel()
			if err == nil {
				httpOpts.ExtraRootsPEM = ca
			} else {
				fmt.Fprintf(stderr, "verify: kcp's CA not available from the hub kubeconfig (%v); the ingress check trusts the system roots only (see -ca-file)\n", err)
			}
		}
	}
	client, err := verify.NewHTTPClient(d.httpOptions(httpOpts))
	if err != nil {
		return nil, usagef("%v", err)
	}
	return client, nil
}

// runChecks runs the selected checks and writes their report; it returns 0 when nothing
// failed (no warning either, with -strict), 1 otherwise, and 2 when the checks could not
// run at all.
func (o options) runChecks(ctx context.Context, opts verify.Options, usedContext string, stdout, stderr io.Writer) int {
	if !o.asJSON {
		fmt.Fprintf(stdout, "verify stack %s (%s), context %q, %s per check\n", o.stack, o.configPath(), usedContext, o.timeout)
	}
	results, err := verify.Run(ctx, opts, o.checks)
	if err != nil {
		fmt.Fprintf(stderr, "verify: %v\n", err)
		return exitUsage
	}
	report := verify.NewReport(o.stack, usedContext, o.strict, results)
	if o.asJSON {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "verify: %v\n", err)
		return exitFailed
	}
	if !report.Passed {
		return exitFailed
	}
	return exitOK
}

func needsCluster(names []string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return n != verify.CheckIngress })
}

// clusterClients reach the cluster of the kubeconfig context.
type clusterClients struct {
	kube    kubernetes.Interface
	dynamic dynamic.Interface
	// rest is the API server's config, which the port-forward dialer uses too.
	rest *rest.Config
	// context is the kubeconfig context actually used.
	context string
}

// kubeClients builds the clients from the kubeconfig, the way kubectl does.
func kubeClients(kubeconfig, kubeContext string) (clusterClients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	raw, err := loader.RawConfig()
	if err != nil {
		return clusterClients{}, err
	}
	c := clusterClients{context: kubeContext}
	if c.context == "" {
		c.context = raw.CurrentContext
	}
	if c.rest, err = loader.ClientConfig(); err != nil {
		return c, err
	}
	c.rest.UserAgent = "railgrid-kcp-verify"
	if c.kube, err = kubernetes.NewForConfig(c.rest); err != nil {
		return c, err
	}
	if c.dynamic, err = dynamic.NewForConfig(c.rest); err != nil {
		return c, err
	}
	return c, nil
}

// oidcUser is what oidc-user signs in with: the token of -oidc-token-file, or the one
// -oidc-kubeconfig's user holds or gets from its exec plugin; nil when neither is given.
func (o options) oidcUser(ctx context.Context) (*verify.OIDCUser, error) {
	var token string
	switch {
	case o.oidcTokenFile != "" && o.oidcKubeconfig != "":
		return nil, usagef("-oidc-token-file and -oidc-kubeconfig exclude each other")
	case o.oidcTokenFile != "":
		data, err := os.ReadFile(o.oidcTokenFile)
		if err != nil {
			return nil, fmt.Errorf("verify: -oidc-token-file: %w", err)
		}
		token = strings.TrimSpace(string(data))
	case o.oidcKubeconfig != "":
		var err error
		if token, err = verify.KubeconfigToken(ctx, o.oidcKubeconfig); err != nil {
			return nil, fmt.Errorf("verify: -oidc-kubeconfig: %w", err)
		}
	default:
		return nil, nil
	}
	return &verify.OIDCUser{Token: token, Workspace: o.oidcWorkspace}, nil
}
