//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Stage 2, the first up: the CLI takes the shipped config, a preview of the fresh stack
// creates everything the offline plan declares, a misspelled key is refused with nothing
// declared, and up converges in the design's order; then what it made: the add-ons
// installed by their charts and every pod Ready on the real node, the edge programmed,
// the cluster as the offline plan shows it, the hub Secret and no plaintext of it in the
// state.
var firstUpSteps = []step{
	{"cli-accepts-the-project-config", cliAcceptsTheProjectConfig, false},
	{"preview-of-the-fresh-stack", previewOfTheFreshStack, false},
	{"up-refuses-a-misspelled-key", upRefusesAMisspelledKey, false},
	{"up-converges-in-order", upConvergesInOrder, true},
	{"pods-run-on-the-real-node", podsRunOnTheRealNode, false},
	{"envoy-gateway-programs-the-edge", envoyGatewayProgramsTheEdge, false},
	{"cluster-matches-the-offline-plan", clusterMatchesTheOfflinePlan, false},
	{"hub-secret-and-no-plaintext-in-the-state", hubSecretAndNoPlaintextInTheState, true},
}

// cliAcceptsTheProjectConfig: the CLI accepts the repository's Pulumi.yaml with the kind
// stack's config. Pulumi.yaml declaring a key without a default that the kind stack must
// not set would make the CLI refuse every kind stack.
func cliAcceptsTheProjectConfig(t *testing.T, l *lifecycle) {
	s := l.stack
	pctx, cancel := context.WithTimeout(l.ctx, previewTimeout)
	defer cancel()
	res, log, err := s.preview(pctx)
	if err == nil || !strings.Contains(err.Error(), "validating stack config") {
		// The CLI accepted the config; whether the preview itself succeeded is the next step's.
		l.first = &previewRun{res: res, log: log, err: err}
		return
	}
	if !strings.Contains(err.Error(), "is missing configuration value") {
		t.Fatalf("the Pulumi CLI refuses the stack's config: %v", firstLine(stderrOf(err)))
	}
	missing, merr := missingProjectConfig(filepath.Join(l.src.root, "Pulumi.yaml"), s.cfgFile)
	if merr != nil {
		t.Fatalf("preview failed: %v; reading the config declarations: %v", err, merr)
	}
	t.Errorf("PROGRAM BUG: the Pulumi CLI refuses the kind stack: %s.\n"+
		"Pulumi.yaml declares %v without a default, so every stack must set them, but config.Validate refuses "+
		"the other platform's key on a stack. The rest of this test runs with those declarations removed "+
		"from the workspace's copy of Pulumi.yaml.", firstLine(stderrOf(err)), missing)
	if err := s.dropProjectConfig(missing); err != nil {
		t.Fatal(err)
	}
}

// previewOfTheFreshStack: a preview of the fresh stack succeeds and creates everything
// the offline plan declares, and nothing else.
func previewOfTheFreshStack(t *testing.T, l *lifecycle) {
	run := l.first
	if run == nil {
		pctx, cancel := context.WithTimeout(l.ctx, previewTimeout)
		defer cancel()
		res, log, err := l.stack.preview(pctx)
		run = &previewRun{res: res, log: log, err: err}
	}
	if run.err != nil {
		hint := ""
		if strings.Contains(run.err.Error(), "invalid dependency URN") {
			hint = "\n(a resource depends on a read whose ID is unknown in this preview: the Go SDK resolves a skipped read " +
				"with an empty URN, which the engine refuses as a dependency; here the hub Secret depends on the read of " +
				"the operator's Kubeconfig Secret)"
		}
		t.Fatalf("preview of the fresh stack failed: %v%s\n%s", run.err, hint, indent(run.log.diagnostics()))
	}
	res, log := run.res, run.log
	creates := map[string]bool{}
	var others []string
	for urn, ops := range log.opsByURN() {
		for _, op := range ops {
			switch op {
			case "create":
				creates[urn] = true
			case "same", "read":
			default:
				others = append(others, op+" "+shortURN(urn))
			}
		}
	}
	var missing []string
	declared := 0
	for _, r := range l.plan.rec.Resources {
		if r.Read {
			continue
		}
		declared++
		if !creates[r.URN] {
			missing = append(missing, shortURN(r.URN))
		}
	}
	if len(missing) > 0 {
		t.Errorf("the preview does not create %d of the %d resources the offline plan declares:%s", len(missing), declared, indent(missing))
	}
	if len(others) > 0 {
		t.Errorf("a fresh stack's preview should only create, but it also plans:%s", indent(others))
	}
	t.Logf("preview: %s; %d creates cover the %d declared resources", changeCounts(res.ChangeSummary), len(creates), declared)
}

// upRefusesAMisspelledKey: up itself refuses a misspelled key, naming the key, the value
// and the rule, with nothing declared: main.go gets the whole stack config from the
// language host.
func upRefusesAMisspelledKey(t *testing.T, l *lifecycle) {
	checkUpRefusesMisspelledKey(t, l.ctx, l.env)
}

// upConvergesInOrder: up converges, and nothing kcp is created before what it needs is
// ready. The gke plan's kcp objects then go beside the kind stack's, so that the operator
// writes their Deployments while the next steps run (verify checks their command lines).
func upConvergesInOrder(t *testing.T, l *lifecycle) {
	s := l.stack
	uctx, cancel := context.WithTimeout(l.ctx, upTimeout)
	defer cancel()
	start := time.Now()
	res, log, err := s.up(uctx, nil)
	if err != nil {
		t.Fatalf("up failed after %s: %v\n%s", time.Since(start).Round(time.Second), err, indent(log.diagnostics()))
	}
	// The up ends with the hub Secret: this is the wall time from an empty stack to the
	// hub's credential.
	t.Logf("first up (empty stack to hub Secret): %s in %s", changeCounts(summaryOf(res.Summary)), time.Since(start).Round(time.Second))
	checkOrder(t, l.plan, log)
	// docs/gke.md, "State backend and secrets provider": the provider leaves copies of its
	// kubeconfig in $TMPDIR. This finds them in the TMPDIR the test gave the CLI (so they
	// go with the test's cleanup), and fails if the provider stops writing them.
	copies, _ := filepath.Glob(filepath.Join(s.tmpDir, "kubeconfig*"))
	if len(copies) == 0 {
		t.Errorf("no kubeconfig copy of the provider in the CLI's TMPDIR %s: the note on them in docs/gke.md is out of date", s.tmpDir)
	}
}

// podsRunOnTheRealNode: the stack's releases installed cert-manager, Envoy Gateway and
// the kcp-operator (addons_test.go). Every pod of etcd, kcp-system, the operator,
// cert-manager and Envoy Gateway, and CoreDNS, runs on the real node, Ready through its
// real probe (a Job's pod: succeeded), with no flag error in kcp's logs and no restart
// but the one the operator's probes can cause a front proxy; only Envoy's proxy pods run
// on the kwok nodes (node_test.go). The API server calls cert-manager's webhook through
// its Service, and the node's network rules still hold afterwards.
func podsRunOnTheRealNode(t *testing.T, l *lifecycle) {
	checkAddOnsInstalled(t, l.ctx, l.c, "the first up")
	checkWebhookCalledThroughItsService(t, l.ctx, l.c)
	checkPodsRanForReal(t, l.ctx, l.c)
}

// envoyGatewayProgramsTheEdge: Envoy Gateway accepted and programmed the kind edge.
func envoyGatewayProgramsTheEdge(t *testing.T, l *lifecycle) { checkEdgeProgrammed(t, l.ctx, l.env) }

// clusterMatchesTheOfflinePlan: the cluster holds what the offline plan shows, and no
// object written by the Kubernetes provider that the plan lacks.
func clusterMatchesTheOfflinePlan(t *testing.T, l *lifecycle) {
	ctx, c := l.ctx, l.c
	problems, checked, err := comparePlan(ctx, c, l.plan.objects)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("%d differences between the cluster and the offline plan:%s", len(problems), indent(problems))
	}
	t.Logf("%d objects of the offline plan checked against the cluster", checked)
	extra, seen, err := unplannedObjects(ctx, c, l.plan.objects)
	if err != nil {
		t.Fatal(err)
	}
	if len(extra) > 0 {
		t.Errorf("%d objects in the cluster that the offline plan does not have:%s", len(extra), indent(extra))
	}
	if seen < checked/2 {
		t.Errorf("only %d objects in the cluster were written by %s*: the search for unplanned objects proves little", seen, pulumiManager)
	}
	t.Logf("%d objects written by the Kubernetes provider in the cluster, all in the offline plan", seen)
	// The search can fail: a stray object of a planned kind, written by a
	// pulumi-kubernetes field manager, shows up. (With data: the API server keeps no
	// managedFields entry for an empty field set.)
	stray := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "railgrid-e2e-stray", Namespace: naming.NamespaceKcp},
		Data: map[string]string{"stray": "true"}}
	if _, err := c.kube.CoreV1().ConfigMaps(naming.NamespaceKcp).Create(ctx, stray, metav1.CreateOptions{FieldManager: pulumiManager + "-e2e-stray"}); err != nil {
		t.Fatal(err)
	}
	extra, _, err = unplannedObjects(ctx, c, l.plan.objects)
	if err != nil || len(extra) != 1 || !strings.Contains(extra[0], "railgrid-e2e-stray") {
		t.Errorf("a stray ConfigMap written by %s* was not reported as unplanned: %v %v", pulumiManager, extra, err)
	}
	if err := c.kube.CoreV1().ConfigMaps(naming.NamespaceKcp).Delete(ctx, stray.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// hubSecretAndNoPlaintextInTheState: the hub Secret holds the kubeconfig the operator
// wrote from cert-manager's certificate; the state holds no plaintext of it.
func hubSecretAndNoPlaintextInTheState(t *testing.T, l *lifecycle) {
	cred, err := readCredential(l.ctx, l.c, naming.KubeconfigName)
	if err != nil {
		t.Fatalf("the operator's kubeconfig Secret: %v", err)
	}
	l.creds = append(l.creds, cred)
	checkHubSecret(t, l.ctx, l.env, l.plan, cred)
	checkNoPlaintext(t, l.ctx, l.env, l.creds)
}

type previewRun struct {
	res auto.PreviewResult
	log *eventLog
	err error
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
