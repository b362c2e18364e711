//go:build linux

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The kcp-operator writes each kcp server's command line into a Deployment: `/kcp start`
// for a RootShard and a Shard, `/kcp-front-proxy` for a FrontProxy and the root shard's
// proxy (kcp-operator 406169b, internal/resources/compiled*/deployment.go). These checks
// run that command line, exactly as written, through the real binaries built from the
// kcp source (hack/build-tools.sh kcp), outside any pod: the files the Deployment mounts
// are missing, so a server that accepts its flags stops at the first of them.

// kcpImageBinaries maps the binary a kcp container runs (its image's path) to the name
// of the built binary on PATH.
var kcpImageBinaries = map[string]string{
	"/kcp":             "kcp",
	"/kcp-front-proxy": "kcp-front-proxy",
}

// kcpContainer is one kcp server's container as the operator wrote it.
type kcpContainer struct {
	Deployment, Container string
	// Component is the operator's app.kubernetes.io/component label of the Deployment.
	Component     string
	Command, Args []string
	// Mounts are the container's volume mount paths: the files it reads live there.
	Mounts []string
}

func (k kcpContainer) String() string { return k.Deployment + "/" + k.Container }

// kcpContainers lists the containers of every Deployment in namespace that run a kcp
// binary, in name order.
func kcpContainers(ctx context.Context, c *cluster, namespace string) ([]kcpContainer, error) {
	list, err := c.kube.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []kcpContainer
	for _, d := range list.Items {
		for _, ctr := range d.Spec.Template.Spec.Containers {
			if len(ctr.Command) == 0 || kcpImageBinaries[ctr.Command[0]] == "" {
				continue
			}
			k := kcpContainer{Deployment: d.Namespace + "/" + d.Name, Container: ctr.Name, Component: d.Spec.Template.Labels[naming.LabelComponent],
				Command: ctr.Command, Args: ctr.Args}
			for _, m := range ctr.VolumeMounts {
				k.Mounts = append(k.Mounts, m.MountPath)
			}
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// kcpVerdict is how a run of a kcp command line ended.
type kcpVerdict int

const (
	// stoppedAtMountedFile: the server parsed and validated its flags and stopped at a
	// file the Deployment mounts; what a correct command line does outside its pod.
	stoppedAtMountedFile kcpVerdict = iota
	// flagError: the command line was refused while its flags were parsed.
	flagError
	// otherStop: anything else (another error, a file the pod does not mount, no exit);
	// never taken for a pass, so that an unknown way of failing is looked at.
	otherStop
)

func (v kcpVerdict) String() string {
	return [...]string{"stopped at a mounted file", "flag error", "stopped otherwise"}[v]
}

// flagErrorPatterns are how pflag and cobra refuse a command line (spf13/pflag
// flag.go's failf messages, cobra's command lookup). kcp drops the generic API-server
// flags it disallows from its flag set (pkg/server/options/flags.go), so a disallowed
// flag is an unknown one.
var flagErrorPatterns = regexp.MustCompile(`unknown flag: |unknown shorthand flag: |invalid argument ".*" for ".*" flag|flag needs an argument: |bad flag syntax: |unknown command "`)

// missingFilePattern is how Go's os package reports a file that is not there.
var missingFilePattern = regexp.MustCompile(`(?:open |stat |lstat )?(/[^\s":]+): no such file or directory`)

// kcpRun is one run of a kcp command line.
type kcpRun struct {
	Verdict kcpVerdict
	// Detail is the flag error, or the missing file, or why the run is otherStop.
	Detail string
	Output string
}

// kcpRunTimeout bounds one run: refusing a flag or a missing file takes well under a
// second; a server that got past both would keep running.
const kcpRunTimeout = 60 * time.Second

// isolatedNetwork is the network a command line runs in: a network namespace of the
// test's own (unshare --net) with loopback and one veth pair whose two ends are both
// inside it. kcp needs a default route to pick the address it advertises, as in a pod;
// here that route leads to the pair's other end, which has no address and answers
// nothing, so nothing kcp dials (etcd, DNS) leaves the namespace. The script checks that
// these are the only interfaces before it runs the binary, and exits 97 if not.
const isolatedNetwork = `set -e
ip link set lo up
ip link add v0 type veth peer name v1
ip link set v0 up
ip link set v1 up
ip addr add 192.0.2.10/24 dev v0
ip route add default via 192.0.2.1 dev v0
[ "$(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')" = "lo v0 v1 " ] || exit 97
exec "$0" "$@"`

// runKcpCommandLine runs one container's command line through the built binary, with
// extra appended to its args, and classifies how it ended. It runs in isolatedNetwork and
// in a scratch working directory (the operator passes --root-directory= empty).
func runKcpCommandLine(ctx context.Context, bins binaries, k kcpContainer, extra ...string) (kcpRun, error) {
	name := kcpImageBinaries[k.Command[0]]
	bin := bins.kcpServers[name]
	if bin == "" {
		return kcpRun{}, fmt.Errorf("%s runs %s, which has no built binary", k, k.Command[0])
	}
	args := append(append(append([]string(nil), k.Command[1:]...), k.Args...), extra...)
	dir, err := os.MkdirTemp("", "railgrid-kcp-args-")
	if err != nil {
		return kcpRun{}, err
	}
	defer os.RemoveAll(dir)
	rctx, cancel := context.WithTimeout(ctx, kcpRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, "unshare", append([]string{"--net", "sh", "-c", isolatedNetwork, bin}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	testenv.SetProcessGroup(cmd)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	if rctx.Err() != nil && ctx.Err() == nil {
		return kcpRun{Verdict: otherStop, Detail: fmt.Sprintf("still running after %s", kcpRunTimeout), Output: out.String()}, nil
	}
	if ctx.Err() != nil {
		return kcpRun{}, ctx.Err()
	}
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		return kcpRun{}, fmt.Errorf("starting %s for %s: %w", bin, k, runErr)
	}
	if exit != nil && exit.ExitCode() == 97 {
		return kcpRun{}, fmt.Errorf("the network namespace for %s is not the isolated one: %s", k, out.String())
	}
	return classifyKcpRun(out.String(), runErr == nil, k.Mounts), nil
}

// classifyKcpRun says how a run ended from its output. A flag error anywhere wins; a
// pass needs positive evidence: a missing file under one of the container's mounts.
func classifyKcpRun(output string, exitedZero bool, mounts []string) kcpRun {
	run := kcpRun{Output: output}
	if m := flagErrorPatterns.FindString(output); m != "" {
		run.Verdict, run.Detail = flagError, lineContaining(output, m)
		return run
	}
	if exitedZero {
		run.Verdict, run.Detail = otherStop, "exited 0"
		return run
	}
	for _, m := range missingFilePattern.FindAllStringSubmatch(output, -1) {
		file := m[1]
		for _, mount := range mounts {
			if file == mount || strings.HasPrefix(file, strings.TrimSuffix(mount, "/")+"/") {
				run.Verdict, run.Detail = stoppedAtMountedFile, file
				return run
			}
		}
		run.Verdict, run.Detail = otherStop, "missing "+file+", which the pod does not mount"
		return run
	}
	run.Verdict, run.Detail = otherStop, "no flag error and no missing mounted file: "+lastLine(output)
	return run
}

func lineContaining(s, needle string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, needle) {
			return strings.TrimSpace(line)
		}
	}
	return needle
}

// wantKcpServers are the kinds of kcp server each check must have run, by the operator's
// component label (kcp-operator internal/resources/resources.go) and the binary it runs.
var wantKcpServers = map[string]string{
	"rootshard":       "/kcp",
	"shard":           "/kcp",
	"rootshard-proxy": "/kcp-front-proxy",
	"front-proxy":     "/kcp-front-proxy",
}

// checkKcpAcceptsOperatorArgs runs every kcp container in namespace through the real
// binaries and fails on any that does not stop at a mounted file. It also proves the
// check can fail: the root shard's command line with an unknown flag, and a shard's with
// --request-timeout (which kcp disallows), must each be a flag error.
func checkKcpAcceptsOperatorArgs(t *testing.T, ctx context.Context, c *cluster, bins binaries, namespace string, wantDeployments int) {
	t.Helper()
	containers, err := waitForKcpDeployments(ctx, c, namespace, wantDeployments)
	if err != nil {
		t.Fatalf("the operator's kcp Deployments in %s: %v", namespace, err)
	}
	accepted := map[string]kcpContainer{}
	for _, k := range containers {
		run, err := runKcpCommandLine(ctx, bins, k)
		if err != nil {
			t.Fatal(err)
		}
		if run.Verdict != stoppedAtMountedFile {
			t.Errorf("kcp refuses the command line the operator wrote into %s (%s: %s):\n  %s %s\n%s",
				k, run.Verdict, run.Detail, strings.Join(k.Command, " "), strings.Join(k.Args, " "), indent(tail(run.Output, 15)))
			continue
		}
		t.Logf("%s (%s): %s with %d args accepted; stopped at %s", k, k.Component, path.Base(k.Command[0]), len(k.Args), run.Detail)
		if wantKcpServers[k.Component] == k.Command[0] {
			accepted[k.Component] = k
		}
	}
	for component, binary := range wantKcpServers {
		if _, ok := accepted[component]; !ok {
			t.Errorf("no accepted kcp container of component %s running %s in %s", component, binary, namespace)
		}
	}
	// The check can fail.
	for _, neg := range []struct{ component, extra string }{
		{"rootshard", "--railgrid-not-a-kcp-flag=true"},
		{"shard", "--request-timeout=1h"},
	} {
		k, ok := accepted[neg.component]
		if !ok {
			continue
		}
		run, err := runKcpCommandLine(ctx, bins, k, neg.extra)
		if err != nil {
			t.Fatal(err)
		}
		if run.Verdict != flagError {
			t.Errorf("%s with %s appended was not refused as a flag error (%s: %s)", k, neg.extra, run.Verdict, run.Detail)
		} else {
			t.Logf("%s with %s appended: refused (%s)", k, neg.extra, run.Detail)
		}
	}
}

// waitForKcpDeployments waits until namespace has at least want Deployments running a
// kcp binary.
func waitForKcpDeployments(ctx context.Context, c *cluster, namespace string, want int) ([]kcpContainer, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		list, err := kcpContainers(ctx, c, namespace)
		if err == nil && len(deploymentsOf(list)) >= want {
			return list, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d after 3m (%v): %v", len(deploymentsOf(list)), want, err, list)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func deploymentsOf(list []kcpContainer) map[string]bool {
	out := map[string]bool{}
	for _, k := range list {
		out[k.Deployment] = true
	}
	return out
}

// tail is the last n lines of s.
func tail(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// gkePlanNamespace is where checkGKEPlanKcpArgs applies the gke plan's kcp objects, beside
// the kind stack's (the objects name only their own namespace, so they move as a set).
const gkePlanNamespace = "gke-plan"

// applyGKEPlanKcpObjects applies the gke plan's kcp objects for checkGKEPlanKcpArgs and
// the disruption steps (disruptions_test.go): the gke stack's offline plan
// (Pulumi.gke.yaml under the mocks, as cmd/plan renders it) gives its Issuer, RootShard,
// Shard and FrontProxy, and the kcp servers' disruption budgets; the test applies them to
// a namespace of their own on this cluster, for the real operator to write their
// Deployments while other steps run. It returns what it applied, and a func that removes
// it (the test lifts their finalizers: no kcp runs behind them to clean up after); the
// caller makes sure it runs, as the objects must outlive the step that applies them.
func applyGKEPlanKcpObjects(t *testing.T, ctx context.Context, c *cluster, root string) (applied []*unstructured.Unstructured, remove func()) {
	t.Helper()
	values, err := config.ReadStackFile(filepath.Join(root, "Pulumi.gke.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := mockstack.RunConfig("gke", values, mockstack.Options{})
	if err != nil {
		t.Fatalf("rendering the gke plan: %v", err)
	}
	// Its pods go to the kwok nodes: only their command lines are checked here, and on
	// the real node they would take its CPU to start kcp servers that have no etcd.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gkePlanNamespace,
		Annotations: map[string]string{namespaceNodeSelector: kwokNodeSelector}}}
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
		t.Fatal(err)
	}
	mapper, err := newMapper(c)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{"cert-manager.io/v1 Issuer": true, "operator.kcp.io/v1alpha1 RootShard": true,
		"operator.kcp.io/v1alpha1 Shard": true, "operator.kcp.io/v1alpha1 FrontProxy": true, "policy/v1 PodDisruptionBudget": true}
	seen := map[string]bool{}
	for _, o := range plan.KubernetesObjects(rec) {
		u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(o.Manifest)}
		if o.Patch || !kinds[u.GetAPIVersion()+" "+u.GetKind()] || u.GetNamespace() != naming.NamespaceKcp {
			continue
		}
		u.SetNamespace(gkePlanNamespace)
		u.SetAnnotations(nil) // the provider's await annotations mean nothing to the cluster
		m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.dyn.Resource(m.Resource).Namespace(gkePlanNamespace).Apply(ctx, u.GetName(), u,
			metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			t.Fatalf("applying the gke plan's %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		applied = append(applied, u)
		seen[u.GetAPIVersion()+" "+u.GetKind()] = true
	}
	if len(seen) != len(kinds) {
		t.Fatalf("the gke plan gave kcp objects of %d of the %d kinds %v", len(seen), len(kinds), kinds)
	}
	var once sync.Once
	return applied, func() { once.Do(func() { removeWithFinalizers(context.Background(), c, mapper, applied) }) }
}

// checkGKEPlanKcpArgs runs the command lines the operator wrote for the gke plan's kcp
// objects (applyGKEPlanKcpObjects) through the same check as the kind stack's.
func checkGKEPlanKcpArgs(t *testing.T, ctx context.Context, c *cluster, bins binaries) {
	t.Helper()
	checkKcpAcceptsOperatorArgs(t, ctx, c, bins, gkePlanNamespace, len(wantKcpServers))
}

// removeWithFinalizers deletes objs and their namespace, lifting their finalizers first.
func removeWithFinalizers(ctx context.Context, c *cluster, mapper meta.RESTMapper, objs []*unstructured.Unstructured) {
	for _, u := range objs {
		m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			continue
		}
		r := c.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		_ = r.Delete(ctx, u.GetName(), metav1.DeleteOptions{})
		_, _ = r.Patch(ctx, u.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{FieldManager: fieldManager})
	}
	_ = c.kube.CoreV1().Namespaces().Delete(ctx, gkePlanNamespace, metav1.DeleteOptions{})
}
