// Command plan renders the offline plan of a stack: it runs the real composition (the
// code `pulumi up` runs) under an in-process Pulumi mock monitor, with no cloud, cluster
// or Pulumi CLI, and prints every Kubernetes object (yaml), every resource (json) or the
// dependency graph with its critical path (graph, or folded into the components as a
// Mermaid flowchart: mermaid).
//
//	go run ./cmd/plan -stack gke > before.yaml
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("plan", flag.ContinueOnError)
	flags.SetOutput(stderr)
	stack := flags.String("stack", "", "stack to render: kind or gke (reads Pulumi.<stack>.yaml)")
	configFile := flags.String("config", "", "stack file to read instead of Pulumi.<stack>.yaml (same format)")
	format := flags.String("format", "yaml", "yaml (Kubernetes objects), json (every resource), graph (DOT and critical path), mermaid (the graph folded into the components, as a Mermaid flowchart) or changes (needs -before)")
	before := flags.String("before", "", "with -format changes: the stack file before the change; the plan of -config (or Pulumi.<stack>.yaml) is the after")
	serviceCIDR := flags.String("gke-service-cidr", mockstack.DefaultGKEServiceCIDR, "Service range the mocked GKE cluster lookup reports")
	flags.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./cmd/plan -stack kind|gke [-config FILE] [-format yaml|json|graph|mermaid] | -format changes -before FILE")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if *stack == "" {
		flags.Usage()
		return 2
	}
	if *format == "changes" && *before == "" {
		fmt.Fprintln(stderr, "-format changes needs -before FILE, the stack file before the change")
		return 2
	}
	path := *configFile
	if path == "" {
		path = "Pulumi." + *stack + ".yaml"
	}
	rec, err := mockstack.RunStackFile(*stack, path, mockstack.Options{GKEServiceCIDR: *serviceCIDR})
	var invalid config.Errors
	if errors.As(err, &invalid) {
		fmt.Fprintln(stderr, invalid.Error())
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	switch *format {
	case "yaml":
		err = plan.WriteYAML(stdout, rec)
	case "json":
		err = plan.WriteJSON(stdout, rec)
	case "graph":
		err = plan.WriteGraph(stdout, rec)
	case "mermaid":
		err = plan.WriteMermaid(stdout, rec)
	case "changes":
		prev, perr := mockstack.RunStackFile(*stack, *before, mockstack.Options{GKEServiceCIDR: *serviceCIDR})
		if errors.As(perr, &invalid) {
			fmt.Fprintln(stderr, "-before "+*before+": "+invalid.Error())
			return 2
		}
		if perr != nil {
			fmt.Fprintln(stderr, perr)
			return 2
		}
		err = plan.WriteChanges(stdout, prev, rec)
	default:
		fmt.Fprintf(stderr, "unknown -format %q: use yaml, json, graph, mermaid or changes\n", *format)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
