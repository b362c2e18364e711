// Package langhost runs this project's main.go the way a user's `pulumi preview` does:
// the Pulumi CLI starts the Go language host (pulumi-language-go), which compiles
// main.go with `go build` and runs it as a local program that receives the whole stack
// config in PULUMI_CONFIG. It needs no cluster: a config the program refuses is refused
// before any resource is declared.
//
// The binaries are looked up on PATH: pulumi (hack/build-tools.sh pulumi) and
// pulumi-language-go (hack/build-tools.sh langhost, built from
// ../shared/thirdparty/pulumi-language-go). Without them the test fails, unless
// RAILGRID_SKIP_LANGHOST=1; `go test -short` skips it. The state lives in a file://
// backend with a passphrase, in a temporary directory, as does a copy of the program's
// source (the CLI and the language host write beside Pulumi.yaml; the repository is not
// written to).
package langhost

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

const envSkip = "RAILGRID_SKIP_LANGHOST"

// stackName is the stack the test creates in its own backend.
const stackName = "langhost"

// A misspelled top-level key is refused by `pulumi preview` of main.go under the real
// engine and the real Go language host, with the error naming the key and the rule, and
// nothing is declared (the engine sees no resource but the root Stack).
func TestPreviewRefusesAMisspelledKey(t *testing.T) {
	ws := newWorkspace(t)
	ws.writeStackConfig(t, map[string]any{config.Project + ":etdc": map[string]any{"members": 3}})

	run := ws.preview(t)
	if run.err == nil {
		t.Fatalf("preview with railgrid-kcp:etdc succeeded:\n%s", run.output)
	}
	want := config.Project + `:etdc = "{\"members\":3}": is not a railgrid-kcp config key`
	if !strings.Contains(run.output, want) {
		t.Fatalf("the preview's output does not name the key and the rule (%s):\n%s", want, run.output)
	}
	if !run.ranProgram() {
		t.Fatalf("the engine never saw the program's root Stack, so main.go did not run:\n%s", run.output)
	}
	// The CLI says which language host it ran: the one built from the upstream source.
	if !strings.Contains(run.output, "using pulumi-language-go from $PATH at "+ws.langhost) {
		t.Fatalf("the preview did not run %s:\n%s", ws.langhost, run.output)
	}
	if declared := run.declared(); len(declared) > 0 {
		t.Fatalf("a refused config declared %v", declared)
	}
	if !strings.Contains(run.diagnostics(), "etdc") {
		t.Fatalf("no error diagnostic names etdc; diagnostics:\n%s", run.diagnostics())
	}
}

// The same workspace with the shipped kind config gets past config loading: the program
// goes on to declare the stack's resources (the preview then stops where the Kubernetes
// provider plugin is needed, which this test does not install).
func TestPreviewOfTheShippedKindConfigGetsPastConfigLoading(t *testing.T) {
	ws := newWorkspace(t)
	ws.writeStackConfig(t, nil)

	run := ws.preview(t)
	if strings.Contains(run.output, "invalid stack configuration") {
		t.Fatalf("the shipped kind config was refused:\n%s", run.output)
	}
	declared := run.declared()
	if len(declared) == 0 {
		t.Fatalf("nothing was declared after config loading (err %v):\n%s", run.err, run.output)
	}
	var stack bool
	for _, urn := range declared {
		// The KcpPlatform component's type token (components/kcpplatform.go), unchanged.
		stack = stack || strings.Contains(urn, "::railgrid:kcp:KcpPlatform::")
	}
	if !stack {
		t.Fatalf("the KcpPlatform component was not declared; declared %v", declared)
	}
}

// workspace is a copy of the program's source with a stack in a file:// backend.
type workspace struct {
	dir      string
	env      []string
	cli      string
	langhost string
}

func newWorkspace(t *testing.T) *workspace {
	t.Helper()
	testenv.SkipIfShortOrDisabled(t, envSkip, "runs the Pulumi CLI and compiles main.go")
	var exe testenv.Executables
	cli := exe.Find("pulumi", "")
	langhost := exe.Find("pulumi-language-go", "")
	exe.Require(t, "the langhost test", `eval "$(hack/build-tools.sh env pulumi langhost)"`, envSkip)

	base := t.TempDir()
	ws := &workspace{dir: filepath.Join(base, "program"), cli: cli, langhost: langhost}
	testenv.CopyProgram(t, testenv.RepoRoot(t), ws.dir)
	passphrase := make([]byte, 16)
	if _, err := rand.Read(passphrase); err != nil {
		t.Fatal(err)
	}
	ws.env = append(os.Environ(),
		"PATH="+filepath.Dir(cli)+string(os.PathListSeparator)+filepath.Dir(langhost)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PULUMI_BACKEND_URL=file://"+filepath.ToSlash(filepath.Join(base, "state")),
		"PULUMI_CONFIG_PASSPHRASE="+hex.EncodeToString(passphrase),
		"PULUMI_HOME="+filepath.Join(base, "pulumi-home"),
		"PULUMI_SKIP_UPDATE_CHECK=true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
		"PULUMI_SKIP_CONFIRMATIONS=true",
		// Enables --event-log, as the Automation API does.
		"PULUMI_DEBUG_COMMANDS=true",
		// The language host's `go build` of main.go must not change go.mod or go.sum; the
		// test's own flags (hack/goflags.sh) stay, so that build reuses the test's compile.
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=readonly"),
	)
	for _, d := range []string{filepath.Join(base, "state"), filepath.Join(base, "pulumi-home")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := ws.pulumi(t, context.Background(), "stack", "init", stackName, "--secrets-provider", "passphrase"); err != nil {
		t.Fatalf("pulumi stack init: %v\n%s", err, out)
	}
	return ws
}

// writeStackConfig writes the stack's config: the shipped kind stack's, plus extra keys,
// keeping what `pulumi stack init` wrote (the passphrase's salt).
func (ws *workspace) writeStackConfig(t *testing.T, extra map[string]any) {
	t.Helper()
	path := filepath.Join(ws.dir, "Pulumi."+stackName+".yaml")
	var stack map[string]any
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &stack); err != nil {
		t.Fatal(err)
	}
	if _, ok := stack["encryptionsalt"]; !ok {
		t.Fatalf("pulumi stack init wrote no passphrase salt into %s:\n%s", path, data)
	}
	var kind struct {
		Config map[string]any `yaml:"config"`
	}
	data, err = os.ReadFile(filepath.Join(testenv.RepoRoot(t), "Pulumi.kind.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &kind); err != nil {
		t.Fatal(err)
	}
	for k, v := range extra {
		kind.Config[k] = v
	}
	stack["config"] = kind.Config
	out, err := yaml.Marshal(stack)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// previewRun is one `pulumi preview` with its engine events.
type previewRun struct {
	output string
	err    error
	events []engineEvent
}

// engineEvent holds the parts of an engine event (pulumi sdk go/common/apitype
// EngineEvent) the test reads.
type engineEvent struct {
	ResourcePreEvent *struct {
		Metadata struct {
			URN  string `json:"urn"`
			Type string `json:"type"`
		} `json:"metadata"`
	} `json:"resourcePreEvent"`
	DiagnosticEvent *struct {
		Severity string `json:"severity"`
		Message  string `json:"message"`
	} `json:"diagnosticEvent"`
}

func (ws *workspace) preview(t *testing.T) previewRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	eventLog := filepath.Join(t.TempDir(), "events.json")
	start := time.Now()
	out, err := ws.pulumi(t, ctx, "preview", "--stack", stackName, "--non-interactive", "--color", "never", "--event-log", eventLog)
	t.Logf("pulumi preview took %s (exit: %v); its output ends:\n%s", time.Since(start).Round(time.Second), err, lastLines(out, 12))
	run := previewRun{output: out, err: err}
	data, readErr := os.ReadFile(eventLog)
	if readErr != nil {
		t.Fatalf("no event log: %v\n%s", readErr, out)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e engineEvent
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("event log line %q: %v", line, err)
		}
		run.events = append(run.events, e)
	}
	return run
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ranProgram reports whether the program registered its root Stack resource.
func (r previewRun) ranProgram() bool {
	for _, e := range r.events {
		if e.ResourcePreEvent != nil && e.ResourcePreEvent.Metadata.Type == "pulumi:pulumi:Stack" {
			return true
		}
	}
	return false
}

// declared lists the URNs of every resource the program declared besides its root Stack.
func (r previewRun) declared() []string {
	var urns []string
	for _, e := range r.events {
		if e.ResourcePreEvent != nil && e.ResourcePreEvent.Metadata.Type != "pulumi:pulumi:Stack" {
			urns = append(urns, e.ResourcePreEvent.Metadata.URN)
		}
	}
	return urns
}

// diagnostics are the error diagnostics of the run.
func (r previewRun) diagnostics() string {
	var b strings.Builder
	for _, e := range r.events {
		if d := e.DiagnosticEvent; d != nil && d.Severity == "error" {
			b.WriteString(d.Message)
		}
	}
	return b.String()
}

func (ws *workspace) pulumi(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, ws.cli, args...)
	cmd.Dir = ws.dir
	cmd.Env = ws.env
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
