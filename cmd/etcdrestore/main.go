// Command etcdrestore prints the Jobs that restore one shard's etcd from a snapshot, one
// per member, for `kubectl apply -f -`, reading the same Pulumi.<stack>.yaml as the
// program:
//
//	go run ./cmd/etcdrestore -stack gke -shard root -snapshot 20250101T030000Z.db | kubectl apply -f -
//	go run ./cmd/etcdrestore -stack kind -shard root -bucket my-bucket | kubectl apply -f -
//
// Each Job runs the restore drill's own restore steps (components/etcdjobs) into its
// member's volume: download the snapshot, check it, move the member's data aside, and
// restore it with the member's name and peer URL, all members' peer URLs, a cluster token
// of this restore, the revision bumped and marked compacted. The runbook in
// docs/operations.md says when to run it: with the shard's writers and its StatefulSet
// stopped.
//
// It prints the manifests on stdout and what to do next on stderr, and exits 0; 2 for
// bad usage or config, 1 when the bucket cannot be read from the stack.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/railgrid/railgrid-kcp/components/etcdjobs"
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/etcdrestore"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, defaultDeps()))
}

// deps are the outside world, replaced in tests.
type deps struct {
	now func() time.Time
	// stackOutput reads one output of a Pulumi stack as JSON.
	stackOutput func(pulumiCLI, stack, output string) ([]byte, error)
}

func defaultDeps() deps { return deps{now: time.Now, stackOutput: pulumiStackOutput} }

// pulumiStackOutput asks the Pulumi CLI in the current directory (the project's) for a
// stack output.
func pulumiStackOutput(pulumiCLI, stack, output string) ([]byte, error) {
	cmd := exec.Command(pulumiCLI, "stack", "output", output, "--json", "--stack", stack)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

const usageHeader = `usage: go run ./cmd/etcdrestore -stack kind|gke -shard NAME [flags] | kubectl apply -f -

Prints the Jobs that restore the shard's etcd from a snapshot: one per member, each
mounting the member's volume claim (data-etcd-<shard>-<i>), in namespace etcd. Each runs
the restore drill's steps: fetch the snapshot with gcloud, check it (etcdutl snapshot
status), move the member's data aside (to <data dir>.before-<token>), and restore it
(etcdutl snapshot restore, with the member's name and peer URL, every member's peer URL,
a new cluster token, --bump-revision 1000000000 --mark-compacted).

Run them only with the shard's kcp and etcd stopped: see "Restoring etcd from a
snapshot" in docs/operations.md. The Jobs of one restore carry the label
railgrid.io/etcd-restore=<id>; the command says how to wait for them.

Flags:
`

// options are the command line, parsed and checked.
type options struct {
	stack, configFile string
	shard, snapshot   string
	bucket            string
	id                string
	gcloudImageTag    string
	pulumiCLI         string
	env               envFlag
}

// envFlag collects repeated -env KEY=VALUE.
type envFlag []etcdjobs.EnvVar

func (e *envFlag) String() string {
	var parts []string
	for _, v := range *e {
		parts = append(parts, v.Name+"="+v.Value)
	}
	return strings.Join(parts, " ")
}

func (e *envFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	*e = append(*e, etcdjobs.EnvVar{Name: name, Value: value})
	return nil
}

type usageError string

func (e usageError) Error() string { return string(e) }

var errShown = errors.New("shown by the flag package")

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	flags := flag.NewFlagSet("etcdrestore", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprint(stderr, usageHeader)
		flags.PrintDefaults()
	}
	flags.StringVar(&o.stack, "stack", "", "stack name: reads Pulumi.<stack>.yaml, and on gke the stack's snapshots output")
	flags.StringVar(&o.configFile, "config", "", "stack file to read instead of Pulumi.<stack>.yaml")
	flags.StringVar(&o.shard, "shard", "", "the shard whose etcd to restore (root, or a name of kcp.shards)")
	flags.StringVar(&o.snapshot, "snapshot", "", "the snapshot: gs://<bucket>/<shard>/<UTC timestamp>.db or its name alone (default: the newest of the shard, looked up by each Job)")
	flags.StringVar(&o.bucket, "bucket", "", "the snapshot bucket (default on gke: the stack output snapshots.bucket, read with the Pulumi CLI; required on kind, which has none)")
	flags.Var(&o.env, "env", "KEY=VALUE added to the environment of the steps that call gcloud (repeatable), e.g. another storage endpoint")
	flags.StringVar(&o.gcloudImageTag, "gcloud-image-tag", "", "google-cloud-cli tag (default: gke.snapshots.gcloudImageTag, or its default on kind)")
	flags.StringVar(&o.id, "id", "", "the restore's id, in its Jobs' names, label and cluster token (default: the UTC time, e.g. 20250101t030000z)")
	flags.StringVar(&o.pulumiCLI, "pulumi", "pulumi", "the Pulumi CLI that reads the gke stack's bucket")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, errShown
	}
	switch {
	case flags.NArg() > 0:
		return o, usageError(fmt.Sprintf("unexpected arguments: %s", strings.Join(flags.Args(), " ")))
	case o.stack == "" && o.configFile == "":
		return o, usageError("-stack (or -config) is required")
	case o.shard == "":
		return o, usageError("-shard is required")
	}
	if o.gcloudImageTag != "" && !config.ValidGcloudImageTag(o.gcloudImageTag) {
		return o, usageError(fmt.Sprintf("-gcloud-image-tag %q: must be a pinned google-cloud-cli tag such as %s", o.gcloudImageTag, config.DefaultGcloudImageTag))
	}
	return o, nil
}

func (o options) configPath() string {
	if o.configFile != "" {
		return o.configFile
	}
	return "Pulumi." + o.stack + ".yaml"
}

// stackName is the Pulumi stack: -stack, or the name in a -config file named
// Pulumi.<stack>.yaml.
func (o options) stackName() string {
	if o.stack != "" {
		return o.stack
	}
	base := filepath.Base(o.configFile)
	if name, ok := strings.CutPrefix(base, "Pulumi."); ok {
		return strings.TrimSuffix(name, ".yaml")
	}
	return ""
}

func run(args []string, stdout, stderr io.Writer, d deps) int {
	o, err := parseOptions(args, stderr)
	var usage usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errShown):
		return exitUsage
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "etcdrestore: %s\nrun with -h for usage\n", usage)
		return exitUsage
	}
	cfg, err := config.ParseStackFile(o.configPath())
	if err != nil {
		fmt.Fprintf(stderr, "etcdrestore: %s: %v\n", o.configPath(), err)
		return exitUsage
	}
	bucket, code := o.findBucket(cfg, d, stderr)
	if code != exitOK {
		return code
	}
	id := o.id
	if id == "" {
		id = etcdrestore.NewID(d.now())
	}
	ro := etcdrestore.Options{Config: cfg, Shard: o.shard, Bucket: bucket, Snapshot: o.snapshot, ID: id,
		GcloudImageTag: o.gcloudImageTag, Env: o.env}
	jobs, err := etcdrestore.Jobs(ro)
	if err != nil {
		fmt.Fprintf(stderr, "etcdrestore: %v\n", err)
		return exitUsage
	}
	what := "the newest snapshot under gs://" + bucket + "/" + o.shard + "/ (each Job names it in its log)"
	if url, _ := ro.SnapshotURL(); url != "" {
		what = url
	}
	members := fmt.Sprintf("%d members", len(jobs))
	if len(jobs) == 1 {
		members = "1 member"
	}
	header := []string{
		fmt.Sprintf("Restore %s of shard %s's etcd (%s) from %s.", id, o.shard, members, what),
		fmt.Sprintf("Cluster token %s; each member's data is moved aside to %s.before-%s.", naming.EtcdRestoreToken(o.shard, id), naming.EtcdDataDir, naming.EtcdRestoreToken(o.shard, id)),
	}
	out, err := etcdrestore.Manifests(jobs, header)
	if err != nil {
		fmt.Fprintf(stderr, "etcdrestore: %v\n", err)
		return exitFailed
	}
	if _, err := stdout.Write(out); err != nil {
		fmt.Fprintf(stderr, "etcdrestore: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "%d restore Jobs for shard %s (restore %s). After kubectl apply, wait for them:\n", len(jobs), o.shard, id)
	fmt.Fprintf(stderr, "  kubectl -n %s wait --for=condition=complete --timeout=30m job -l %s=%s\n", naming.NamespaceEtcd, naming.EtcdRestoreLabel, id)
	fmt.Fprintf(stderr, "  kubectl -n %s logs -l %s=%s --all-containers --prefix\n", naming.NamespaceEtcd, naming.EtcdRestoreLabel, id)
	return exitOK
}

// findBucket is -bucket, or on gke the bucket the stack output names.
func (o options) findBucket(cfg *config.Config, d deps, stderr io.Writer) (string, int) {
	if o.bucket != "" {
		return o.bucket, exitOK
	}
	if cfg.Platform != config.PlatformGKE {
		fmt.Fprintf(stderr, "etcdrestore: the %s stack has no snapshot bucket: name the bucket that holds the snapshots with -bucket\n", cfg.Platform)
		return "", exitUsage
	}
	stack := o.stackName()
	if stack == "" {
		fmt.Fprintf(stderr, "etcdrestore: -config %s does not name a stack (Pulumi.<stack>.yaml): give -stack or -bucket\n", o.configFile)
		return "", exitUsage
	}
	raw, err := d.stackOutput(o.pulumiCLI, stack, "snapshots")
	var out struct {
		Bucket string `json:"bucket"`
	}
	if err == nil {
		err = json.Unmarshal(raw, &out)
	}
	if err == nil && out.Bucket == "" {
		err = fmt.Errorf("the output has no bucket: %s", strings.TrimSpace(string(raw)))
	}
	if err != nil {
		fmt.Fprintf(stderr, "etcdrestore: reading the bucket from stack %s's output snapshots: %v\n(give -bucket to name it)\n", stack, err)
		return "", exitFailed
	}
	return out.Bucket, exitOK
}
