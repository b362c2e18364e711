//go:build linux

// Package snapshots runs the exact snapshot, restore-drill and defragmentation jobs of
// the gke stack's CronJobs and the restore Jobs of cmd/etcdrestore, taken from the program's own
// objects, for real on loopback: the etcd members of the StatefulSets (kind's one, gke's
// three) on etcd v3.6 built at the image's version (tools/etcdtools), gcloud pointed at
// a GCS emulator (fake-gcs-server), in private mount and network namespaces, each
// container in the root filesystem of the image the real node runs (testenv's gcloud,
// etcd and busybox images, unpacked) as the pod's user, with a read-only root filesystem where
// the container declares one.
package snapshots

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
	"github.com/railgrid/railgrid-kcp/internal/testkit/planjobs"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

const envSkip = "RAILGRID_SKIP_SNAPSHOTS"

func TestMain(m *testing.M) {
	if spec := os.Getenv(envContainer); spec != "" {
		os.Exit(runContainer(spec))
	}
	if path := os.Getenv(envChild); path != "" {
		os.Exit(runChild(path))
	}
	code := m.Run()
	removeNodeImages()
	os.Exit(code)
}

// tools finds the etcd tools and fake-gcs-server, building them first with
// hack/build-tools.sh if they are not in its cache (or waiting for a build of them that
// is under way: .ci/run builds them while the other tests run), and the Google Cloud
// CLI the gcloud image is made of.
type tools struct {
	etcd, fakeGCS, sdkRoot string
}

func findTools(t *testing.T, root string) tools {
	t.Helper()
	build := exec.Command("bash", filepath.Join(root, "hack/build-tools.sh"), "etcdtools", "fakegcs")
	var log strings.Builder
	build.Stderr = &log
	out, err := build.Output()
	require.NoError(t, err, "hack/build-tools.sh etcdtools fakegcs:\n%s", log.String())
	t.Logf("hack/build-tools.sh etcdtools fakegcs: %s", strings.TrimSpace(log.String()))
	dirs := strings.Fields(string(out))
	require.Len(t, dirs, 2)
	tl := tools{etcd: dirs[0], fakeGCS: filepath.Join(dirs[1], "fake-gcs-server")}
	var missing []string
	for _, bin := range []string{filepath.Join(tl.etcd, "etcd"), filepath.Join(tl.etcd, "etcdctl"), filepath.Join(tl.etcd, "etcdutl"), tl.fakeGCS} {
		if _, err := os.Stat(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("missing %s: run hack/build-tools.sh etcdtools fakegcs (or set %s=1 to skip)", strings.Join(missing, ", "), envSkip)
	}
	// busybox (the defragmentation's image) is Debian's busybox-static, which the node's
	// packages include.
	node := exec.Command("bash", filepath.Join(root, "hack/build-tools.sh"), "node")
	if out, err := node.CombinedOutput(); err != nil {
		t.Fatalf("hack/build-tools.sh node: %v\n%s", err, out)
	}
	if tl.sdkRoot, err = testenv.GcloudSDKRoot(); err != nil {
		t.Fatalf("%v (or set %s=1 to skip)", err, envSkip)
	}
	return tl
}

// gcsURL is where fake-gcs-server listens inside each scenario's network namespace.
const gcsURL = "http://127.0.0.1:4443"

// jobPods are the pod specs the scenarios run, from the program's objects: the gke
// plan's snapshot and drill CronJobs as one-off Jobs (internal/testkit/planjobs, with the
// emulator's environment, as the end-to-end test runs them), and the etcd
// StatefulSets' pod templates of both stacks; and the values the scenarios need from
// the plans.
type jobPods struct {
	pods     map[string]podSpec
	members  map[string]podSpec // the root shard's StatefulSet pod template, by stack
	bucket   string
	etcdHost string
	etcdImg  string
	gcloud   string
	shell    string // the defragmentation's busybox
}

var (
	renderOnce sync.Once
	rendered   jobPods
	renderErr  error
)

// renderJobs renders the pods once per test binary: every test reads the same plans.
func renderJobs(t *testing.T, root, shard string) jobPods {
	t.Helper()
	renderOnce.Do(func() { rendered, renderErr = renderPods(root, shard) })
	require.NoError(t, renderErr)
	return rendered
}

func renderPods(root, shard string) (jobPods, error) {
	p, err := planjobs.LoadGKE(filepath.Join(root, "Pulumi.gke.yaml"))
	if err != nil {
		return jobPods{}, err
	}
	jp := jobPods{
		pods:     map[string]podSpec{},
		members:  map[string]podSpec{},
		etcdHost: naming.EtcdServiceHost(shard),
		etcdImg:  p.EtcdImage(),
		gcloud:   p.GcloudImage(),
		shell:    config.EtcdDefragImage,
	}
	opts := planjobs.Options{Env: testenv.GCSEmulatorEnv(gcsURL)}
	for key, cronJob := range map[string]string{"snapshot": naming.EtcdSnapshotCronJob(shard), "drill": naming.EtcdRestoreDrillCronJob(shard),
		"defrag": naming.EtcdDefragCronJob(shard)} {
		opts.Name = cronJob + "-test"
		job, err := p.Job(cronJob, opts)
		if err != nil {
			return jobPods{}, err
		}
		var ps podSpec
		if err := convert(job.Spec.Template.Spec, &ps); err != nil {
			return jobPods{}, err
		}
		for _, c := range append(append([]container{}, ps.InitContainers...), ps.Containers...) {
			// The runner enforces what a container declares; the program must declare it.
			if !c.SecurityContext.ReadOnlyRootFilesystem {
				return jobPods{}, fmt.Errorf("%s container %s: no readOnlyRootFilesystem", cronJob, c.Name)
			}
		}
		jp.pods[key] = ps
		if b := planjobs.Bucket(job); b != "" {
			jp.bucket = b
		}
	}
	if jp.bucket == "" {
		return jobPods{}, fmt.Errorf("no BUCKET in the jobs' environment")
	}
	for _, stack := range []string{"kind", "gke"} {
		rec, err := mockstack.RunStackFile(stack, filepath.Join(root, "Pulumi."+stack+".yaml"), mockstack.Options{})
		if err != nil {
			return jobPods{}, err
		}
		for _, o := range plan.KubernetesObjects(rec) {
			meta, _ := o.Manifest["metadata"].(map[string]any)
			if o.Manifest["kind"] != "StatefulSet" || meta["name"] != naming.EtcdName(shard) {
				continue
			}
			var sts struct {
				Spec struct {
					Template struct {
						Spec podSpec `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			if err := convert(o.Manifest, &sts); err != nil {
				return jobPods{}, err
			}
			jp.members[stack] = sts.Spec.Template.Spec
		}
		if _, ok := jp.members[stack]; !ok {
			return jobPods{}, fmt.Errorf("the %s plan has no StatefulSet %s", stack, naming.EtcdName(shard))
		}
	}
	return jp, nil
}

// convert copies a value into another type through JSON.
func convert(from, to any) error {
	raw, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, to)
}

// runScenario re-executes this test binary in new mount and network namespaces to run
// one scenario, and returns what the pods did.
func runScenario(t *testing.T, env scenarioEnv, scenario string, keys int) childResult {
	t.Helper()
	work := openTempDir(t)
	in := childInput{
		Scenario: scenario, Pods: env.jp.pods, Members: env.jp.members, Bucket: env.jp.bucket, Shard: "root",
		EtcdHost: env.jp.etcdHost, Images: map[string]imageRoot{}, EtcdTools: env.tools.etcd, FakeGCS: env.tools.fakeGCS,
		StackFiles: map[string]string{"kind": filepath.Join(env.root, "Pulumi.kind.yaml"), "gke": filepath.Join(env.root, "Pulumi.gke.yaml")},
		WorkDir:    work, Keys: keys, Result: filepath.Join(work, "result.json"),
	}
	for ref, img := range env.images {
		in.Images[ref] = imageRoot{Root: img.root, Env: img.env}
	}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	inPath := filepath.Join(work, "input.json")
	require.NoError(t, os.WriteFile(inPath, data, 0o600))

	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+inPath)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	err = cmd.Run()
	require.NoError(t, err, "the scenario process failed:\n%s", out)
	var res childResult
	raw, err := os.ReadFile(in.Result)
	require.NoError(t, err, "no result:\n%s", out)
	require.NoError(t, json.Unmarshal(raw, &res))
	for _, run := range res.Runs {
		t.Logf("pod %s: %.1fs", run.Pod, run.Seconds)
		for _, c := range run.Containers {
			t.Logf("  %s exit %d:\n%s", c.Name, c.Exit, indent(c.Output))
		}
	}
	for _, note := range res.Notes {
		t.Log(note)
	}
	require.Empty(t, res.Error, "the scenario could not run:\n%s", out)
	t.Logf("scenario %s took %s", scenario, time.Since(start).Round(100*time.Millisecond))
	return res
}

// openTempDir is a temporary directory the pods' non-root user can read, as can it the
// directories above it.
func openTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	return dir
}

func indent(s string) string {
	return "    | " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    | ")
}

// scenarioEnv is what every scenario runs with.
type scenarioEnv struct {
	root   string
	tools  tools
	jp     jobPods
	images map[string]image
}

func prerequisites(t *testing.T) scenarioEnv {
	t.Helper()
	testenv.SkipIfShortOrDisabled(t, envSkip, "runs etcd, fake-gcs-server and gcloud")
	if os.Geteuid() != 0 {
		t.Skip("needs root for its private mount and network namespaces")
	}
	root := testenv.RepoRoot(t)
	tl, jp := findTools(t, root), renderJobs(t, root, "root")
	// The tools must speak the image's etcd minor version (3.6 moved snapshot restore
	// and status from etcdctl to etcdutl); a patch difference is only reported.
	out, err := exec.Command(filepath.Join(tl.etcd, "etcdutl"), "version").Output()
	require.NoError(t, err)
	built := regexp.MustCompile(`etcdutl version: (\d+\.\d+)\.(\d+)`).FindStringSubmatch(string(out))
	require.NotNil(t, built, "etcdutl version: %s", out)
	image := strings.TrimPrefix(jp.etcdImg[strings.LastIndex(jp.etcdImg, ":")+1:], "v")
	require.True(t, strings.HasPrefix(image, built[1]+"."), "tools/etcdtools builds etcd %s.%s, the program's image is %s: bump tools/etcdtools", built[1], built[2], jp.etcdImg)
	t.Logf("etcd tools %s.%s for image %s", built[1], built[2], jp.etcdImg)
	imgs, report, err := nodeImages(jp, tl.sdkRoot, tl.etcd)
	require.NoError(t, err)
	if report != "" {
		t.Log(report)
	}
	return scenarioEnv{root: root, tools: tl, jp: jp, images: imgs}
}

var keysServed = regexp.MustCompile(`restore drill passed: (\d+) keys served`)

// TestSnapshotAndRestoreDrill: keys written to the shard's etcd are snapshotted,
// checked and uploaded by the snapshot job; the drill then finds the newest snapshot
// (an older object is in the bucket too), downloads it, checks it, restores it, starts
// a throwaway etcd on it and counts the keys it serves.
func TestSnapshotAndRestoreDrill(t *testing.T) {
	env := prerequisites(t)
	const keys = 25
	res := runScenario(t, env, "pass", keys)
	for _, run := range res.Runs {
		if c, failed := run.failed(); failed {
			t.Fatalf("pod %s: container %s exited %d:\n%s", run.Pod, c.Name, c.Exit, c.Output)
		}
	}
	require.Len(t, res.Runs, 2, "the snapshot pod and the drill pod ran")
	snapshot, drill := res.Runs[0], res.Runs[1]
	for _, name := range []string{"connect", "save", "check", "upload"} {
		require.True(t, snapshot.container(name).Ran, "snapshot container %s ran", name)
	}
	uploaded := regexp.MustCompile(`gs://` + regexp.QuoteMeta(env.jp.bucket) + `/root/\d{8}T\d{6}Z\.db`).FindString(snapshot.container("upload").Output)
	require.NotEmpty(t, uploaded, "upload names its object")
	require.Contains(t, drill.container("fetch").Output, "restoring "+uploaded, "the drill takes the newest snapshot, not the older object")
	for _, name := range []string{"status", "restore", "verify"} {
		require.True(t, drill.container(name).Ran, "drill container %s ran", name)
	}
	m := keysServed.FindStringSubmatch(drill.container("verify").Output)
	require.NotNil(t, m, "verify reports the keys served")
	served, _ := strconv.Atoi(m[1])
	require.Equal(t, keys, served, "the restored etcd serves exactly the keys written")
	t.Logf("snapshot pod %.1fs, drill pod %.1fs", snapshot.Seconds, drill.Seconds)
}

// The failures the jobs must report loudly: a non-zero exit of the container that hit
// the cause, with a message that names it, and nothing after it run.
func TestSnapshotAndDrillFailLoudly(t *testing.T) {
	env := prerequisites(t)
	cases := []struct {
		scenario  string
		container string
		message   *regexp.Regexp
	}{
		{"empty-bucket", "fetch", regexp.MustCompile(`no snapshot of root`)},
		{"corrupt-snapshot", "status", regexp.MustCompile(`invalid database`)},
		{"unreachable-etcd", "connect", regexp.MustCompile(`connection refused[\s\S]*Failed to get the status of endpoint http://etcd-root\.etcd\.svc\.cluster\.local:2379`)},
	}
	for _, c := range cases {
		t.Run(c.scenario, func(t *testing.T) {
			t.Parallel()
			res := runScenario(t, env, c.scenario, 0)
			require.Len(t, res.Runs, 1)
			failed, ok := res.Runs[0].failed()
			require.True(t, ok, "pod %s must fail", res.Runs[0].Pod)
			require.Equal(t, c.container, failed.Name, "the step that hits the cause fails")
			require.NotZero(t, failed.Exit)
			require.Regexp(t, c.message, failed.Output)
			last := res.Runs[0].Containers[len(res.Runs[0].Containers)-1]
			require.Equal(t, failed.Name, last.Name, "nothing runs after the failure")
		})
	}
}

// probeScript tries to create a file in each directory it is given and says whether it
// could.
const probeScript = `for dir in "$@"; do
  file="${dir%/}/probe-$$"
  if err="$( { : > "${file}"; } 2>&1 )"; then echo "wrote ${dir}"; rm -f "${file}"; else echo "refused ${dir}: ${err}"; fi
done`

// A container that declares a read-only root filesystem writes to its volumes and to
// its pod's /dev/shm, and nowhere else: not even /tmp and /var/tmp, which any user may
// write on this machine's own root. The probe is the snapshot pod's upload container (its
// image, user, volumes and security context) with a command that tries each.
func TestContainersWriteOnlyToTheirVolumes(t *testing.T) {
	env := prerequisites(t)
	pod := env.jp.pods["snapshot"]
	require.Len(t, pod.Containers, 1)
	probe := pod.Containers[0]
	writable := []string{"/dev/shm"}
	for _, m := range probe.VolumeMounts {
		writable = append(writable, m.MountPath)
	}
	outside := []string{"/tmp", "/var/tmp", "/"}
	probe.Name = "probe"
	probe.Command = append([]string{"bash", "-c", probeScript, "probe"}, append(append([]string{}, writable...), outside...)...)
	probe.Args = nil
	pod.InitContainers, pod.Containers = nil, []container{probe}
	env.jp.pods = map[string]podSpec{"probe": pod}

	res := runScenario(t, env, "read-only-root", 0)
	require.Len(t, res.Runs, 1)
	run := res.Runs[0].container("probe")
	require.True(t, run.Ran)
	require.Zero(t, run.Exit, run.Output)
	for _, dir := range writable {
		require.Contains(t, run.Output, "wrote "+dir+"\n", "a volume mount is writable")
	}
	for _, dir := range outside {
		require.Regexp(t, regexp.MustCompile(`(?m)^refused `+regexp.QuoteMeta(dir)+`: .*Read-only file system$`), run.Output, "the root filesystem is read-only")
	}
}
