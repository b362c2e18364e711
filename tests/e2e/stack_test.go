package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
	"github.com/railgrid/railgrid-kcp/naming"
	"github.com/railgrid/railgrid-kcp/tests/internal/testenv"
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

// newStack creates the workspace in base: a copy of the program (main.go, its packages,
// go.mod, go.sum and the repository's Pulumi.yaml), and Pulumi.e2e.yaml made from the
// shipped Pulumi.kind.yaml with only the keys of the run's overlay changed.
func newStack(t *testing.T, ctx context.Context, root, base string, c *cluster, bins binaries, o stackOverlay) *e2eStack {
	t.Helper()
	s := &e2eStack{t: t, dir: filepath.Join(base, "workspace"), stateDir: filepath.Join(base, "state")}
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
	testenv.CopyProgram(t, root, s.dir)
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
		"PULUMI_SKIP_CONFIRMATIONS":                   "true",
		// The provider and the program's Helm record hook read the cluster from here, as
		// on a user's machine: the stack file names only the context.
		"KUBECONFIG": c.kubeconfig,
		// The CLI runs the Go language host (built from its upstream source) from PATH.
		"PATH": filepath.Dir(bins.langhost) + string(os.PathListSeparator) + os.Getenv("PATH"),
		// The language host's `go build` of main.go must not change go.mod or go.sum; the
		// test's own flags (hack/goflags.sh) stay, so that build reuses the test's compile.
		"GOFLAGS":          strings.TrimSpace(os.Getenv("GOFLAGS") + " -mod=readonly"),
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

// stackOverlay is what a run changes in the shipped Pulumi.kind.yaml: the chart sources
// (the test's mirrors on loopback, as on an offline machine) and, for killed-up only,
// cert-manager declared present.
type stackOverlay struct {
	mirrors testenv.KindChartMirrors
	// certManagerPresent: the test runs cert-manager's controller itself, without its own
	// approver (killed-up, approver_test.go); the stack then installs no cert-manager.
	certManagerPresent bool
}

// overlayKeys are the config keys, as dotted paths, in which the e2e stack file differs
// from the shipped Pulumi.kind.yaml, each with the reason: what an offline machine must
// change. Everything else is the user's file as shipped (the kubeconfig comes from
// $KUBECONFIG and its context is the one the shipped file names). checkOverlay fails
// when the file changes a key not listed here, or leaves a listed key unchanged.
var overlayKeys = map[string]string{
	"operator.chartRepository":          "the kcp-operator chart from the test's Helm repository on loopback, an offline machine's mirror",
	"operator.chartCAFile":              "that repository serves with a certificate of the test's CA",
	"kind.certManagerChart.repository":  "cert-manager's chart from the same Helm repository",
	"kind.certManagerChart.caFile":      "the same CA",
	"kind.envoyGatewayChart.repository": "Envoy Gateway's chart from the test's OCI registry on loopback (its CA reaches the CLI through SSL_CERT_FILE, as the README says)",
}

// killedUpOverlayKeys are killed-up's: cert-manager is declared present instead of
// installed from its chart, because kill 3 needs cert-manager without its own approver
// and a test approver in its place, which the chart's release, with the values the
// program gives it, cannot run (approver_test.go).
var killedUpOverlayKeys = map[string]string{
	"operator.chartRepository":          overlayKeys["operator.chartRepository"],
	"operator.chartCAFile":              overlayKeys["operator.chartCAFile"],
	"kind.envoyGatewayChart.repository": overlayKeys["kind.envoyGatewayChart.repository"],
	"kind.certManagerPresent":           "the test runs cert-manager's controller without its own approver, so it can hold the hub credential's request until kill 3 has landed",
}

// keys are the overlay's keys with their reasons.
func (o stackOverlay) keys() map[string]string {
	if o.certManagerPresent {
		return killedUpOverlayKeys
	}
	return overlayKeys
}

// writeStackConfig writes the e2e stack file: the shipped kind stack file with the
// overlay's keys set.
func writeStackConfig(kindFile, out string, o stackOverlay) error {
	data, err := os.ReadFile(kindFile)
	if err != nil {
		return err
	}
	var file map[string]any
	if err := yaml.Unmarshal(data, &file); err != nil {
		return fmt.Errorf("%s: %w", kindFile, err)
	}
	cfg, _ := file["config"].(map[string]any)
	if cfg == nil {
		return fmt.Errorf("%s has no config", kindFile)
	}
	key := func(k string) string { return config.Project + ":" + k }
	kind, _ := cfg[key("kind")].(map[string]any)
	if kind == nil {
		kind = map[string]any{}
	}
	repo, registry := o.mirrors.Repository, o.mirrors.Registry
	if o.certManagerPresent {
		kind["certManagerPresent"] = true
	} else {
		kind["certManagerChart"] = map[string]any{"repository": repo.URL, "caFile": repo.CAFile}
	}
	kind["envoyGatewayChart"] = map[string]any{"repository": registry.Source().Repository}
	cfg[key("kind")] = kind
	operator, _ := cfg[key("operator")].(map[string]any)
	if operator == nil {
		operator = map[string]any{}
	}
	operator["chartRepository"], operator["chartCAFile"] = repo.URL, repo.CAFile
	cfg[key("operator")] = operator
	encoded, err := yaml.Marshal(map[string]any{"config": cfg})
	if err != nil {
		return err
	}
	header := "# Written by tests/e2e from Pulumi.kind.yaml: the charts from the test's mirrors on loopback"
	if o.certManagerPresent {
		header += ",\n# cert-manager present (the test runs its controller)"
	}
	return os.WriteFile(out, append([]byte(header+".\n"), encoded...), 0o600)
}

// checkOverlay fails the test when the stack file differs from the shipped one in a key
// that the overlay does not list, or leaves a listed key as shipped: the e2e runs what a
// user runs, and the list says exactly what it changes.
func checkOverlay(t *testing.T, shippedFile, stackFile string, listed map[string]string) {
	t.Helper()
	changed, err := overlayDiff(shippedFile, stackFile, listed)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the e2e stack file is the shipped Pulumi.kind.yaml with %v set", changed)
}

// overlayDiff returns the keys in which stackFile differs from shippedFile, or an error
// naming the keys that listed does not hold and those it holds that are unchanged.
func overlayDiff(shippedFile, stackFile string, listed map[string]string) ([]string, error) {
	read := func(path string) (map[string]any, error) {
		var f struct {
			Config map[string]any `yaml:"config"`
		}
		data, err := os.ReadFile(path)
		if err == nil {
			err = yaml.Unmarshal(data, &f)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return f.Config, nil
	}
	shipped, err := read(shippedFile)
	if err != nil {
		return nil, err
	}
	stack, err := read(stackFile)
	if err != nil {
		return nil, err
	}
	var changed []string
	diffPaths("", shipped, stack, &changed)
	sort.Strings(changed)
	var unlisted, unchanged []string
	for _, k := range changed {
		if _, ok := listed[k]; !ok {
			unlisted = append(unlisted, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(listed)) {
		if !slices.Contains(changed, k) {
			unchanged = append(unchanged, k)
		}
	}
	if len(unlisted) > 0 || len(unchanged) > 0 {
		return changed, fmt.Errorf("the e2e stack file changes %v of the shipped Pulumi.kind.yaml, which the overlay does not list, and leaves %v it lists as shipped (overlay: %v)",
			unlisted, unchanged, slices.Sorted(maps.Keys(listed)))
	}
	return changed, nil
}

// diffPaths appends the dotted paths (without the project's prefix) at which a and b
// differ; mappings are compared key by key, anything else as a whole.
func diffPaths(prefix string, a, b map[string]any, out *[]string) {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		path := strings.TrimPrefix(k, config.Project+":")
		if prefix != "" {
			path = prefix + "." + k
		}
		am, aIsMap := a[k].(map[string]any)
		bm, bIsMap := b[k].(map[string]any)
		switch {
		case aIsMap && bIsMap:
			diffPaths(path, am, bm, out)
		case aIsMap && b[k] == nil:
			diffPaths(path, am, map[string]any{}, out)
		case bIsMap && a[k] == nil:
			diffPaths(path, map[string]any{}, bm, out)
		case !reflect.DeepEqual(a[k], b[k]):
			*out = append(*out, path)
		}
	}
}

// missingProjectConfig returns the config keys that Pulumi.yaml declares without a
// default or value and that the stack file does not set: the CLI refuses to run such a
// stack ("Stack '<name>' is missing configuration value '<key>'").
func missingProjectConfig(projectFile, stackFile string) ([]string, error) {
	var project struct {
		Config map[string]map[string]any `yaml:"config"`
	}
	data, err := os.ReadFile(projectFile)
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &project); err != nil {
		return nil, err
	}
	var stack struct {
		Config map[string]any `yaml:"config"`
	}
	if data, err = os.ReadFile(stackFile); err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &stack); err != nil {
		return nil, err
	}
	var missing []string
	for key, decl := range project.Config {
		_, hasDefault := decl["default"]
		_, hasValue := decl["value"]
		full := key
		if !strings.Contains(key, ":") {
			full = config.Project + ":" + key
		}
		if _, set := stack.Config[full]; !set && !hasDefault && !hasValue {
			missing = append(missing, key)
		}
	}
	sort.Strings(missing)
	return missing, nil
}

// dropProjectConfig removes config declarations from the workspace's Pulumi.yaml: the
// workaround for a project file the CLI refuses with the stack's config.
func (s *e2eStack) dropProjectConfig(keys []string) error {
	path := filepath.Join(s.dir, "Pulumi.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var project map[string]any
	if err := yaml.Unmarshal(data, &project); err != nil {
		return err
	}
	cfg, _ := project["config"].(map[string]any)
	for _, k := range keys {
		delete(cfg, k)
	}
	out, err := yaml.Marshal(project)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// setConfigPath sets one nested config value the way an operator would:
// pulumi config set --path railgrid-kcp:<path> <value>.
func (s *e2eStack) setConfigPath(ctx context.Context, path, value string) {
	s.t.Helper()
	if err := s.stack.SetConfigWithOptions(ctx, config.Project+":"+path, auto.ConfigValue{Value: value}, &auto.ConfigOptions{Path: true}); err != nil {
		s.t.Fatalf("pulumi config set --path %s:%s %s: %v", config.Project, path, value, err)
	}
}

// rendered is the offline plan of the stack's current config.
type rendered struct {
	cfg     *config.Config
	values  map[string]string
	rec     *mockstack.Recording
	objects []plan.Object
}

// render runs the composition under mocks for the stack's current config file, as
// cmd/plan does.
func (s *e2eStack) render() rendered {
	s.t.Helper()
	values, err := config.ReadStackFile(s.cfgFile)
	if err != nil {
		s.t.Fatalf("reading %s: %v", s.cfgFile, err)
	}
	cfg, err := config.ParseStackFile(s.cfgFile)
	if err != nil {
		s.t.Fatalf("the e2e stack config is invalid: %v", err)
	}
	rec, err := mockstack.RunConfig(stackName, values, mockstack.Options{})
	if err != nil {
		s.t.Fatalf("rendering the offline plan: %v", err)
	}
	return rendered{cfg: cfg, values: values, rec: rec, objects: plan.KubernetesObjects(rec)}
}

// urnOf returns the URN of the declared Kubernetes object of a kind and metadata name.
func (r rendered) urnOf(kind, name string) string {
	for _, o := range r.objects {
		if o.Manifest["kind"] == kind && !o.Patch && mockstack.MetadataName(o.Resource) == name {
			return o.Resource.URN
		}
	}
	return ""
}

// releaseURN is the URN of the kcp-operator Helm release.
func (r rendered) releaseURN() string { return r.releaseURNOf(naming.OperatorReleaseName) }

// releaseURNOf is the URN of the Helm release of that name, or "" if the plan has none.
func (r rendered) releaseURNOf(name string) string {
	for _, res := range r.rec.ByType("kubernetes:helm.sh/v3:Release") {
		if v, ok := res.Inputs["name"]; ok && v.IsString() && v.StringValue() == name {
			return res.URN
		}
	}
	return ""
}

// eventLog is the engine events of one operation, in order.
type eventLog struct {
	mu     sync.Mutex
	events []apitype.EngineEvent
}

func (l *eventLog) all() []apitype.EngineEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]apitype.EngineEvent(nil), l.events...)
}

// collect starts reading an event channel into the log, calling onEvent for each
// event; the returned wait blocks until the stream closes (or 15 s).
func (l *eventLog) collect(onEvent func(apitype.EngineEvent)) (chan events.EngineEvent, func()) {
	ch := make(chan events.EngineEvent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range ch {
			if e.Error != nil {
				continue
			}
			l.mu.Lock()
			l.events = append(l.events, e.EngineEvent)
			l.mu.Unlock()
			if onEvent != nil {
				onEvent(e.EngineEvent)
			}
		}
	}()
	return ch, func() {
		select {
		case <-done:
		case <-time.After(15 * time.Second):
		}
	}
}

// step is one resource step seen in the events.
type step struct {
	urn, op  string
	pre, out int // sequence numbers of the ResourcePreEvent and ResOutputsEvent (0: none)
	outputs  map[string]any
}

// steps indexes the resource steps of an event log by URN (the first step per URN).
func (l *eventLog) steps() map[string]*step {
	out := map[string]*step{}
	for _, e := range l.all() {
		switch {
		case e.ResourcePreEvent != nil:
			m := e.ResourcePreEvent.Metadata
			if _, ok := out[m.URN]; !ok {
				out[m.URN] = &step{urn: m.URN, op: string(m.Op), pre: e.Sequence}
			}
		case e.ResOutputsEvent != nil:
			m := e.ResOutputsEvent.Metadata
			st, ok := out[m.URN]
			if !ok {
				st = &step{urn: m.URN, op: string(m.Op)}
				out[m.URN] = st
			}
			if st.out == 0 {
				st.out = e.Sequence
				if m.New != nil {
					st.outputs = m.New.Outputs
				}
			}
		}
	}
	return out
}

// opsByURN lists every operation of every resource in the log ("create", "update",
// "replace", "delete-replaced", ...).
func (l *eventLog) opsByURN() map[string][]string {
	out := map[string][]string{}
	for _, e := range l.all() {
		if e.ResourcePreEvent != nil {
			m := e.ResourcePreEvent.Metadata
			out[m.URN] = append(out[m.URN], string(m.Op))
		}
	}
	return out
}

// diagnostics returns the error and warning messages of the log.
func (l *eventLog) diagnostics() []string {
	var out []string
	for _, e := range l.all() {
		if d := e.DiagnosticEvent; d != nil && (d.Severity == "error" || d.Severity == "warning") {
			out = append(out, fmt.Sprintf("%s %s: %s", d.Severity, shortURN(d.URN), strings.TrimSpace(d.Message)))
		}
	}
	return out
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
	res, err := s.stack.Up(ctx, append(opts, optup.EventStreams(ch))...)
	wait()
	return res, log, err
}

func (s *e2eStack) refresh(ctx context.Context, opts ...optrefresh.Option) (auto.RefreshResult, *eventLog, error) {
	log := &eventLog{}
	ch, wait := log.collect(nil)
	res, err := s.stack.Refresh(ctx, append(opts, optrefresh.EventStreams(ch))...)
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

// changeCounts renders an operation summary deterministically.
func changeCounts[K ~string](m map[K]int) string {
	var keys []string
	for k, n := range m {
		keys = append(keys, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(keys)
	return strings.Join(keys, " ")
}

// shortURN drops the stack and project from a URN for messages.
func shortURN(urn string) string {
	if i := strings.LastIndex(urn, "::"); i >= 0 {
		typ := urn[:i]
		if j := strings.LastIndex(typ, "$"); j >= 0 {
			typ = typ[j+1:]
		} else if j := strings.LastIndex(typ, "::"); j >= 0 {
			typ = typ[j+2:]
		}
		return typ + "::" + urn[i+2:]
	}
	return urn
}

// outputsLine is a one-line description of an UpResult summary.
func summaryOf(s auto.UpdateSummary) map[string]int {
	if s.ResourceChanges == nil {
		return map[string]int{}
	}
	return *s.ResourceChanges
}

func indent(lines []string) string {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString("\n    ")
		b.WriteString(l)
	}
	return b.String()
}

// checkUpRefusesMisspelledKey runs up with railgrid-kcp:etdc (for etcd) added to the stack
// file and checks that main.go refused it before declaring anything: the error names the
// key, its value and the rule, the engine saw no resource but the root Stack, and the
// state holds none. The stack file is restored afterwards.
func checkUpRefusesMisspelledKey(t *testing.T, ctx context.Context, e *env) {
	s := e.stack
	saved, err := os.ReadFile(s.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.WriteFile(s.cfgFile, saved, 0o600); err != nil {
			t.Fatal(err)
		}
	}()
	var file map[string]any
	if err := yaml.Unmarshal(saved, &file); err != nil {
		t.Fatal(err)
	}
	cfg, _ := file["config"].(map[string]any)
	cfg[config.Project+":etdc"] = map[string]any{"members": 3}
	out, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.cfgFile, out, 0o600); err != nil {
		t.Fatal(err)
	}

	uctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	start := time.Now()
	_, log, err := s.up(uctx, nil)
	if err == nil {
		t.Fatalf("up with %s:etdc succeeded", config.Project)
	}
	want := config.Project + `:etdc = "{\"members\":3}": is not a railgrid-kcp config key`
	diags := strings.Join(log.diagnostics(), "\n")
	if !strings.Contains(diags, want) {
		t.Errorf("up's error diagnostics do not name the key, the value and the rule (%s):\n%s", want, diags)
	}
	var declared []string
	for urn := range log.opsByURN() {
		if !strings.Contains(urn, "::pulumi:pulumi:Stack::") {
			declared = append(declared, shortURN(urn))
		}
	}
	if len(declared) > 0 {
		t.Errorf("a refused config declared:%s", indent(declared))
	}
	d := s.export(ctx)
	for _, r := range d.Resources {
		if r.Type != "pulumi:pulumi:Stack" {
			t.Errorf("the state holds %s %s after the refused up", r.Type, r.URN)
		}
	}
	t.Logf("up refused %s:etdc in %s: %s", config.Project, time.Since(start).Round(time.Second), firstLine(want))
}
