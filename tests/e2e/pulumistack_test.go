//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

// stackName is the name of the e2e stack; the offline plan is rendered for the same name
// so that URNs match.
const stackName = "e2e"

// e2eStack is one stack of the program in a workspace of its own, with a file://
// backend and the passphrase secrets provider. The Automation API drives the Pulumi CLI
// over a copy of the program's source: every preview, up and destroy compiles and runs
// main.go through the Go language host, with the stack config in PULUMI_CONFIG, as a
// user's `pulumi up -s kind` does.
type e2eStack struct {
	t        *testing.T
	dir      string // workspace: a copy of the program and Pulumi.e2e.yaml
	stateDir string // the file:// backend
	cfgFile  string
	tmpDir   string // TMPDIR of the CLI and its plugins
	stack    auto.Stack
	cli      *pulumiCLI
}

// newStack makes the stack in the workspace, which holds a copy of the program
// (copyProgram): Pulumi.e2e.yaml made from the shipped Pulumi.kind.yaml with only the
// keys of the run's overlay changed, a file:// backend and the CLI's environment.
func newStack(t *testing.T, ctx context.Context, root, base, workspace string, c *cluster, bins binaries, o stackOverlay) *e2eStack {
	t.Helper()
	s := &e2eStack{t: t, dir: workspace, stateDir: filepath.Join(base, "state")}
	// The Kubernetes provider writes a copy of its kubeconfig, client key included, to
	// $TMPDIR on every run and never removes it (pulumi-kubernetes provider/pkg/provider,
	// writeKubeconfigToFile): kept under base, the test's cleanup removes those copies.
	tmp := filepath.Join(base, "tmp")
	s.tmpDir = tmp
	for _, d := range []string{s.dir, filepath.Join(base, "state"), filepath.Join(base, "pulumi-home"), tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The CLI's output of every command, kept when the test fails.
	logDir, err := os.MkdirTemp("", "railgrid-e2e-pulumi-logs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the Pulumi CLI's output of every command is kept in %s", logDir)
			return
		}
		os.RemoveAll(logDir)
	})
	s.cfgFile = filepath.Join(s.dir, "Pulumi."+stackName+".yaml")
	shipped := filepath.Join(root, "Pulumi.kind.yaml")
	if err := writeStackConfig(shipped, s.cfgFile, o); err != nil {
		t.Fatal(err)
	}
	checkOverlay(t, shipped, s.cfgFile, o.keys())

	env := map[string]string{
		"PULUMI_BACKEND_URL":                          "file://" + filepath.ToSlash(filepath.Join(base, "state")),
		"PULUMI_CONFIG_PASSPHRASE":                    testenv.RandomHex(t, 16),
		"PULUMI_HOME":                                 filepath.Join(base, "pulumi-home"),
		"PULUMI_SKIP_UPDATE_CHECK":                    "true",
		"PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK":    "true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
		// The provider and the program's Helm record hook read the cluster from here, as
		// on a user's machine: the stack file names only the context.
		"KUBECONFIG": c.kubeconfig,
		// The CLI runs the Go language host (built from its upstream source) from PATH.
		"PATH":             filepath.Dir(bins.langhost) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"GOFLAGS":          programGOFLAGS(),
		"TMPDIR":           tmp,
		"HELM_CACHE_HOME":  filepath.Join(base, "helm", "cache"),
		"HELM_CONFIG_HOME": filepath.Join(base, "helm", "config"),
		"HELM_DATA_HOME":   filepath.Join(base, "helm", "data"),
		// The README's way for an oci:// mirror behind a private CA: the CA in the trust
		// store of the machine that runs pulumi (the provider's registry client takes no
		// CA file). It replaces the system's roots for the CLI and its plugins, which
		// reach nothing else over TLS but the API server, whose CA the kubeconfig holds.
		"SSL_CERT_FILE": o.mirrors.Registry.CAFile,
	}
	s.cli = newPulumiCLI(t, bins.pulumi, logDir)
	s.stack, err = auto.UpsertStackLocalSource(ctx, stackName, s.dir,
		auto.Pulumi(s.cli), auto.EnvVars(env), auto.SecretsProvider("passphrase"))
	if err != nil {
		t.Fatalf("creating stack %s: %v", stackName, err)
	}
	return s
}

// programGOFLAGS are the GOFLAGS of the language host's build of main.go: it must not
// change go.mod or go.sum; the test's own flags (hack/goflags.sh, when set) stay, so
// that build reuses the test's compile.
func programGOFLAGS() string { return strings.TrimSpace(os.Getenv("GOFLAGS") + " -mod=readonly") }

// compileTimeout bounds the program's first compile, which a cold build cache makes
// long (minutes on 2 cores, more beside other compiles); the previews' and ups' budgets
// then measure only the CLI's work.
const compileTimeout = 25 * time.Minute

// copyProgram copies the program into a fresh workspace and starts the language host's
// build of it there, in the background: the same command (pulumi-language-go's
// compileProgram: go build -buildvcs=false -o <buildTarget> -trimpath -ldflags "-w -s")
// with the same GOFLAGS, so that the first preview finds every package compiled and the
// build target up to date. wait returns the build's outcome, naming the compile when it
// fails or runs out of time.
func copyProgram(t *testing.T, ctx context.Context, root, workspace string) (wait func() error) {
	t.Helper()
	testenv.CopyProgram(t, root, workspace)
	target, err := projectBuildTarget(filepath.Join(workspace, "Pulumi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(ctx, compileTimeout)
	build := exec.CommandContext(bctx, "go", "build", "-buildvcs=false", "-o", target, "-trimpath", "-ldflags", "-w -s")
	build.Dir = workspace
	build.Env = append(os.Environ(), "GOFLAGS="+programGOFLAGS())
	var out bytes.Buffer
	build.Stdout, build.Stderr = &out, &out
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		err := build.Run()
		switch {
		case bctx.Err() == context.DeadlineExceeded:
			err = fmt.Errorf("compiling the program (go build of main.go, as the language host runs it) took more than %s: %v\n%s", compileTimeout, err, out.String())
		case err != nil:
			err = fmt.Errorf("compiling the program (go build of main.go, as the language host runs it): %v\n%s", err, out.String())
		}
		cancel()
		done <- err
	}()
	var once sync.Once
	var result error
	return func() error {
		once.Do(func() {
			result = <-done
			if result == nil {
				t.Logf("the program compiled in %s (its own budget, %s; the previews' and ups' budgets exclude it)",
					time.Since(start).Round(time.Second), compileTimeout)
			}
		})
		return result
	}
}

// projectBuildTarget reads runtime.options.buildTarget from a Pulumi.yaml.
func projectBuildTarget(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var project struct {
		Runtime struct {
			Options struct {
				BuildTarget string `yaml:"buildTarget"`
			} `yaml:"options"`
		} `yaml:"runtime"`
	}
	if err := yaml.Unmarshal(data, &project); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if project.Runtime.Options.BuildTarget == "" {
		return "", fmt.Errorf("%s sets no runtime.options.buildTarget: the language host would compile a fresh binary for every preview and up", path)
	}
	return project.Runtime.Options.BuildTarget, nil
}

// output is one of the stack's outputs, as a string (`pulumi stack output NAME`).
func (s *e2eStack) output(ctx context.Context, name string) (string, error) {
	outs, err := s.stack.Outputs(ctx)
	if err != nil {
		return "", err
	}
	o, ok := outs[name]
	if !ok {
		return "", fmt.Errorf("the stack has no output %s", name)
	}
	v, ok := o.Value.(string)
	if !ok {
		return "", fmt.Errorf("the stack's output %s is a %T, not a string", name, o.Value)
	}
	return v, nil
}

// setConfigPath sets one nested config value the way an operator would:
// pulumi config set --path railgrid-kcp:<path> <value>.
func (s *e2eStack) setConfigPath(ctx context.Context, path, value string) {
	s.t.Helper()
	if err := s.stack.SetConfigWithOptions(ctx, config.Project+":"+path, auto.ConfigValue{Value: value}, &auto.ConfigOptions{Path: true}); err != nil {
		s.t.Fatalf("pulumi config set --path %s:%s %s: %v", config.Project, path, value, err)
	}
}

func (s *e2eStack) preview(ctx context.Context, opts ...optpreview.Option) (auto.PreviewResult, *eventLog, error) {
	log := &eventLog{}
	ch, wait := log.collect(nil)
	res, err := s.stack.Preview(ctx, append(opts, optpreview.EventStreams(ch))...)
	wait()
	return res, log, err
}

func (s *e2eStack) up(ctx context.Context, onEvent func(apitype.EngineEvent), opts ...optup.Option) (auto.UpResult, *eventLog, error) {
	log := &eventLog{}
	ch, wait := log.collect(onEvent)
	start := time.Now()
	res, err := s.stack.Up(ctx, append(opts, optup.EventStreams(ch))...)
	wait()
	if slow := log.slowest(4); slow != "" {
		s.t.Logf("up in %s; its slowest steps: %s", time.Since(start).Round(time.Second), slow)
	}
	return res, log, err
}

func (s *e2eStack) refresh(ctx context.Context, opts ...optrefresh.Option) (auto.RefreshResult, *eventLog, error) {
	log := &eventLog{}
	ch, wait := log.collect(nil)
	res, err := s.stack.Refresh(ctx, append(opts, optrefresh.EventStreams(ch))...)
	wait()
	return res, log, err
}

// previewRefresh runs `pulumi refresh --preview-only`: what a refresh would find,
// written nowhere.
func (s *e2eStack) previewRefresh(ctx context.Context, opts ...optrefresh.Option) (auto.PreviewResult, *eventLog, error) {
	log := &eventLog{}
	ch, wait := log.collect(nil)
	res, err := s.stack.PreviewRefresh(ctx, append(opts, optrefresh.EventStreams(ch))...)
	wait()
	return res, log, err
}

func (s *e2eStack) destroy(ctx context.Context, opts ...optdestroy.Option) (auto.DestroyResult, *eventLog, error) {
	log := &eventLog{}
	ch, wait := log.collect(nil)
	res, err := s.stack.Destroy(ctx, append(opts, optdestroy.EventStreams(ch))...)
	wait()
	return res, log, err
}

// deployment is the parts of `pulumi stack export` the test reads.
type deployment struct {
	raw       []byte
	Resources []struct {
		URN        string         `json:"urn"`
		Type       string         `json:"type"`
		ID         string         `json:"id"`
		Custom     bool           `json:"custom"`
		Outputs    map[string]any `json:"outputs"`
		Inputs     map[string]any `json:"inputs"`
		InitErrors []string       `json:"initErrors"`
	} `json:"resources"`
	PendingOperations []struct {
		Type     string `json:"type"`
		Resource struct {
			URN string `json:"urn"`
		} `json:"resource"`
	} `json:"pending_operations"`
}

// export runs `pulumi stack export` as an operator would: without --show-secrets (the
// Automation API's Stack.Export adds it and decrypts every secret).
func (s *e2eStack) export(ctx context.Context) deployment {
	s.t.Helper()
	vars := s.stack.Workspace().GetEnvVars()
	var env []string
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	stdout, stderr, _, err := s.cli.Run(ctx, s.dir, nil, nil, nil, env, "stack", "export", "--stack", stackName)
	if err != nil {
		s.t.Fatalf("pulumi stack export: %v\n%s", err, stderr)
	}
	var u apitype.UntypedDeployment
	if err := json.Unmarshal([]byte(stdout), &u); err != nil {
		s.t.Fatalf("decoding pulumi stack export: %v", err)
	}
	var d deployment
	if err := json.Unmarshal(u.Deployment, &d); err != nil {
		s.t.Fatalf("decoding the exported deployment: %v", err)
	}
	d.raw = append([]byte(nil), u.Deployment...)
	return d
}

// stateFiles returns every file the backend holds (the stack's checkpoint, its backups
// and history), for the plaintext search.
func (s *e2eStack) stateFiles() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := filepath.WalkDir(s.stateDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.stateDir, path)
		out[rel] = data
		return nil
	})
	return out, err
}

func (d deployment) pending() []string {
	var out []string
	for _, op := range d.PendingOperations {
		out = append(out, op.Type+" "+shortURN(op.Resource.URN))
	}
	return out
}
