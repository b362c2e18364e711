// Package etcdjobs is what the etcd snapshot, restore-drill and restore jobs run, step by
// step: each container's image, command line, environment, mounts and resources. It
// imports no Pulumi SDK, so the program's CronJobs (components/snapshots_gke.go) and the
// restore Jobs that cmd/etcdrestore prints are built from the same steps: the restore a
// person runs is the restore the drill proves every day (RestoreSteps).
package etcdjobs

import (
	"fmt"
	"strings"

	"github.com/railgrid/railgrid-kcp/naming"
)

// Image is the image a step runs in.
type Image int

const (
	// EtcdImage is the members' pinned official etcd image: distroless, so its steps are
	// exec-form commands of /usr/local/bin/etcd, etcdctl and etcdutl.
	EtcdImage Image = iota
	// GcloudImage is google-cloud-cli: bash, coreutils and gcloud; no python3 on PATH on
	// x86_64, so its scripts use bash and coreutils only.
	GcloudImage
	// ShellImage is busybox (config.EtcdDefragImage): a shell, wget and sed, for a step
	// that needs a loop and the etcd image has none.
	ShellImage
)

// Mount is a volume of the pod mounted in a step's container.
type Mount struct {
	Volume, Path string
}

// Resources are a step's cpu and memory requests and its memory limit.
type Resources struct {
	CPU, Memory, MemoryLimit string
}

// EnvVar is a literal environment variable.
type EnvVar struct {
	Name, Value string
}

// Step is one container of a job's pod.
type Step struct {
	Name    string
	Image   Image
	Command []string
	// Bucket: the step calls gcloud and gets the bucket as BUCKET, first in its
	// environment (the program knows the bucket as an output, the restore tool as a
	// string).
	Bucket    bool
	Env       []EnvVar
	Mounts    []Mount
	Resources Resources
	// Sidecar: a native sidecar (an init container that restarts always), which runs
	// beside the containers after it and stops with the pod.
	Sidecar bool
}

// DefragSteps defragment a shard's etcd of members members, one member at a time and the
// leader last (DefragScript), through each member's client URL.
func DefragSteps(shard string, members int) []Step {
	endpoints := make([]string, 0, members)
	for i := 0; i < members; i++ {
		endpoints = append(endpoints, naming.EtcdClientURL(shard, i))
	}
	return []Step{{Name: "defrag", Image: ShellImage, Resources: Resources{"50m", "16Mi", "64Mi"},
		Env:     []EnvVar{{"SHARD", shard}, {"ENDPOINTS", strings.Join(endpoints, " ")}},
		Command: []string{"/bin/sh", "-c", DefragScript}}}
}

// The volumes of the jobs' pods.
const (
	// BackupVolume holds the snapshot the snapshot job saves and uploads.
	BackupVolume = "backup"
	// ScratchVolume holds the downloaded snapshot, gcloud's configuration and, in the
	// drill, the restored data.
	ScratchVolume = "scratch"
	// DataVolume is an etcd member's claim, in the restore job.
	DataVolume = naming.EtcdDataClaimTemplate
)

// SnapshotFile is where a restore downloads the snapshot to.
const SnapshotFile = "/" + ScratchVolume + "/snapshot.db"

// BumpRevision is how far a restore raises the revision: past any revision the old
// cluster can have reached, so that every watcher (kcp's informers, the front proxy,
// the other shards) sees the restored keyspace as newer and, with the revisions marked
// compacted, relists instead of waiting for revisions that went backwards.
const BumpRevision = 1000000000

func volumeMount(volume string) []Mount { return []Mount{{Volume: volume, Path: "/" + volume}} }

// gcloudEnv is what every step that calls gcloud needs beside BUCKET: the shard, a
// writable gcloud configuration directory on the pod's volume (the root filesystem is
// read-only, and the non-root user has no home), and parallel composite uploads off:
// they compose temporary objects and delete them, which needs storage.objects.delete
// (https://cloud.google.com/storage/docs/parallel-composite-uploads). gcloud storage
// also takes semaphores in /dev/shm, which the runtime mounts writable in every pod,
// apart from the root filesystem, and writes nothing else outside the volume
// (tests/snapshots runs these containers with the root filesystem read-only).
func gcloudEnv(volume, shard string) []EnvVar {
	return []EnvVar{
		{"SHARD", shard},
		{"CLOUDSDK_CONFIG", "/" + volume + "/gcloud"},
		{"CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_ENABLED", "False"},
	}
}

// SnapshotSteps save a snapshot from the shard's client Service (etcdctl refuses several
// endpoints, and the Service picks one member), check it and upload it.
func SnapshotSteps(shard string) (init, main []Step) {
	client := fmt.Sprintf("http://%s:%d", naming.EtcdServiceHost(shard), naming.EtcdClientPort)
	backup := volumeMount(BackupVolume)
	init = []Step{
		// A member-local status call fails within seconds, naming the endpoint, where an
		// unreachable etcd would leave the save silent until its command timeout.
		{Name: "connect", Image: EtcdImage, Mounts: backup, Resources: Resources{"50m", "32Mi", "128Mi"},
			Command: []string{"/usr/local/bin/etcdctl", "--endpoints=" + client, "--dial-timeout=5s", "--command-timeout=30s", "endpoint", "status"}},
		{Name: "save", Image: EtcdImage, Mounts: backup, Resources: Resources{"100m", "64Mi", "256Mi"},
			Command: []string{"/usr/local/bin/etcdctl", "--endpoints=" + client, "--command-timeout=10m", "snapshot", "save", "/backup/snapshot.db"}},
		{Name: "check", Image: EtcdImage, Mounts: backup, Resources: Resources{"100m", "64Mi", "1Gi"},
			Command: []string{"/usr/local/bin/etcdutl", "snapshot", "status", "/backup/snapshot.db", "-w", "json"}},
	}
	main = []Step{{Name: "upload", Image: GcloudImage, Bucket: true, Env: gcloudEnv(BackupVolume, shard), Mounts: backup,
		Resources: Resources{"100m", "256Mi", "1Gi"}, Command: []string{"bash", "-c", SnapshotUploadScript}}}
	return init, main
}

// Restore is one restore of a snapshot into one etcd member: what RestoreSteps need.
type Restore struct {
	Shard string
	// Snapshot is the object to restore, gs://<bucket>/<shard>/<name>.db; empty: the
	// newest under the shard's prefix.
	Snapshot string
	// Member, PeerURL, InitialCluster and Token are the restored member's --name, its
	// --initial-advertise-peer-urls, the --initial-cluster of all the members, and the
	// --initial-cluster-token every member of this restore shares.
	Member, PeerURL, InitialCluster, Token string
	// DataDir is where the restored member's data goes. When it is on the scratch
	// volume (the drill), nothing is there before; otherwise it is on DataVolume,
	// mounted at naming.EtcdDataMount, and what is there is moved aside first.
	DataDir string
}

// onMemberVolume says whether the restore writes a member's own volume.
func (r Restore) onMemberVolume() bool {
	return !strings.HasPrefix(r.DataDir, "/"+ScratchVolume+"/")
}

// AsideDir is where the member's data from before the restore is moved: beside it on
// the same volume, named after the restore's token, so a second restore never
// overwrites what the first one kept.
func (r Restore) AsideDir() string { return r.DataDir + ".before-" + r.Token }

// RestoreSteps are the restore: fetch the snapshot (the named one, or the newest of
// the shard), check it, move what the member's volume holds aside (only on a member's
// volume), and restore it with a new cluster token and the revision bumped. The drill
// runs them into scratch storage daily; cmd/etcdrestore runs them into each member's
// volume. A failing step stops the pod before anything after it: a snapshot that does
// not check leaves the member's data where it was.
func RestoreSteps(r Restore) []Step {
	scratch := volumeMount(ScratchVolume)
	fetch := Step{Name: "fetch", Image: GcloudImage, Bucket: true, Env: gcloudEnv(ScratchVolume, r.Shard), Mounts: scratch,
		Resources: Resources{"100m", "256Mi", "1Gi"}, Command: []string{"bash", "-c", FetchScript}}
	if r.Snapshot != "" {
		fetch.Env = append(fetch.Env, EnvVar{"SNAPSHOT", r.Snapshot})
	}
	steps := []Step{
		fetch,
		{Name: "status", Image: EtcdImage, Mounts: scratch, Resources: Resources{"100m", "64Mi", "1Gi"},
			Command: []string{"/usr/local/bin/etcdutl", "snapshot", "status", SnapshotFile, "-w", "json"}},
	}
	restoreMounts := scratch
	if r.onMemberVolume() {
		data := []Mount{{Volume: DataVolume, Path: naming.EtcdDataMount}}
		steps = append(steps, Step{Name: "set-aside", Image: GcloudImage, Mounts: data, Resources: Resources{"50m", "32Mi", "128Mi"},
			Env:     []EnvVar{{"DATA_DIR", r.DataDir}, {"ASIDE_DIR", r.AsideDir()}},
			Command: []string{"bash", "-c", SetAsideScript}})
		restoreMounts = append(append([]Mount{}, scratch...), data...)
	}
	return append(steps, Step{Name: "restore", Image: EtcdImage, Mounts: restoreMounts, Resources: Resources{"100m", "128Mi", "2Gi"},
		Command: RestoreCommand(r)})
}

// RestoreCommand is the etcdutl command line of a restore: the member's identity in the
// restored cluster, a cluster token of this restore (restored members never talk to a
// stale member that still holds the old cluster's data), and the revision bumped and
// marked compacted (BumpRevision).
func RestoreCommand(r Restore) []string {
	return []string{"/usr/local/bin/etcdutl", "snapshot", "restore", SnapshotFile,
		"--name=" + r.Member,
		"--data-dir=" + r.DataDir,
		"--initial-cluster=" + r.InitialCluster,
		"--initial-advertise-peer-urls=" + r.PeerURL,
		"--initial-cluster-token=" + r.Token,
		fmt.Sprintf("--bump-revision=%d", BumpRevision),
		"--mark-compacted",
	}
}

// The drill's throwaway etcd: one member on loopback, restored into scratch storage.
const (
	drillMember = "drill"
	drillURL    = "http://127.0.0.1"
)

// DrillRestore is the drill's restore of the shard's newest snapshot into scratch
// storage, as a one-member cluster on loopback.
func DrillRestore(shard string) Restore {
	peer := drillURL + ":2380"
	return Restore{
		Shard: shard, Member: drillMember, PeerURL: peer, InitialCluster: drillMember + "=" + peer,
		Token: naming.EtcdRestoreDrillCronJob(shard), DataDir: "/" + ScratchVolume + "/restored",
	}
}

// DrillSteps prove a restore: the restore steps into scratch storage, a throwaway etcd
// on the restored data (a native sidecar, listening on loopback only) and a check that
// it serves keys.
func DrillSteps(shard string) (init, main []Step) {
	r := DrillRestore(shard)
	etcd := Step{Name: "etcd", Image: EtcdImage, Mounts: volumeMount(ScratchVolume), Resources: Resources{"250m", "256Mi", "2Gi"}, Sidecar: true,
		Command: []string{"/usr/local/bin/etcd",
			"--name=" + r.Member, "--data-dir=" + r.DataDir,
			"--listen-client-urls=" + drillURL + ":2379", "--advertise-client-urls=" + drillURL + ":2379",
			"--listen-peer-urls=" + r.PeerURL, "--initial-advertise-peer-urls=" + r.PeerURL,
			"--initial-cluster=" + r.InitialCluster}}
	init = append(RestoreSteps(r), etcd)
	main = []Step{{Name: "verify", Image: GcloudImage, Mounts: volumeMount(ScratchVolume), Resources: Resources{"50m", "32Mi", "128Mi"},
		Command: []string{"bash", "-c", DrillVerifyScript}}}
	return init, main
}
