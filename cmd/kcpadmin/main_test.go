package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/httpstream"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/railgrid/railgrid-kcp/internal/kcpadmin"
)

// harness runs the command in a directory of its own holding the repository's kind
// stack file, against a fake cluster that has nothing in it.
type harness struct {
	t   *testing.T
	dir string
	// gotKubeconfig and gotContext are what the cluster dependency was asked for; nil
	// when it was not asked at all.
	gotKubeconfig, gotContext *string
	clusterErr                error
	kube                      *kubefake.Clientset
}

// kindStackFile is the repository's kind stack file, found before a test changes
// directory.
var kindStackFile, _ = filepath.Abs("../../Pulumi.kind.yaml")

func newHarness(t *testing.T) *harness {
	t.Helper()
	stack, err := os.ReadFile(kindStackFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Pulumi.kind.yaml"), stack, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(t.TempDir(), "config"))
	return &harness{t: t, dir: dir, kube: kubefake.NewClientset()}
}

func (h *harness) deps() deps {
	return deps{
		cluster: func(kubeconfig, kubeContext string) (*rest.Config, string, error) {
			h.gotKubeconfig, h.gotContext = &kubeconfig, &kubeContext
			return &rest.Config{Host: "https://apiserver.invalid"}, kubeContext, h.clusterErr
		},
		options: func(o kcpadmin.Options) kcpadmin.Options {
			o.Kube = h.kube
			o.Dial = func(string, string) (httpstream.Dialer, error) {
				return nil, errors.New("the test's cluster has no pods")
			}
			o.Timeout = 5 * time.Second
			return o
		},
	}
}

func (h *harness) run(args ...string) (code int, stdout, stderr string) {
	h.t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut, h.deps())
	return code, out.String(), errOut.String()
}

// Bad usage exits 2 with a message that names the flag, before any cluster is asked.
func TestBadUsageIsRefusedBeforeTheClusterIsAsked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "kcpadmin: -stack (or -config) is required"},
		{[]string{"-stack", "kind", "extra"}, "kcpadmin: unexpected arguments: extra"},
		{[]string{"-stack", "kind", "-port", "70000"}, "kcpadmin: -port 70000: want 1-65535, or 0 for a free port"},
		{[]string{"-stack", "kind", "-timeout", "0s"}, "kcpadmin: -timeout must be positive"},
		{[]string{"-stack", "nope"}, "Pulumi.nope.yaml"},
		{[]string{"-stack", "kind", "-no-such-flag"}, "flag provided but not defined: -no-such-flag"},
	} {
		h := newHarness(t)
		code, _, stderr := h.run(c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, exitUsage, c.want)
		}
		if h.gotContext != nil {
			t.Errorf("%v: the cluster was asked", c.args)
		}
	}
}

// A kubeconfig file inside the git checkout the command runs from is refused, named, and
// the cluster is not asked; that includes the default place when the user's config
// directory lies in the checkout.
func TestAKubeconfigInsideTheCheckoutIsRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  string
	}{
		{"-o", []string{"-stack", "kind", "-o", "admin.kubeconfig"}, ""},
		{"the default place", []string{"-stack", "kind"}, "config"},
	} {
		h := newHarness(t)
		if err := os.Mkdir(".git", 0o700); err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(h.dir, "admin.kubeconfig")
		if c.env != "" {
			t.Setenv("XDG_CONFIG_HOME", filepath.Join(h.dir, c.env))
			want = filepath.Join(h.dir, c.env, "railgrid-kcp", "kind-kcp-admin.kubeconfig")
		}
		code, _, stderr := h.run(c.args...)
		if code != exitUsage || !strings.Contains(stderr, "is inside the git checkout") || !strings.Contains(stderr, filepath.Base(want)) {
			t.Errorf("%s: exit %d, stderr %q; want %d and a refusal naming %s", c.name, code, stderr, exitUsage, want)
		}
		if h.gotContext != nil {
			t.Errorf("%s: the cluster was asked", c.name)
		}
		if _, err := os.Stat(want); !os.IsNotExist(err) {
			t.Errorf("%s: %s exists: %v", c.name, want, err)
		}
	}
}

// The kind stack uses its kind.context and kind.kubeconfig unless -context and
// -kubeconfig say otherwise, like the program.
func TestTheKindStackUsesItsContext(t *testing.T) {
	h := newHarness(t)
	h.run("-stack", "kind")
	if h.gotContext == nil || *h.gotContext != "kind-railgrid-kcp" || *h.gotKubeconfig != "" {
		t.Errorf("asked for kubeconfig %v context %v, want the default file and kind-railgrid-kcp", deref(h.gotKubeconfig), deref(h.gotContext))
	}
	h.run("-stack", "kind", "-context", "other", "-kubeconfig", "/k")
	if *h.gotContext != "other" || *h.gotKubeconfig != "/k" {
		t.Errorf("asked for kubeconfig %q context %q, want /k and other", *h.gotKubeconfig, *h.gotContext)
	}
	stack, err := os.ReadFile("Pulumi.kind.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kindKubeconfig := filepath.Join(t.TempDir(), "kind.kubeconfig")
	if err := os.WriteFile(kindKubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stack = []byte(strings.Replace(string(stack), "    context: kind-railgrid-kcp\n", "    context: kind-railgrid-kcp\n    kubeconfig: "+kindKubeconfig+"\n", 1))
	if err := os.WriteFile("Pulumi.kind.yaml", stack, 0o600); err != nil {
		t.Fatal(err)
	}
	h.run("-stack", "kind")
	if *h.gotKubeconfig != kindKubeconfig {
		t.Errorf("asked for kubeconfig %q, want the stack's kind.kubeconfig", *h.gotKubeconfig)
	}

	h.clusterErr = errors.New(`context "other" does not exist`)
	code, _, stderr := h.run("-stack", "kind", "-context", "other")
	if code != exitUsage || !strings.Contains(stderr, `kcpadmin: kubeconfig: context "other" does not exist`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func deref(s *string) string {
	if s == nil {
		return "(not asked)"
	}
	return *s
}

// Without the operator's Secret the command fails with status 1, naming the Secret of the
// stack's re-mint generation and why it may be missing, and writes nothing.
func TestAMissingSecretIsNamedWithTheReason(t *testing.T) {
	h := newHarness(t)
	stack, err := os.ReadFile("Pulumi.kind.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stack = append(stack, []byte("  railgrid-kcp:hub:\n    remintGeneration: 3\n")...)
	if err := os.WriteFile("Pulumi.kind.yaml", stack, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "admin.kubeconfig")
	code, stdout, stderr := h.run("-stack", "kind", "-o", out)
	want := "kcpadmin: Secret kcp-system/kcp-kubeconfig-frontproxy-remint-3 not found: the kcp-operator writes it for the Kubeconfig object kcp-kubeconfig-frontproxy-remint-3 of hub.remintGeneration 3 once that object is Available; run pulumi up"
	if code != exitFailed || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitFailed, want)
	}
	if !strings.Contains(stdout, `kcpadmin: stack kind (Pulumi.kind.yaml), context "kind-railgrid-kcp"`) {
		t.Errorf("stdout %q does not name the stack and context", stdout)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s was written: %v", out, err)
	}
}

// The instructions name the file, how to use it with plain kubectl and when it expires,
// quoting a path the shell would split.
func TestTheInstructionsSayHowToUseTheKubeconfig(t *testing.T) {
	var out bytes.Buffer
	expires := time.Now().Add(100*24*time.Hour + time.Hour)
	printUse(&out, &kcpadmin.Session{
		KubeconfigPath: "/home/a b/.config/railgrid-kcp/kind-kcp-admin.kubeconfig",
		Server:         "https://127.0.0.1:40123/clusters/root",
		ServerName:     "frontproxy-front-proxy.kcp-system.svc.cluster.local",
		ExpiresAt:      expires,
	})
	for _, want := range []string{
		"wrote /home/a b/.config/railgrid-kcp/kind-kcp-admin.kubeconfig (mode 0600): server https://127.0.0.1:40123/clusters/root, tls-server-name frontproxy-front-proxy.kcp-system.svc.cluster.local",
		"expires at " + expires.UTC().Format(time.RFC3339) + " (in 100 days)",
		"  export KUBECONFIG='/home/a b/.config/railgrid-kcp/kind-kcp-admin.kubeconfig'\n  kubectl get workspaces\n",
		"Ctrl-C stops the forward; the file stays.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("instructions lack %q:\n%s", want, out.String())
		}
	}
}

func TestHelpExitsZeroWithTheUsage(t *testing.T) {
	h := newHarness(t)
	code, _, stderr := h.run("-h")
	if code != exitOK || !strings.Contains(stderr, "usage: go run ./cmd/kcpadmin -stack kind|gke [flags]") || !strings.Contains(stderr, "-port") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
