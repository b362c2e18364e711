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

A check named by -skip (e.g. -skip split-horizon,ingress -skip-reason "no pods run here") is not
run and is reported as skipped with the reason: never as passed.

Exit status: 0 nothing failed, 1 a check failed, 2 bad usage, config or kubeconfig.

Flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer, d deps) int {
	flags := flag.NewFlagSet("verify", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var (
		stack       = flags.String("stack", "", "stack to verify: kind or gke (reads Pulumi.<stack>.yaml in the current directory)")
		configFile  = flags.String("config", "", "stack file to read instead of Pulumi.<stack>.yaml")
		kubeconfig  = flags.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
		kubeContext = flags.String("context", "", "kubeconfig context (default: the current context; for the kind stack, kind.context from the stack config)")
		asJSON      = flags.Bool("json", false, "print a JSON report instead of text")
		timeout     = flags.Duration("timeout", verify.DefaultTimeout, "time limit of each check")
		interval    = flags.Duration("interval", verify.DefaultInterval, "pause between attempts of the checks that wait (rollout, ingress, anonymous, hub-credential, shards)")
		checkList   = flags.String("checks", "all", "comma-separated checks to run: "+strings.Join(verify.CheckNames, ","))
		skipList    = flags.String("skip", "", "comma-separated checks not to run; each is reported as skipped (with -skip-reason), never as passed")
		skipReason  = flags.String("skip-reason", "skipped on request (-skip)", "the reason reported for each check named by -skip")
		ingressAddr = flags.String("ingress-address", "", "host:port to dial for the ingress checks instead of resolving the hostnames (default for the kind stack: "+KindIngressAddress+")")
		insecure    = flags.Bool("insecure-skip-tls-verify", false, "do not verify the ingress's server certificates")
		caFile      = flags.String("ca-file", "", "PEM CA bundle to verify the ingress's server certificates with instead of the system roots (for the kind stack, kcp's CA from the hub kubeconfig is trusted by default)")
		minDays     = flags.Int("min-validity-days", verify.DefaultMinValidityDays, "warn when the hub's client certificate expires within this many days")
		strict      = flags.Bool("strict", false, "treat warnings as failures (exit status 1)")
		podNS       = flags.String("pod-namespace", "default", "namespace of the split-horizon probe Pod")
		dnsImage    = flags.String("dns-image", config.DefaultDNSCheckImage, "image of the split-horizon probe Pod (needs /bin/sh and nslookup)")
	)
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
		fmt.Fprintf(stderr, "verify: "+format+"\n", a...)
		fmt.Fprintln(stderr, "run with -h for usage")
		return exitUsage
	}
	switch {
	case flags.NArg() > 0:
		return usageErr("unexpected arguments: %s", strings.Join(flags.Args(), " "))
	case *stack == "" && *configFile == "":
		return usageErr("-stack (or -config) is required")
	case *timeout <= 0:
		return usageErr("-timeout must be positive")
	case *interval <= 0:
		return usageErr("-interval must be positive")
	case *minDays < 0:
		return usageErr("-min-validity-days must be 0 or more")
	case *insecure && *caFile != "":
		return usageErr("-ca-file and -insecure-skip-tls-verify exclude each other")
	}
	names, err := verify.ParseCheckNames(*checkList)
	if err != nil {
		return usageErr("%v", err)
	}
	skip := map[string]string{}
	if strings.TrimSpace(*skipList) != "" {
		skipped, err := verify.ParseCheckNames(*skipList)
		if err != nil {
			return usageErr("-skip: %v", err)
		}
		if strings.TrimSpace(*skipReason) == "" {
			return usageErr("-skip-reason must not be empty")
		}
		for _, name := range skipped {
			skip[name] = *skipReason
		}
	}
	// What actually runs: the selected checks minus the skipped ones.
	running := slices.DeleteFunc(slices.Clone(names), func(n string) bool { _, s := skip[n]; return s })

	path := *configFile
	if path == "" {
		path = "Pulumi." + *stack + ".yaml"
	}
	cfg, err := config.ParseStackFile(path)
	if err != nil {
		var invalid config.Errors
		if errors.As(err, &invalid) {
			fmt.Fprintf(stderr, "%s: %s\n", path, invalid.Error())
		} else {
			fmt.Fprintf(stderr, "verify: %v\n", err)
		}
		return exitUsage
	}
	if *stack == "" {
		*stack = string(cfg.Platform)
	}

	opts := verify.Options{
		Config:        cfg,
		Timeout:       *timeout,
		Interval:      *interval,
		MinValidity:   time.Duration(*minDays) * 24 * time.Hour,
		DNSCheckImage: *dnsImage,
		Now:           d.now,
		Skip:          skip,
	}
	if *minDays == 0 {
		opts.MinValidity = time.Nanosecond // only an expired certificate counts
	}
	usedContext := ""
	if needsCluster(running) {
		ctxName := *kubeContext
		if ctxName == "" && cfg.Platform == config.PlatformKind && cfg.Kind != nil {
			ctxName = cfg.Kind.Context
		}
		cluster, err := d.clients(*kubeconfig, ctxName)
		if err != nil {
			fmt.Fprintf(stderr, "verify: kubeconfig: %v\n", err)
			return exitUsage
		}
		opts.Kube, opts.Dynamic, usedContext = cluster.kube, cluster.dynamic, cluster.context
		opts.Pods = d.pods(cluster.kube, *podNS)
		opts.Services = d.services(cluster)
	}
	if slices.Contains(running, verify.CheckIngress) {
		httpOpts := verify.HTTPOptions{Address: *ingressAddr, CAFile: *caFile, InsecureSkipVerify: *insecure}
		if cfg.Platform == config.PlatformKind {
			if httpOpts.Address == "" {
				httpOpts.Address = KindIngressAddress
			}
			// The kind edge passes TLS through: the shards and the front proxy present
			// certificates from kcp's own CA, which the hub kubeconfig carries.
			if *caFile == "" && !*insecure && opts.Kube != nil {
				caCtx, cancel := context.WithTimeout(ctx, *timeout)
				ca, err := verify.HubKubeconfigCA(caCtx, opts.Kube, cfg)
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
			return usageErr("%v", err)
		}
		opts.HTTP = client
	}

	if !*asJSON {
		fmt.Fprintf(stdout, "verify stack %s (%s), context %q, %s per check\n", *stack, path, usedContext, *timeout)
	}
	results, err := verify.Run(ctx, opts, names)
	if err != nil {
		fmt.Fprintf(stderr, "verify: %v\n", err)
		return exitUsage
	}
	report := verify.NewReport(*stack, usedContext, *strict, results)
	if *asJSON {
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
