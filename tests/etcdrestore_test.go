package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/railgrid/railgrid-kcp/components/etcdjobs"
	"github.com/railgrid/railgrid-kcp/internal/etcdrestore"
	"github.com/railgrid/railgrid-kcp/naming"
)

// restoreJobs are cmd/etcdrestore's Jobs for a shard of a shipped stack, as the plain
// values the plan's objects are compared with.
func restoreJobs(t *testing.T, stack, shard string, opts etcdrestore.Options) []map[string]any {
	t.Helper()
	opts.Config, opts.Shard = shippedConfig(t, stack), shard
	if opts.Bucket == "" {
		opts.Bucket = "kcp-etcd-snapshots-5eed0001"
	}
	if opts.ID == "" {
		opts.ID = "20250101t030000z"
	}
	jobs, err := etcdrestore.Jobs(opts)
	require.NoError(t, err)
	var out []map[string]any
	for _, j := range jobs {
		out = append(out, plainJob(t, j))
	}
	return out
}

func plainJob(t *testing.T, j *batchv1.Job) map[string]any {
	t.Helper()
	raw, err := json.Marshal(j)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

// podContainers are a pod spec's containers (init containers first) by name, and their
// names in order.
func podContainers(t *testing.T, spec any) (map[string]map[string]any, []string) {
	t.Helper()
	byName := map[string]map[string]any{}
	var order []string
	for _, c := range containersOf(spec.(map[string]any)) {
		name := c["name"].(string)
		byName[name] = c
		order = append(order, name)
	}
	return byName, order
}

// flagValue is the value of --name=value in argv.
func flagValue(t *testing.T, argv []string, name string) string {
	t.Helper()
	for _, a := range argv {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	t.Fatalf("no --%s in %q", name, argv)
	return ""
}

// Each restore Job writes one member's volume, with the identity that member has in
// its StatefulSet: the Job mounts the member's claim (the StatefulSet's claim template,
// its name and the ordinal) where the member mounts it, and restores into the member's
// data directory under the member's name (the pod's name, which --name=$(HOSTNAME)
// gives it) with its advertised peer URL and the StatefulSet's --initial-cluster, so the
// restored members form the cluster the StatefulSet starts. One restore's members share
// a cluster token that is not the StatefulSet's. The images are the members' and the gke
// plan's gcloud image, on kind too (the stack has no gcloud key; the restore runs the
// default of gke.snapshots.gcloudImageTag, which the shipped gke stack uses).
func TestRestoreJobsRestoreEachMemberWithItsStatefulSetIdentity(t *testing.T) {
	gcloudImage := getString(t, jobContainers(t, runStack(t, "gke"), naming.EtcdRestoreDrillCronJob("root"))["fetch"], "image")
	for _, stack := range []string{"kind", "gke"} {
		t.Run(stack, func(t *testing.T) {
			rec := runStack(t, stack)
			cfg := shippedConfig(t, stack)
			for _, shard := range cfg.Kcp.AllShards() {
				sts := inputs(object(t, rec, "StatefulSet", naming.EtcdName(shard.Name)))
				member := get(t, sts, "spec.template.spec.containers[0]")
				args := stringList(t, member, "args")
				claimTemplate := getString(t, sts, "spec.volumeClaimTemplates[0].metadata.name")
				dataMount := getString(t, member, "volumeMounts[0].mountPath")
				require.Equal(t, claimTemplate, getString(t, member, "volumeMounts[0].name"))

				jobs := restoreJobs(t, stack, shard.Name, etcdrestore.Options{})
				require.Len(t, jobs, number(t, sts, "spec.replicas"), "one Job per member")
				token := ""
				for i, job := range jobs {
					pod := fmt.Sprintf("%s-%d", getString(t, sts, "metadata.name"), i)
					require.Equal(t, naming.NamespaceEtcd, getString(t, job, "metadata.namespace"))
					require.Equal(t, getString(t, sts, "metadata.namespace"), getString(t, job, "metadata.namespace"), "the claims are in the StatefulSet's namespace")
					spec := get(t, job, "spec.template.spec")
					require.Equal(t, claimTemplate+"-"+pod, getString(t, spec, "volumes[1].persistentVolumeClaim.claimName"), "job %d mounts member %d's claim", i, i)
					containers, order := podContainers(t, spec)
					require.Equal(t, []string{"fetch", "status", "set-aside", "restore"}, order)
					for _, name := range []string{"set-aside", "restore"} {
						mounts := get(t, containers[name], "volumeMounts").([]any)
						last := mounts[len(mounts)-1].(map[string]any)
						require.Equal(t, getString(t, spec, "volumes[1].name"), last["name"])
						require.Equal(t, dataMount, last["mountPath"], "%s mounts the claim where the member does", name)
					}

					restore := stringList(t, containers["restore"], "command")
					require.Equal(t, pod, flagValue(t, restore, "name"), "the member's name is its pod's")
					require.Equal(t, flagValue(t, args, "data-dir"), flagValue(t, restore, "data-dir"))
					require.Equal(t, flagValue(t, args, "initial-cluster"), flagValue(t, restore, "initial-cluster"))
					require.Equal(t, strings.ReplaceAll(flagValue(t, args, "initial-advertise-peer-urls"), "$(HOSTNAME)", pod),
						flagValue(t, restore, "initial-advertise-peer-urls"))
					require.Len(t, strings.Split(flagValue(t, restore, "initial-cluster"), ","), len(jobs), "every member's peer URL")
					if i == 0 {
						token = flagValue(t, restore, "initial-cluster-token")
					}
					require.Equal(t, token, flagValue(t, restore, "initial-cluster-token"), "one token for the restore's members")
					require.NotEqual(t, flagValue(t, args, "initial-cluster-token"), token, "not the token of the cluster before")

					for _, name := range []string{"status", "restore"} {
						require.Equal(t, getString(t, member, "image"), getString(t, containers[name], "image"), "%s runs the members' etcd image", name)
					}
					for _, name := range []string{"fetch", "set-aside"} {
						require.Equal(t, gcloudImage, getString(t, containers[name], "image"), "%s runs the gke plan's gcloud image", name)
					}
				}
			}
		})
	}
}

// The restore pods pass the restricted Pod Security level of the etcd namespace as the
// members' pods do: the same pod security context (the members' user and group, which
// own their data), the same container security context on every container, and on gke
// the members' node pool. The real admission is run on them by tests/conformance
// (TestPodTemplatesPassRestrictedPodSecurity).
func TestRestorePodsRunLikeTheMembers(t *testing.T) {
	for _, stack := range []string{"kind", "gke"} {
		t.Run(stack, func(t *testing.T) {
			rec := runStack(t, stack)
			sts := inputs(object(t, rec, "StatefulSet", naming.EtcdName("root")))
			stsPod := get(t, sts, "spec.template.spec").(map[string]any)
			memberSecurity := get(t, stsPod, "containers[0].securityContext")
			for _, job := range restoreJobs(t, stack, "root", etcdrestore.Options{}) {
				pod := get(t, job, "spec.template.spec").(map[string]any)
				require.Equal(t, stsPod["securityContext"], pod["securityContext"])
				require.Equal(t, "Never", pod["restartPolicy"])
				containers, _ := podContainers(t, pod)
				for name, c := range containers {
					require.Equal(t, memberSecurity, c["securityContext"], "container %s", name)
					require.NotEmpty(t, get(t, c, "resources.limits.memory"), "container %s caps its memory", name)
				}
				require.Equal(t, emptyAsNil(stsPod["nodeSelector"]), emptyAsNil(pod["nodeSelector"]))
				require.Equal(t, emptyAsNil(stsPod["tolerations"]), emptyAsNil(pod["tolerations"]))
				if stack == "gke" {
					require.NotNil(t, pod["nodeSelector"], "gke: the etcd pool")
					drill := get(t, inputs(object(t, rec, "CronJob", naming.EtcdRestoreDrillCronJob("root"))), "spec.jobTemplate.spec.template.spec.serviceAccountName")
					require.Equal(t, drill, pod["serviceAccountName"], "gke: the drill's account, which may only read the bucket")
				} else {
					require.Nil(t, pod["serviceAccountName"], "kind: no cloud identity")
				}
				labels := get(t, job, "spec.template.metadata.labels").(map[string]any)
				require.Equal(t, "restore", labels[naming.EtcdJobLabel], "the gke jobs' NetworkPolicy admits nothing into it")
				require.NotContains(t, labels, naming.EtcdClientLabel, "it never talks to a live etcd")
				require.Equal(t, "20250101t030000z", labels[naming.EtcdRestoreLabel])
			}
		})
	}
}

// The restore a person runs is the restore the drill runs every day: the drill's fetch,
// status and restore containers in the gke plan run the same commands as the restore
// Jobs' (the fetch script's text, the status command), and the restore the same etcdutl
// command with the same flags in the same order, only the member's identity, its data
// directory and the token differing; the drill restores the newest snapshot, as the
// tool does unless told which.
func TestRestoreRunsTheDrillsRestoreSteps(t *testing.T) {
	drill := jobContainers(t, runStack(t, "gke"), naming.EtcdRestoreDrillCronJob("root"))
	for _, opts := range []etcdrestore.Options{{}, {Snapshot: "20250101T000000Z.db"}} {
		job := restoreJobs(t, "gke", "root", opts)[0]
		containers, _ := podContainers(t, get(t, job, "spec.template.spec"))
		for _, name := range []string{"fetch", "status"} {
			require.Equal(t, stringList(t, drill[name], "command"), stringList(t, containers[name], "command"), "%s runs the drill's command", name)
			require.Equal(t, drill[name]["resources"], containers[name]["resources"])
		}
		require.Equal(t, etcdjobs.FetchScript, stringList(t, containers["fetch"], "command")[2])
		drillEnv, jobEnv := containerEnv(t, drill["fetch"]), containerEnv(t, containers["fetch"])
		for k, v := range drillEnv {
			require.Equal(t, v, jobEnv[k], "fetch env %s", k)
		}
		_, named := jobEnv["SNAPSHOT"]
		require.Equal(t, opts.Snapshot != "", named, "SNAPSHOT only when a snapshot is named")
		require.NotContains(t, drillEnv, "SNAPSHOT", "the drill takes the newest")

		drillRestore, jobRestore := stringList(t, drill["restore"], "command"), stringList(t, containers["restore"], "command")
		require.Len(t, jobRestore, len(drillRestore))
		identity := map[string]bool{"name": true, "data-dir": true, "initial-cluster": true, "initial-advertise-peer-urls": true, "initial-cluster-token": true}
		for i := range drillRestore {
			flagName, _, _ := strings.Cut(strings.TrimPrefix(drillRestore[i], "--"), "=")
			jobFlag, _, _ := strings.Cut(strings.TrimPrefix(jobRestore[i], "--"), "=")
			require.Equal(t, flagName, jobFlag, "argument %d", i)
			if !identity[flagName] {
				require.Equal(t, drillRestore[i], jobRestore[i], "argument %d", i)
			}
		}
		require.Contains(t, jobRestore, "--bump-revision=1000000000")
		require.Contains(t, jobRestore, "--mark-compacted")
	}
}

// The restore refuses, before printing anything, what would restore the wrong data or
// break its own steps.
func TestRestoreRefusesWhatWouldRestoreTheWrongData(t *testing.T) {
	cfg := shippedConfig(t, "gke")
	base := etcdrestore.Options{Config: cfg, Shard: "root", Bucket: "snapshots-bucket", ID: "20250101t030000z"}
	for _, c := range []struct {
		name   string
		change func(o *etcdrestore.Options)
		want   string
	}{
		{"unknown shard", func(o *etcdrestore.Options) { o.Shard = "beta" }, `shard "beta" is not in the stack: it has root, alpha`},
		{"another shard's snapshot", func(o *etcdrestore.Options) { o.Snapshot = "gs://snapshots-bucket/alpha/20250101T000000Z.db" }, "is not a snapshot of shard root in bucket snapshots-bucket"},
		{"another bucket", func(o *etcdrestore.Options) { o.Snapshot = "gs://other/root/20250101T000000Z.db" }, "is not a snapshot of shard root in bucket snapshots-bucket"},
		{"not a snapshot", func(o *etcdrestore.Options) { o.Snapshot = "20250101T000000Z.txt" }, "is not a snapshot of shard root"},
		{"a step's own variable", func(o *etcdrestore.Options) { o.Env = []etcdjobs.EnvVar{{Name: "BUCKET", Value: "x"}} }, "BUCKET is set by the restore itself"},
		{"bad bucket", func(o *etcdrestore.Options) { o.Bucket = "Snapshots" }, `bucket "Snapshots" is not a GCS bucket name`},
		{"bad id", func(o *etcdrestore.Options) { o.ID = "2025-01-01T03:00:00Z" }, `restore id "2025-01-01T03:00:00Z"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := base
			c.change(&o)
			_, err := etcdrestore.Jobs(o)
			require.ErrorContains(t, err, c.want)
		})
	}
	jobs, err := etcdrestore.Jobs(base)
	require.NoError(t, err, "the base options are valid")
	require.Len(t, jobs, 3)
}

// emptyAsNil is nil for an empty map or list: an empty nodeSelector places a pod as no
// nodeSelector does.
func emptyAsNil(v any) any {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			return nil
		}
	case []any:
		if len(t) == 0 {
			return nil
		}
	}
	return v
}

// docs/operations.md shows what each restore Job of the gke stack's root shard runs; the
// excerpt is generated here from the program, so it cannot go stale.
func TestOperationsDocShowsTheRestoreJobs(t *testing.T) {
	opts := etcdrestore.Options{Config: shippedConfig(t, "gke"), Shard: "root", Bucket: "kcp-etcd-snapshots-0a1b2c3d",
		Snapshot: "20250101T020000Z.db", ID: "20250101t030000z"}
	jobs, err := etcdrestore.Jobs(opts)
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	var b strings.Builder
	b.WriteString("```sh\n")
	for _, j := range jobs {
		spec := j.Spec.Template.Spec
		fmt.Fprintf(&b, "# Job %s: claim %s, snapshot %s\n", j.Name, spec.Volumes[1].PersistentVolumeClaim.ClaimName, envOf(spec.InitContainers[0].Env, "SNAPSHOT"))
		restore := spec.Containers[0].Command
		fmt.Fprintf(&b, "%s \\\n", strings.Join(restore[:4], " "))
		for i, arg := range restore[4:] {
			end := " \\\n"
			if i == len(restore[4:])-1 {
				end = "\n"
			}
			fmt.Fprintf(&b, "    %s%s", arg, end)
		}
	}
	b.WriteString("```\n")
	require.Contains(t, b.String(), "--initial-cluster-token=etcd-root-restore-20250101t030000z")
	generatedBlock(t, "docs/operations.md", "restore jobs: gke root", b.String(),
		"go test ./tests -run TestOperationsDocShowsTheRestoreJobs -update-docs")
}

func envOf(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
