package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"

	"github.com/railgrid/railgrid-kcp/config"
)

// harness runs the command in a directory of its own holding the repository's stack
// files, with a fixed clock and a scripted `pulumi stack output`.
type harness struct {
	t *testing.T
	// outputs answer `pulumi stack output <name> --stack <stack>`, keyed "<stack>/<name>".
	outputs map[string]string
	asked   []string
}

var repoRoot, _ = filepath.Abs("../..")

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	for _, stack := range []string{"kind", "gke"} {
		data, err := os.ReadFile(filepath.Join(repoRoot, "Pulumi."+stack+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "Pulumi."+stack+".yaml"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	return &harness{t: t, outputs: map[string]string{}}
}

func (h *harness) run(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut, deps{
		now: func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) },
		stackOutput: func(cli, stack, output string) ([]byte, error) {
			h.asked = append(h.asked, cli+" "+stack+"/"+output)
			v, ok := h.outputs[stack+"/"+output]
			if !ok {
				return nil, errors.New("error: no stack named '" + stack + "' found")
			}
			return []byte(v), nil
		},
	})
	return code, out.String(), errOut.String()
}

// jobsOf parses the printed manifests back.
func jobsOf(t *testing.T, manifests string) []batchv1.Job {
	t.Helper()
	var jobs []batchv1.Job
	for _, doc := range strings.Split(manifests, "\n---\n")[1:] {
		var j batchv1.Job
		if err := yaml.UnmarshalStrict([]byte(doc), &j); err != nil {
			t.Fatalf("a printed document is not a Job: %v\n%s", err, doc)
		}
		jobs = append(jobs, j)
	}
	return jobs
}

func env(c batchv1.Job, container string) map[string]string {
	out := map[string]string{}
	for _, ic := range c.Spec.Template.Spec.InitContainers {
		if ic.Name == container {
			for _, e := range ic.Env {
				out[e.Name] = e.Value
			}
		}
	}
	return out
}

// On gke the bucket is the stack's: the command reads the snapshots output with the
// Pulumi CLI, and prints one Job per member (three) whose fetch step downloads the
// named snapshot from it. The id comes from the clock, and stderr says how to wait.
func TestGKEReadsTheBucketFromTheStackOutput(t *testing.T) {
	h := newHarness(t)
	h.outputs["gke/snapshots"] = `{"bucket": "kcp-etcd-snapshots-0a1b2c3d", "schedule": "0 * * * *"}`
	code, stdout, stderr := h.run("-stack", "gke", "-shard", "alpha", "-snapshot", "20250101T000000Z.db")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if len(h.asked) != 1 || h.asked[0] != "pulumi gke/snapshots" {
		t.Errorf("asked the Pulumi CLI %q, want the gke stack's snapshots output once", h.asked)
	}
	jobs := jobsOf(t, stdout)
	if len(jobs) != 3 {
		t.Fatalf("%d Jobs, want 3", len(jobs))
	}
	for i, j := range jobs {
		want := "etcd-alpha-" + string(rune('0'+i)) + "-restore-20250102t030405z"
		if j.Name != want {
			t.Errorf("job %d is %s, want %s", i, j.Name, want)
		}
		fetch := env(j, "fetch")
		if fetch["BUCKET"] != "kcp-etcd-snapshots-0a1b2c3d" || fetch["SNAPSHOT"] != "gs://kcp-etcd-snapshots-0a1b2c3d/alpha/20250101T000000Z.db" {
			t.Errorf("job %d fetches %s from %s", i, fetch["SNAPSHOT"], fetch["BUCKET"])
		}
	}
	if !strings.Contains(stdout, "# Restore 20250102t030405z of shard alpha's etcd (3 members) from gs://kcp-etcd-snapshots-0a1b2c3d/alpha/20250101T000000Z.db.") {
		t.Errorf("the header does not say what is restored:\n%s", strings.SplitN(stdout, "---", 2)[0])
	}
	if !strings.Contains(stderr, "kubectl -n etcd wait --for=condition=complete --timeout=30m job -l railgrid.io/etcd-restore=20250102t030405z") {
		t.Errorf("stderr does not say how to wait:\n%s", stderr)
	}
}

// On kind there is no bucket to read: -bucket is required, and -env reaches the steps
// that call gcloud (fetch) and no other. -bucket also wins over the gke stack's output,
// which is then not read.
func TestKindNeedsABucketAndPassesTheEnvironmentToGcloud(t *testing.T) {
	h := newHarness(t)
	code, stdout, stderr := h.run("-stack", "kind", "-shard", "root")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "the kind stack has no snapshot bucket: name the bucket that holds the snapshots with -bucket") {
		t.Fatalf("without -bucket: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = h.run("-stack", "kind", "-shard", "root", "-bucket", "railgrid-e2e", "-id", "e2e",
		"-env", "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE=http://10.244.0.1:4443/", "-env", "CLOUDSDK_AUTH_DISABLE_CREDENTIALS=True")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	jobs := jobsOf(t, stdout)
	if len(jobs) != 1 || jobs[0].Name != "etcd-root-0-restore-e2e" {
		t.Fatalf("want one Job etcd-root-0-restore-e2e, got %d", len(jobs))
	}
	fetch := env(jobs[0], "fetch")
	if fetch["CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE"] != "http://10.244.0.1:4443/" || fetch["CLOUDSDK_AUTH_DISABLE_CREDENTIALS"] != "True" || fetch["BUCKET"] != "railgrid-e2e" {
		t.Errorf("fetch env %v", fetch)
	}
	if _, named := fetch["SNAPSHOT"]; named {
		t.Error("no -snapshot: the fetch step takes the newest")
	}
	if aside := env(jobs[0], "set-aside"); aside["CLOUDSDK_AUTH_DISABLE_CREDENTIALS"] != "" || aside["ASIDE_DIR"] != "/var/lib/etcd/data.before-etcd-root-restore-e2e" {
		t.Errorf("set-aside env %v", aside)
	}
	if !strings.Contains(stdout, "(1 member) from the newest snapshot under gs://railgrid-e2e/root/") {
		t.Errorf("header:\n%s", strings.SplitN(stdout, "---", 2)[0])
	}
	if code, _, stderr := h.run("-stack", "gke", "-shard", "root", "-bucket", "given"); code != exitOK || len(h.asked) != 0 {
		t.Errorf("gke with -bucket: exit %d (%s), asked %q", code, stderr, h.asked)
	}
}

// What the command refuses, with exit 2 and a message naming the cause, printing no
// manifest: a missing flag, a bad flag value, a shard the stack does not have, a
// gke stack whose output cannot be read (exit 1, and it says to pass -bucket).
func TestRefusals(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-shard", "root"}, exitUsage, "-stack (or -config) is required"},
		{[]string{"-stack", "kind"}, exitUsage, "-shard is required"},
		{[]string{"-stack", "kind", "-shard", "root", "-bucket", "b-1", "-env", "NOVALUE"}, exitUsage, `want KEY=VALUE, got "NOVALUE"`},
		{[]string{"-stack", "kind", "-shard", "root", "-bucket", "b-1", "-gcloud-image-tag", "latest"}, exitUsage, `-gcloud-image-tag "latest": must be a pinned google-cloud-cli tag`},
		{[]string{"-stack", "kind", "-shard", "gamma", "-bucket", "b-1"}, exitUsage, `shard "gamma" is not in the stack: it has root, alpha`},
		{[]string{"-stack", "kind", "-shard", "root", "-bucket", "b-1", "-snapshot", "gs://b-1/alpha/x.db"}, exitUsage, "is not a snapshot of shard root in bucket b-1"},
		{[]string{"-stack", "gke", "-shard", "root"}, exitFailed, "reading the bucket from stack gke's output snapshots: error: no stack named 'gke' found\n(give -bucket to name it)"},
		{[]string{"-stack", "nosuch", "-shard", "root"}, exitUsage, "Pulumi.nosuch.yaml"},
	} {
		code, stdout, stderr := h.run(c.args...)
		if code != c.code || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stdout %d bytes, stderr %q; want exit %d and %q", c.args, code, len(stdout), stderr, c.code, c.want)
		}
	}
}

// The gcloud image tag: the gke stack's key by default, on kind its default, and the
// flag over both.
func TestGcloudImage(t *testing.T) {
	h := newHarness(t)
	h.outputs["gke/snapshots"] = `{"bucket": "bkt"}`
	image := func(args ...string) string {
		code, stdout, stderr := h.run(args...)
		if code != exitOK {
			t.Fatalf("%q: exit %d: %s", args, code, stderr)
		}
		return jobsOf(t, stdout)[0].Spec.Template.Spec.InitContainers[0].Image
	}
	kind := image("-stack", "kind", "-shard", "root", "-bucket", "bkt")
	gke := image("-stack", "gke", "-shard", "root")
	if want := config.GcloudImage(config.DefaultGcloudImageTag); kind != gke || kind != want {
		t.Errorf("kind runs %s, gke %s: want both %s", kind, gke, want)
	}
	if got := image("-stack", "kind", "-shard", "root", "-bucket", "bkt", "-gcloud-image-tag", "550.0.0-slim"); got != "gcr.io/google.com/cloudsdktool/google-cloud-cli:550.0.0-slim" {
		t.Errorf("-gcloud-image-tag: %s", got)
	}
}
