// Command provider-probe does once, from where it runs, what an in-cluster provider of
// the hub does with kcp, and reports each check as a line of JSON (see
// internal/providerprobe):
//
//	provider-probe -kubeconfig /var/run/railgrid-kcp/hub/admin.kubeconfig \
//	  -ca-file /var/run/railgrid-kcp/ca/ca.crt -shard alpha \
//	  -shard-url root=https://root.kcp.localhost -shard-url alpha=https://alpha.kcp.localhost
//
// It lives under cmd/ and not in the test tree because it is part of the product:
// cmd/verify runs it as a short-lived Pod in the hub's namespace (check provider-path),
// so a user must be able to build its image from the product's source. It is a static
// binary with no shell, meant for an image with nothing else in it.
//
// It trusts only the CA file (kcp's root-server-ca), or with -trust system only the
// system's roots (the negative case), never skips verification and never overrides the
// TLS server name. It dials every URL as written, by name: the kubeconfig's server for
// the front proxy, the endpoint-slice URLs as kcp lists them, the shard URLs as given.
// It authenticates only with the kubeconfig's client certificate.
//
// Exit status: 0 every check passed, 1 a check failed, 2 bad usage or an unusable
// kubeconfig or CA file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/railgrid/railgrid-kcp/internal/providerprobe"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Where cmd/verify mounts the hub's kubeconfig and kcp's CA in the probe Pod.
const (
	DefaultKubeconfig = "/var/run/railgrid-kcp/hub/admin.kubeconfig"
	DefaultCAFile     = "/var/run/railgrid-kcp/ca/ca.crt"
)

const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// shardURLs collects repeated -shard-url name=URL flags.
type shardURLs []providerprobe.ShardURL

func (s *shardURLs) String() string {
	var parts []string
	for _, u := range *s {
		parts = append(parts, u.Name+"="+u.URL)
	}
	return strings.Join(parts, ",")
}

func (s *shardURLs) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		name, u, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" || u == "" {
			return fmt.Errorf("%q is not name=https://host", item)
		}
		*s = append(*s, providerprobe.ShardURL{Name: name, URL: u})
	}
	return nil
}

const usageHeader = `usage: provider-probe [flags]

Does what an in-cluster provider of the hub does with kcp and prints one JSON line per
check: {"step","check","url","identity","credential","result","message","error","seconds"}.

  provider-path  through the front proxy (the kubeconfig's server): scratch provider and
                 consumer workspaces on -shard, an APIExport bound in the consumer, the
                 export's endpoint slice until it lists the shard's URL on
                 -shard-hostname; then at that URL as written: create, list across
                 workspaces, watch; the same through a ClusterCachedResource; clean-up
  hub-identity   SelfSubjectReview in the root workspace through the front proxy and at
                 each -shard-url, as the kubeconfig's client certificate

Flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("provider-probe", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var urls shardURLs
	var (
		kubeconfig = flags.String("kubeconfig", DefaultKubeconfig, "the hub's kubeconfig (its server and client certificate are used; nothing else of it)")
		caFile     = flags.String("ca-file", DefaultCAFile, "PEM file of the only CAs trusted (kcp's root-server-ca); with -trust system it must be empty")
		trust      = flags.String("trust", "ca-file", "ca-file: trust only -ca-file; system: trust only the system's roots (every request should then fail verification)")
		steps      = flags.String("steps", strings.Join(providerprobe.Steps, ","), "comma-separated steps: "+strings.Join(providerprobe.Steps, ", "))
		shard      = flags.String("shard", "alpha", "kcp Shard to place the scratch workspaces on")
		hostname   = flags.String("shard-hostname", "", "public hostname the shard's endpoint-slice URLs must be on (default: the host of -shard-url for -shard)")
		prefix     = flags.String("name-prefix", "railgrid-probe", "prefix of the scratch workspaces' names")
		keep       = flags.Bool("keep", false, "keep the scratch workspaces")
		wantUser   = flags.String("want-user", naming.KubeconfigUsername, "user kcp must see")
		wantGroups = flags.String("want-groups", naming.KubeconfigAdminGroup, "comma-separated groups kcp must see")
		wait       = flags.Duration("wait", 90*time.Second, "time limit of each wait for kcp to reconcile")
		interval   = flags.Duration("interval", time.Second, "pause between reads while waiting")
		timeout    = flags.Duration("timeout", 8*time.Minute, "time limit of the whole run (the clean-up still runs after it)")
		reqTimeout = flags.Duration("request-timeout", 30*time.Second, "time limit of each request to kcp")
	)
	flags.Var(&urls, "shard-url", "a shard's public URL as name=https://host (repeat, or comma-separate); hub-identity asks at each")
	flags.Usage = func() {
		fmt.Fprint(stderr, usageHeader)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "provider-probe: "+format+"\n", a...)
		return exitUsage
	}
	if flags.NArg() > 0 {
		return usageErr("unexpected arguments: %s", strings.Join(flags.Args(), " "))
	}
	if *timeout <= 0 {
		return usageErr("-timeout must be positive")
	}
	if *reqTimeout <= 0 {
		return usageErr("-request-timeout must be positive")
	}

	data, err := os.ReadFile(*kubeconfig)
	if err != nil {
		return usageErr("-kubeconfig: %v", err)
	}
	cred, err := providerprobe.LoadCredential(data)
	if err != nil {
		return usageErr("-kubeconfig %s: %v", *kubeconfig, err)
	}
	var t providerprobe.Trust
	switch *trust {
	case "ca-file":
		if *caFile == "" {
			return usageErr("-ca-file is empty; -trust ca-file needs it")
		}
		ca, err := os.ReadFile(*caFile)
		if err != nil {
			return usageErr("-ca-file: %v", err)
		}
		if err := providerprobe.ReadCABundle(ca); err != nil {
			return usageErr("-ca-file %s %v", *caFile, err)
		}
		t.CAPEM = ca
	case "system":
		if flagSet(flags, "ca-file") && *caFile != "" {
			return usageErr("-ca-file and -trust system exclude each other")
		}
		t.System = true
	default:
		return usageErr("-trust %q: want ca-file or system", *trust)
	}

	host := *hostname
	if host == "" {
		for _, u := range urls {
			if u.Name == *shard {
				if parsed, err := providerprobe.HTTPSURL(u.URL, true); err == nil {
					host = parsed.Hostname()
				}
			}
		}
	}
	var stepList []string
	for _, s := range strings.Split(*steps, ",") {
		if s = strings.TrimSpace(s); s != "" {
			stepList = append(stepList, s)
		}
	}
	var groups []string
	for _, g := range strings.Split(*wantGroups, ",") {
		if g = strings.TrimSpace(g); g != "" {
			groups = append(groups, g)
		}
	}
	report := providerprobe.NewReporter(stdout)
	opts := providerprobe.Options{
		Client: &providerprobe.Client{Credential: cred, Trust: t, Timeout: *reqTimeout},
		Steps:  stepList, Shard: *shard, ShardHostname: host, ShardURLs: urls,
		NamePrefix: *prefix, Keep: *keep, WantUser: *wantUser, WantGroups: groups,
		Wait: *wait, Interval: *interval, Report: report,
	}
	if err := opts.Validate(); err != nil {
		return usageErr("%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := providerprobe.Run(ctx, opts); err != nil {
		fmt.Fprintf(stderr, "provider-probe: %v\n", err)
		return exitFailed
	}
	if report.Failed() {
		return exitFailed
	}
	return exitOK
}

func flagSet(flags *flag.FlagSet, name string) bool {
	set := false
	flags.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}
