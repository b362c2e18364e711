// Command kcpadmin gives an admin on a laptop kubectl access to a stack's kcp, as
// kcp-admin, in one command:
//
//	go run ./cmd/kcpadmin -stack kind
//
// It reads the kcp-operator's admin kubeconfig through the current kube context,
// forwards 127.0.0.1 to the front proxy's Service as `kubectl port-forward` does, writes
// a kubeconfig for that forward (mode 0600, outside the checkout) and holds the forward
// until interrupted.
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

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/kcpadmin"
)

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
	// cluster connects with the kubeconfig and context (kubectl's rules); it returns the
	// context name actually used.
	cluster func(kubeconfig, kubeContext string) (*rest.Config, string, error)
	// options lets tests put fakes behind Run.
	options func(kcpadmin.Options) kcpadmin.Options
}

func defaultDeps() deps {
	return deps{
		cluster: restConfig,
		options: func(o kcpadmin.Options) kcpadmin.Options { return o },
	}
}

const usageHeader = `usage: go run ./cmd/kcpadmin -stack kind|gke [flags]

Gives this machine kubectl access to the stack's kcp as kcp-admin (group
system:kcp:admin), through the front proxy, for as long as it runs:

  1. reads the kcp-operator's admin kubeconfig, the Secret kcp-system/<Kubeconfig object
     of hub.remintGeneration> (kcp-kubeconfig-frontproxy, then ...-remint-<n>), through
     the kube context (the kind stack defaults to its kind.context and kind.kubeconfig);
     needs get on that Secret and the Service, get and list on the pods, and create on
     pods/portforward in kcp-system
  2. forwards 127.0.0.1:<port> (a free port unless -port) to the front proxy's Service
     kcp-system/kcp-frontproxy port 6443, as kubectl port-forward svc/kcp-frontproxy
     does; when the front proxy's pod ends or stops being Ready, the forward moves to a
     Ready pod on the same port
  3. asks kcp through the forward who the credential is (a SelfSubjectReview), then
     writes a kubeconfig for the forward: server https://127.0.0.1:<port>/clusters/root,
     tls-server-name the front proxy's in-cluster name, the operator's CA and client
     certificate; mode 0600, by default in the user's config directory, never inside
     the git checkout it runs from
  4. prints how to use it and holds the forward until Ctrl-C or SIGTERM; the file stays
     valid until the client certificate expires (printed)

No key material is printed. Exit status: 0 after an interrupt, 1 when the credential,
the forward or the check fails, 2 for bad usage, config or kubeconfig.

Flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer, d deps) int {
	flags := flag.NewFlagSet("kcpadmin", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var (
		stack       = flags.String("stack", "", "stack: kind or gke (reads Pulumi.<stack>.yaml in the current directory)")
		configFile  = flags.String("config", "", "stack file to read instead of Pulumi.<stack>.yaml")
		kubeconfig  = flags.String("kubeconfig", "", "kubeconfig file of the cluster (default: the kind stack's kind.kubeconfig, else $KUBECONFIG or ~/.kube/config)")
		kubeContext = flags.String("context", "", "kubeconfig context (default: the current context; for the kind stack, kind.context)")
		output      = flags.String("o", "", "kubeconfig file to write (default: <user config dir>/railgrid-kcp/<stack>-kcp-admin.kubeconfig, e.g. ~/.config/railgrid-kcp/kind-kcp-admin.kubeconfig); refused inside the git checkout")
		port        = flags.Int("port", 0, "local port on 127.0.0.1 (default: a free port)")
		timeout     = flags.Duration("timeout", kcpadmin.DefaultTimeout, "time limit of each step before the forward is handed over")
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
		fmt.Fprintf(stderr, "kcpadmin: "+format+"\n", a...)
		fmt.Fprintln(stderr, "run with -h for usage")
		return exitUsage
	}
	switch {
	case flags.NArg() > 0:
		return usageErr("unexpected arguments: %s", strings.Join(flags.Args(), " "))
	case *stack == "" && *configFile == "":
		return usageErr("-stack (or -config) is required")
	case *port < 0 || *port > 65535:
		return usageErr("-port %d: want 1-65535, or 0 for a free port", *port)
	case *timeout <= 0:
		return usageErr("-timeout must be positive")
	}

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
			fmt.Fprintf(stderr, "kcpadmin: %v\n", err)
		}
		return exitUsage
	}
	if *stack == "" {
		*stack = string(cfg.Platform)
	}

	// Refuse a bad output path before the cluster is asked anything.
	out := *output
	if out == "" {
		if out, err = kcpadmin.DefaultKubeconfigPath(*stack); err != nil {
			return usageErr("%v", err)
		}
	}
	if err := kcpadmin.RefuseInsideCheckout(out, "."); err != nil {
		if *output == "" {
			return usageErr("the default kubeconfig file %v", err)
		}
		return usageErr("-o %v", err)
	}

	file, ctxName := *kubeconfig, *kubeContext
	if cfg.Platform == config.PlatformKind && cfg.Kind != nil {
		if file == "" {
			file = cfg.Kind.Kubeconfig
		}
		if ctxName == "" {
			ctxName = cfg.Kind.Context
		}
	}
	rc, usedContext, err := d.cluster(file, ctxName)
	if err != nil {
		fmt.Fprintf(stderr, "kcpadmin: kubeconfig: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "kcpadmin: stack %s (%s), context %q\n", *stack, path, usedContext)

	session, err := kcpadmin.Run(ctx, d.options(kcpadmin.Options{
		Config: cfg, Stack: *stack, RESTConfig: rc,
		Output: out, WorkDir: ".", LocalPort: *port, Timeout: *timeout, Log: stdout,
	}))
	if err != nil {
		fmt.Fprintf(stderr, "kcpadmin: %v\n", err)
		return exitFailed
	}
	printUse(stdout, session)
	select {
	case <-ctx.Done():
	case <-session.Done():
	}
	session.Close()
	fmt.Fprintf(stdout, "\nkcpadmin: forward stopped. %s is kept: it is kcp-admin's credential until %s (%s), for whoever can read it and reach the front proxy; run kcpadmin again to forward again.\n",
		session.KubeconfigPath, session.ExpiresAt.UTC().Format(time.RFC3339), untilExpiry(session.ExpiresAt))
	return exitOK
}

// printUse tells the user how to use the kubeconfig while the forward runs.
func printUse(w io.Writer, s *kcpadmin.Session) {
	fmt.Fprintf(w, `kcpadmin: wrote %s (mode 0600): server %s, tls-server-name %s
kcpadmin: its client certificate expires at %s (%s)

In another shell, while this command runs:

  export KUBECONFIG=%s
  kubectl get workspaces

Ctrl-C stops the forward; the file stays.
`, s.KubeconfigPath, s.Server, s.ServerName, s.ExpiresAt.UTC().Format(time.RFC3339), untilExpiry(s.ExpiresAt), shellQuote(s.KubeconfigPath))
}

func untilExpiry(t time.Time) string {
	days := int(time.Until(t).Hours() / 24)
	return fmt.Sprintf("in %d days", days)
}

// shellQuote quotes a path for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// restConfig is the API server's config for the kubeconfig and context, by kubectl's
// loading rules; it returns the context name actually used.
func restConfig(kubeconfig, kubeContext string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, "", err
	}
	used := kubeContext
	if used == "" {
		used = raw.CurrentContext
	}
	rc, err := loader.ClientConfig()
	if err != nil {
		return nil, used, err
	}
	rc.UserAgent = "railgrid-kcp-kcpadmin"
	return rc, used, nil
}
