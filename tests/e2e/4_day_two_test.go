//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Stage 4, day two: what an operator does to a running stack. A second run changes
// nothing and a refresh finds nothing (again at the end); hand edits are found and put
// back, after the re-mints, so that verify's provider path then runs with the re-minted
// credential; a kcp version bump rolls the root shard out before the rest; two re-mints
// hand the hub fresh credentials; a shard is added, retired, brought back on its kept
// volumes and retired again.
var dayTwoSteps = []step{
	{"second-run-changes-nothing", secondRunChangesNothing, false},
	{"refresh-finds-nothing", func(t *testing.T, l *lifecycle) { checkRefreshFindsNothing(t, l.ctx, l.stack, "after the first up") }, false},
	{"kcp-version-bump", kcpVersionBump, false},
	{"hub-secret-as-an-earlier-version-left-it", hubSecretAsAnEarlierVersionLeftIt, false},
	{"remint-1", func(t *testing.T, l *lifecycle) { remint(t, l.ctx, l.env, l.remintGeneration(t)+1, &l.creds) }, false},
	{"hub-secret-kept-its-data-through-the-up", hubSecretKeptItsDataThroughTheUp, false},
	{"remint-2", func(t *testing.T, l *lifecycle) { remint(t, l.ctx, l.env, l.remintGeneration(t)+1, &l.creds) }, false},
	{"hand-edits-are-detected-and-undone", handEditsAreDetectedAndUndone, false},
	{"shards", func(t *testing.T, l *lifecycle) { dayTwo(t, l.ctx, l.env) }, false},
	{"refresh-finds-nothing-after-day-two", func(t *testing.T, l *lifecycle) { checkRefreshFindsNothing(t, l.ctx, l.stack, "after day two") }, false},
}

// beginDayTwo reads the credential the hub holds now, the one a routine up must not
// re-issue and the re-mints must replace.
func beginDayTwo(t *testing.T, l *lifecycle) {
	gen := l.remintGeneration(t)
	cred, err := readCredential(l.ctx, l.c, naming.KubeconfigObjectName(gen))
	if err != nil {
		t.Fatalf("the operator's kubeconfig Secret of generation %d, which the hub holds: %v", gen, err)
	}
	checkHubSecret(t, l.ctx, l.env, l.stack.render(), cred)
	l.creds = []credential{cred}
}

// remintGeneration is hub.remintGeneration in the stack's config as it is now.
func (l *lifecycle) remintGeneration(t *testing.T) int {
	t.Helper()
	cfg, err := config.ParseStackFile(l.stack.cfgFile)
	if err != nil {
		t.Fatalf("the e2e stack's config: %v", err)
	}
	return cfg.Hub.RemintGeneration
}

// bumpedKcpVersion is what the version-bump step moves versions.kcp to.
const bumpedKcpVersion = "v0.33.1"

// secondRunChangesNothing: a second preview and up change nothing, and do not re-issue
// the hub's credential.
func secondRunChangesNothing(t *testing.T, l *lifecycle) {
	s := l.stack
	pctx, cancel := context.WithTimeout(l.ctx, previewTimeout)
	defer cancel()
	res, log, err := s.preview(pctx, optpreview.ExpectNoChanges(), optpreview.Diff())
	if changed := changedURNs(log); err != nil || len(changed) > 0 {
		drift.add(changed)
		t.Errorf("the second preview, with nothing changed, is not empty (%v):%s%s\n%s", firstLine(fmt.Sprint(err)),
			indent(describe(changed)), indent(log.diagnostics()), changedLines(res.StdOut+stdoutOf(err)))
	} else {
		t.Logf("second preview: %s", changeCounts(res.ChangeSummary))
	}
	uctx, cancel := context.WithTimeout(l.ctx, upTimeout)
	defer cancel()
	start := time.Now()
	ures, ulog, err := s.up(uctx, nil)
	if err != nil {
		t.Fatalf("the second up failed: %v\n%s", err, indent(ulog.diagnostics()))
	}
	if changed := changedURNs(ulog); len(changed) > 0 {
		drift.add(changed)
		t.Errorf("the second up, with nothing changed, changed:%s", indent(describe(changed)))
	}
	l.sameCredential(t, "the second up")
	t.Logf("second (no-op) up: %s in %s", changeCounts(summaryOf(ures.Summary)), time.Since(start).Round(time.Second))
}

// kcpVersionBump: changing only versions.kcp updates every kcp object in one up, the
// root shard rolled out before the shard and the front proxy are updated, every kcp
// Deployment rolled out when the up returns, and nothing that holds data replaced.
func kcpVersionBump(t *testing.T, l *lifecycle) {
	ctx, s, p := l.ctx, l.stack, l.plan
	before := dataHolders(t, ctx, l.c)
	s.setConfigPath(ctx, "versions.kcp", bumpedKcpVersion)
	uctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	order, stopWatch := watchUpgradeOrder(uctx, l.c, bumpedKcpVersion)
	res, log, err := s.up(uctx, order.onEngineEvent(uctx, l.c, p, bumpedKcpVersion))
	stopWatch()
	if err != nil {
		t.Fatalf("up after the version bump failed: %v\n%s", err, indent(log.diagnostics()))
	}
	t.Logf("version bump: %s", changeCounts(summaryOf(res.Summary)))
	wantUpdated := map[string]bool{
		p.urnOf("RootShard", naming.RootShardName):   true,
		p.urnOf("Shard", "alpha"):                    true,
		p.urnOf("FrontProxy", naming.FrontProxyName): true,
	}
	for urn, ops := range log.opsByURN() {
		for _, op := range ops {
			switch {
			case op == "same" || op == "read":
			case op == "update" && wantUpdated[urn]:
				delete(wantUpdated, urn)
			case drift.has(urn):
				t.Logf("%s %s: the perpetual diff reported by second-run-changes-nothing", op, shortURN(urn))
			default:
				t.Errorf("the version bump made %s %s; only the kcp objects may change, by update", op, shortURN(urn))
			}
		}
	}
	for urn := range wantUpdated {
		t.Errorf("the version bump did not update %s", shortURN(urn))
	}
	checkImages(t, ctx, l.c, bumpedKcpVersion)
	order.check(t)
	// The bumped pods run on the real node with no flag error and no restart.
	checkPodsRanForReal(t, ctx, l.c)
	checkSameObjects(t, before, dataHolders(t, ctx, l.c))
	l.sameCredential(t, "the version bump")
	checkNoChanges(t, ctx, s, "post-bump")
}

// handEditsAreDetectedAndUndone: an operator in a hurry changes, with kubectl, an owned
// shard Service's selector, the split-horizon stanza of the Corefile and the front
// proxy's replicas, and deletes the hub Secret. `pulumi refresh --preview-only` reports
// exactly those four resources and writes nothing; `pulumi up --refresh` puts back every
// one; cmd/verify then passes, the provider path included.
func handEditsAreDetectedAndUndone(t *testing.T, l *lifecycle) {
	ctx, s := l.ctx, l.stack
	p := s.render()
	edits, err := handEdits(ctx, l.env, p)
	if err != nil {
		t.Fatal(err)
	}
	// However this step ends, the edits are undone, so that the rest of the lifecycle
	// runs on the stack as the program declares it.
	defer func() {
		if !t.Failed() {
			return
		}
		if _, log, err := s.up(ctx, nil, optup.Refresh()); err != nil {
			t.Logf("repairing after the failed step: up --refresh: %v\n%s", err, indent(log.diagnostics()))
		}
	}()
	want := map[string]string{}
	for _, e := range edits {
		if e.urn == "" {
			t.Fatalf("the plan has no resource for the edit of %s", e.what)
		}
		out, err := kubectl(ctx, l.bins.kubectl, l.c.kubeconfig, e.args...)
		if err != nil {
			t.Fatalf("%s: %v", e.what, err)
		}
		want[e.urn] = e.what
		t.Logf("by hand: %s (kubectl: %s)", e.what, out)
	}

	rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	start := time.Now()
	_, log, err := s.previewRefresh(rctx)
	if err != nil {
		t.Fatalf("pulumi refresh --preview-only: %v\n%s", err, indent(log.diagnostics()))
	}
	found := refreshChanges(log)
	for urn, what := range want {
		if c, ok := found[urn]; ok {
			t.Logf("refresh --preview-only found %s: %s %v", what, c.op, c.diffs)
		} else {
			t.Errorf("refresh --preview-only did not report %s (%s)", what, shortURN(urn))
		}
	}
	for urn, c := range found {
		if _, ok := want[urn]; !ok {
			t.Errorf("refresh --preview-only also reported %s %s %v, which nobody touched", c.op, shortURN(urn), c.diffs)
		}
	}
	t.Logf("refresh --preview-only took %s", time.Since(start).Round(100*time.Millisecond))

	uctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	start = time.Now()
	res, ulog, err := s.up(uctx, nil, optup.Refresh())
	if err != nil {
		t.Fatalf("pulumi up --refresh did not put the hand edits back: %v\n%s", err, indent(ulog.diagnostics()))
	}
	t.Logf("up --refresh: %s in %s", changeCounts(summaryOf(res.Summary)), time.Since(start).Round(time.Second))
	// Three minutes: the Corefile is undone once CoreDNS runs it again, after the
	// kubelet's ConfigMap sync (up to a minute) and CoreDNS's reload check (30s and its
	// jitter).
	for _, e := range edits {
		var last error
		if err := testenv.WaitFor(ctx, 3*time.Minute, nil, func() (bool, error) {
			last = e.undone(ctx)
			return last == nil, nil
		}); err != nil {
			t.Errorf("after up --refresh, %s is not undone: %v", e.what, last)
		}
	}
	checkRefreshFindsNothing(t, ctx, s, "after up --refresh")
	bin, err := l.verifyBin()
	if err != nil {
		t.Fatal(err)
	}
	checkProviderUsedTheNewestCredential(t, l, runVerify(t, ctx, l.env, bin, nil))
}

// checkProviderUsedTheNewestCredential: the provider probe's pod, started after the
// re-mints, mounted the hub Secret they updated, and followed the provider path with the
// newest credential.
func checkProviderUsedTheNewestCredential(t *testing.T, l *lifecycle, report verify.Report) {
	t.Helper()
	gen := l.remintGeneration(t)
	want := fmt.Sprintf("OU=railgrid-kcp-mint-%d", gen)
	seen := false
	for _, r := range report.Results {
		if r.Check == verify.CheckProviderPath && strings.Contains(r.Item, "endpoint-slice") && !strings.Contains(r.Item, "cached") {
			seen = true
			if !strings.Contains(r.Message, want) {
				t.Errorf("the provider's %s did not present the newest credential (%s): %s", r.Item, want, r.Message)
			} else {
				t.Logf("the provider followed the slice URL with the credential of re-mint %d", gen)
			}
		}
	}
	if !seen {
		t.Errorf("cmd/verify's report has no provider-path endpoint-slice result")
	}
}

// sameCredential fails when the operator's Secret no longer holds the credential the
// hub has: a routine up must not re-issue it.
func (l *lifecycle) sameCredential(t *testing.T, label string) {
	t.Helper()
	if len(l.creds) == 0 {
		t.Fatalf("%s: no hub credential was read after the first up", label)
	}
	last := l.creds[len(l.creds)-1]
	cred, err := readCredential(l.ctx, l.c, strings.TrimPrefix(last.Secret, naming.NamespaceKcp+"/"))
	if err != nil {
		t.Errorf("%s: the operator's kubeconfig Secret: %v", label, err)
	} else if cred.Cert.SerialNumber.Cmp(last.Cert.SerialNumber) != 0 {
		t.Errorf("%s re-issued the hub credential (serial %x, was %x)", label, cred.Cert.SerialNumber, last.Cert.SerialNumber)
	}
}

// remint raises hub.remintGeneration to gen and checks, against the real operator and
// cert-manager, that the hub now holds a credential issued by this re-mint: a serial no
// earlier credential had, not valid before the re-mint started (in whole seconds, the
// resolution of a certificate's notBefore), the generation's OU, in the hub Secret,
// which was updated in place and no longer holds any earlier credential; and that the
// engine did it by replacing the Kubeconfig object and updating the hub Secret.
func remint(t *testing.T, ctx context.Context, e *env, gen int, creds *[]credential) {
	s := e.stack
	before := append([]credential(nil), (*creds)...)
	holders := dataHolders(t, ctx, e.c)
	p := s.render()
	hubBefore, err := e.c.kube.CoreV1().Secrets(p.cfg.Hub.Namespace).Get(ctx, p.cfg.Hub.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the hub Secret before the re-mint: %v", err)
	}
	s.setConfigPath(ctx, "hub.remintGeneration", fmt.Sprint(gen))
	uctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	start := time.Now().Truncate(time.Second)
	res, log, err := s.up(uctx, nil)
	if err != nil {
		t.Fatalf("up after raising hub.remintGeneration to %d failed: %v\n%s", gen, err, indent(log.diagnostics()))
	}
	t.Logf("re-mint %d: %s in %s", gen, changeCounts(summaryOf(res.Summary)), time.Since(start).Round(time.Second))

	// What the engine did.
	p2 := s.render()
	kcURN, hubURN := p2.urnOf("Kubeconfig", naming.KubeconfigObjectName(gen)), p2.urnOf("Secret", p2.cfg.Hub.SecretName)
	ops := log.opsByURN()
	if got := ops[kcURN]; !slices.Contains(got, "create-replacement") || !slices.Contains(got, "delete-replaced") {
		t.Errorf("the re-mint did %v on the Kubeconfig, want it replaced (create-replacement, delete-replaced)", got)
	}
	if got := ops[hubURN]; !slices.Equal(got, []string{"update"}) {
		t.Errorf("the re-mint did %v on the hub Secret, want one update in place", got)
	}
	// The copy: its CronJob replaced, deleted first with its runs of the previous
	// credential, and the up's copy Job of the new generation.
	cronURN, jobURN := p2.urnOf("CronJob", naming.HubCopy), p2.urnOf("Job", naming.HubCopyJob(gen))
	for _, urn := range []string{cronURN, jobURN} {
		if got := ops[urn]; !slices.Equal(got, []string{"delete-replaced", "replace", "create-replacement"}) {
			t.Errorf("the re-mint did %v on %s, want it deleted, then made again", got, shortURN(urn))
		}
	}
	for urn, o := range changedURNs(log) {
		if urn != kcURN && urn != hubURN && urn != cronURN && urn != jobURN && !drift.has(urn) && !strings.Contains(urn, "-hub-minted") {
			t.Errorf("the re-mint also did %v on %s", o, shortURN(urn))
		}
	}

	// What the hub got.
	cred, err := readCredential(ctx, e.c, naming.KubeconfigObjectName(gen))
	if err != nil {
		t.Fatalf("the operator's kubeconfig Secret of generation %d: %v", gen, err)
	}
	for _, old := range before {
		if cred.Cert.SerialNumber.Cmp(old.Cert.SerialNumber) == 0 {
			t.Errorf("the re-mint handed over the credential of %s again (serial %x)", old.Secret, old.Cert.SerialNumber)
		}
	}
	if cred.Cert.NotBefore.Before(start) {
		t.Errorf("the new credential is valid from %s, before the re-mint started at %s: it was not issued by this re-mint",
			cred.Cert.NotBefore.UTC().Format(time.RFC3339), start.UTC().Format(time.RFC3339))
	}
	if ou := fmt.Sprintf("railgrid-kcp-mint-%d", gen); !slices.Contains(cred.Cert.Subject.OrganizationalUnit, ou) {
		t.Errorf("the new credential's subject has OU %v, want %s", cred.Cert.Subject.OrganizationalUnit, ou)
	}
	checkHubSecret(t, ctx, e, p2, cred)
	hub, err := e.c.kube.CoreV1().Secrets(p2.cfg.Hub.Namespace).Get(ctx, p2.cfg.Hub.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hub.UID != hubBefore.UID {
		t.Errorf("the hub Secret was recreated (uid %s, was %s); it must be updated in place", hub.UID, hubBefore.UID)
	}
	for _, old := range before {
		if bytes.Equal(hub.Data[p2.cfg.Hub.SecretKey], old.Kubeconfig) || deepContains(hub.Data[p2.cfg.Hub.SecretKey], []byte(old.Marker), 3) {
			t.Errorf("the hub Secret still holds the credential of %s", old.Secret)
		}
	}
	*creds = append(*creds, cred)
	t.Logf("re-mint %d: serial %x, not before %s (re-mint started %s), OU %v",
		gen, cred.Cert.SerialNumber, cred.Cert.NotBefore.UTC().Format(time.RFC3339), start.UTC().Format(time.RFC3339), cred.Cert.Subject.OrganizationalUnit)

	// The previous generation's Kubeconfig object is gone; its Certificate and Secrets
	// stay in kcp-system (the operator neither owns nor deletes them), which
	// docs/operations.md says: the old certificate stays valid until it expires.
	prev := naming.KubeconfigObjectName(gen - 1)
	if _, err := e.c.dyn.Resource(kubeconfigGVR).Namespace(naming.NamespaceKcp).Get(ctx, prev, metav1.GetOptions{}); err == nil {
		t.Errorf("the previous generation's Kubeconfig %s is still there", prev)
	}
	left, err := certificateSecrets(ctx, e.c)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(left, func(l string) bool { return strings.Contains(l, "kubeconfig-cert-"+prev+",") }) {
		t.Errorf("the previous generation's Certificate kubeconfig-cert-%s is gone, but docs/operations.md says it stays: %v", prev, left)
	}
	t.Logf("left in %s after re-mint %d:%s", naming.NamespaceKcp, gen, indent(left))

	checkSameObjects(t, holders, dataHolders(t, ctx, e.c))
	checkNoPlaintext(t, ctx, e, *creds)
	checkHubCredentialWorks(t, ctx, e, fmt.Sprintf("re-mint %d", gen))
	checkNoChanges(t, ctx, s, fmt.Sprintf("post-remint-%d", gen))
}

// dayTwo adds the shard beta to the running stack, retires it, brings it back on the
// volumes its retirement kept, and retires it again, so the rest of the lifecycle
// (destroy) runs on the stack it had before.
func dayTwo(t *testing.T, ctx context.Context, e *env) {
	var kept map[string]string // beta's claims -> their UIDs, as the first retirement left them
	added := t.Run("add-beta", func(t *testing.T) {
		before := e.stack.editKcp(func(kcp map[string]any) { kcp["shards"] = append(kcp["shards"].([]any), beta) })
		addShard(t, ctx, e, before, e.stack.render(), "add")
	})
	if added {
		t.Run("refused-without-the-previous-state", func(t *testing.T) { refusedByPreviousState(t, ctx, e) })
	}
	// Retire even when a check of the add failed, so destroy runs on the stack it had.
	if !t.Run("retire-beta", func(t *testing.T) {
		before := e.stack.editKcp(func(kcp map[string]any) {
			kcp["shards"] = withoutShard(kcp["shards"].([]any), "beta")
			kcp["retiredShards"] = []any{"beta"}
		})
		kept = retireShard(t, ctx, e, before, "beta", "retire")
	}) || !added {
		return
	}
	if !t.Run("bring-back-beta-on-kept-volumes", func(t *testing.T) {
		before := e.stack.editKcp(func(kcp map[string]any) {
			kcp["shards"] = append(kcp["shards"].([]any), beta)
			delete(kcp, "retiredShards")
		})
		addShard(t, ctx, e, before, e.stack.render(), "bring back")
		got := claimUIDs(t, ctx, e, "beta")
		if len(got) == 0 || !mapsEqual(got, kept) {
			t.Errorf("beta came back on claims %v, want the kept claims %v", got, kept)
		} else {
			t.Logf("beta came back on its kept claims %v", got)
		}
	}) {
		return
	}
	t.Run("retire-beta-again", func(t *testing.T) {
		before := e.stack.editKcp(func(kcp map[string]any) {
			kcp["shards"] = withoutShard(kcp["shards"].([]any), "beta")
			kcp["retiredShards"] = []any{"beta"}
		})
		retireShard(t, ctx, e, before, "beta", "second retire")
	})
}

// refusedByPreviousState runs previews of changes that only the previous state shows to
// be wrong, on the stack running beta: removing beta without retiring it, renaming it in
// place, and moving its ClusterIP. Each must be refused naming its rule, with nothing
// planned, and the config is put back afterwards.
func refusedByPreviousState(t *testing.T, ctx context.Context, e *env) {
	cases := []struct {
		name, rule, words string
		edit              func(kcp map[string]any)
	}{
		{"removed", "shard-vanished", "list it in kcp.retiredShards", func(kcp map[string]any) {
			kcp["shards"] = withoutShard(kcp["shards"].([]any), "beta")
		}},
		{"renamed", "shard-vanished", "a rename is a retire plus an add", func(kcp map[string]any) {
			renamed := map[string]any{}
			for k, v := range beta {
				renamed[k] = v
			}
			renamed["name"] = "gamma"
			kcp["shards"] = append(withoutShard(kcp["shards"].([]any), "beta"), renamed)
		}},
		{"clusterIP moved", "shard-moved", "cannot change in place", func(kcp map[string]any) {
			moved := map[string]any{}
			for k, v := range beta {
				moved[k] = v
			}
			moved["clusterIP"] = "10.96.0.104"
			kcp["shards"] = append(withoutShard(kcp["shards"].([]any), "beta"), moved)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			saved, err := os.ReadFile(e.stack.cfgFile)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := os.WriteFile(e.stack.cfgFile, saved, 0o600); err != nil {
					t.Fatal(err)
				}
			}()
			e.stack.editKcp(c.edit)
			pctx, cancel := context.WithTimeout(ctx, previewTimeout)
			defer cancel()
			_, log, err := e.stack.preview(pctx)
			msg := fmt.Sprint(err) + strings.Join(log.diagnostics(), "\n")
			if err == nil || !strings.Contains(msg, "railgrid-kcp:kcp.") || !strings.Contains(msg, c.words) {
				t.Fatalf("the preview of a %s shard was not refused with %q (rule %s): %v\n%s", c.name, c.words, c.rule, err, indent(log.diagnostics()))
			}
			if changed := changedURNs(log); len(changed) > 0 {
				t.Errorf("the refused preview still plans:%s", indent(describe(changed)))
			}
			t.Logf("%s: refused: %s", c.name, firstLine(strings.TrimPrefix(msg[strings.Index(msg, "railgrid-kcp:kcp."):], "")))
		})
	}
}
