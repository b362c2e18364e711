// Package etcdrestore builds the Jobs that restore one shard's etcd from a snapshot,
// one Job per member, each writing that member's own volume: the restore steps of the
// daily restore drill (components/etcdjobs.RestoreSteps), with the member's identity in
// the StatefulSet's cluster. cmd/etcdrestore prints them for `kubectl apply -f -`.
package etcdrestore

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/railgrid/railgrid-kcp/components/etcdjobs"
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Options are one restore of one shard.
type Options struct {
	Config *config.Config
	Shard  string
	// Bucket holds the snapshots, under <shard>/<UTC timestamp>.db.
	Bucket string
	// Snapshot is the object to restore: gs://<Bucket>/<Shard>/<name>.db, or just
	// <name>.db; empty restores the newest of the shard, which each Job looks up when it
	// runs.
	Snapshot string
	// ID names this restore: its Jobs, its label and its cluster token. NewID makes one.
	ID string
	// GcloudImageTag is the google-cloud-cli tag; empty: the stack's
	// (config.Config.EtcdJobsGcloudImageTag).
	GcloudImageTag string
	// Env is added to the environment of the steps that call gcloud (another storage
	// endpoint, credentials of a test); the steps' own variables cannot be replaced.
	Env []etcdjobs.EnvVar
}

// NewID is the id of a restore started at now: its UTC time, lowercase, so that it can
// be part of a Job name.
func NewID(now time.Time) string { return strings.ToLower(now.UTC().Format("20060102T150405Z")) }

var (
	idPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?$`)
	// bucketPattern is a GCS bucket name without dots
	// (https://cloud.google.com/storage/docs/buckets#naming).
	bucketPattern = regexp.MustCompile(`^[a-z0-9][-_a-z0-9]{1,61}[a-z0-9]$`)
	envName       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// reservedEnv are the variables the steps set themselves.
var reservedEnv = map[string]bool{"BUCKET": true, "SHARD": true, "SNAPSHOT": true, "CLOUDSDK_CONFIG": true,
	"CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_ENABLED": true, "DATA_DIR": true, "ASIDE_DIR": true}

// SnapshotURL is the object to restore as the fetch step takes it, or "" for the
// newest; it refuses an object outside the shard's prefix.
func (o Options) SnapshotURL() (string, error) {
	if o.Snapshot == "" {
		return "", nil
	}
	prefix := fmt.Sprintf("gs://%s/%s/", o.Bucket, o.Shard)
	url := o.Snapshot
	if !strings.HasPrefix(url, "gs://") {
		url = prefix + url
	}
	name, under := strings.CutPrefix(url, prefix)
	if !under || !strings.HasSuffix(name, ".db") || strings.Contains(name, "/") {
		return "", fmt.Errorf("snapshot %q is not a snapshot of shard %s in bucket %s: want %s<UTC timestamp>.db or its name alone", o.Snapshot, o.Shard, o.Bucket, prefix)
	}
	return url, nil
}

func (o Options) check() error {
	var shards []string
	found := false
	for _, s := range o.Config.Kcp.AllShards() {
		shards = append(shards, s.Name)
		found = found || s.Name == o.Shard
	}
	switch {
	case !found:
		return fmt.Errorf("shard %q is not in the stack: it has %s", o.Shard, strings.Join(shards, ", "))
	case !bucketPattern.MatchString(o.Bucket):
		return fmt.Errorf("bucket %q is not a GCS bucket name (3 to 63 of a-z, 0-9, - and _)", o.Bucket)
	case !idPattern.MatchString(o.ID):
		return fmt.Errorf("restore id %q: want 1 to 16 of a-z, 0-9 and -, starting and ending with a letter or digit", o.ID)
	}
	for _, e := range o.Env {
		if !envName.MatchString(e.Name) {
			return fmt.Errorf("environment variable %q: not a valid name", e.Name)
		}
		if reservedEnv[e.Name] {
			return fmt.Errorf("environment variable %s is set by the restore itself", e.Name)
		}
	}
	_, err := o.SnapshotURL()
	return err
}

// Jobs are the restore's Jobs, one per member of the shard's etcd, in member order.
func Jobs(o Options) ([]*batchv1.Job, error) {
	if o.Config == nil {
		return nil, fmt.Errorf("etcdrestore: no stack config")
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	snapshot, _ := o.SnapshotURL()
	tag := o.GcloudImageTag
	if tag == "" {
		tag = o.Config.EtcdJobsGcloudImageTag()
	}
	images := map[etcdjobs.Image]string{
		etcdjobs.EtcdImage:   config.EtcdImage(o.Config.Versions.Etcd),
		etcdjobs.GcloudImage: config.GcloudImage(tag),
	}
	members := o.Config.Etcd.Members
	var jobs []*batchv1.Job
	for i := 0; i < members; i++ {
		steps := etcdjobs.RestoreSteps(etcdjobs.Restore{
			Shard:          o.Shard,
			Snapshot:       snapshot,
			Member:         naming.EtcdMemberName(o.Shard, i),
			PeerURL:        naming.EtcdPeerURL(o.Shard, i),
			InitialCluster: naming.EtcdInitialCluster(o.Shard, members),
			Token:          naming.EtcdRestoreToken(o.Shard, o.ID),
			DataDir:        naming.EtcdDataDir,
		})
		containers := make([]corev1.Container, len(steps))
		for j, s := range steps {
			containers[j] = container(s, images[s.Image], o.Bucket, o.Env)
		}
		labels := map[string]string{
			naming.EtcdJobLabel:     "restore",
			naming.EtcdRestoreLabel: o.ID,
			naming.ShardLabel:       o.Shard,
		}
		jobs = append(jobs, &batchv1.Job{
			TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{
				Name:      naming.EtcdRestoreJob(o.Shard, i, o.ID),
				Namespace: naming.NamespaceEtcd,
				Labels:    labels,
			},
			Spec: batchv1.JobSpec{
				// The steps can be run again: a retry finds what the first attempt set
				// aside and restores again (etcdjobs.SetAsideScript).
				BackoffLimit:          ptr.To[int32](2),
				ActiveDeadlineSeconds: ptr.To[int64](3600),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       o.podSpec(i, containers),
				},
			},
		})
	}
	return jobs, nil
}

// podSpec is a restore pod: restricted like the members' pods, placed where they run,
// with the member's claim and a scratch volume. The steps before the last are init
// containers, so a failing one stops the pod before the restore writes anything.
func (o Options) podSpec(member int, containers []corev1.Container) corev1.PodSpec {
	spec := corev1.PodSpec{
		RestartPolicy:   corev1.RestartPolicyNever,
		SecurityContext: RestrictedPodSecurity(),
		InitContainers:  containers[:len(containers)-1],
		Containers:      containers[len(containers)-1:],
		Volumes: []corev1.Volume{
			{Name: etcdjobs.ScratchVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: etcdjobs.DataVolume, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: naming.EtcdClaimName(o.Shard, member)}}},
		},
	}
	if o.Config.Platform == config.PlatformGKE {
		// The drill's account: it may read the bucket's objects and nothing else.
		spec.ServiceAccountName = naming.DrillServiceAccount
		// The members' pool: the volume's zone has its nodes, as the member had one.
		spec.NodeSelector = map[string]string{naming.EtcdPoolLabelKey: naming.EtcdPoolLabelValue}
		spec.Tolerations = []corev1.Toleration{{Key: naming.EtcdPoolTaintKey, Operator: corev1.TolerationOpEqual,
			Value: naming.EtcdPoolTaintValue, Effect: corev1.TaintEffectNoSchedule}}
	}
	return spec
}

// container is one step as a container: restricted, its root filesystem read-only.
func container(s etcdjobs.Step, image, bucket string, extra []etcdjobs.EnvVar) corev1.Container {
	c := corev1.Container{
		Name:    s.Name,
		Image:   image,
		Command: s.Command,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s.Resources.CPU), corev1.ResourceMemory: resource.MustParse(s.Resources.Memory)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(s.Resources.MemoryLimit)},
		},
		SecurityContext: RestrictedContainerSecurity(),
	}
	for _, m := range s.Mounts {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: m.Volume, MountPath: m.Path})
	}
	if s.Bucket {
		c.Env = append(c.Env, corev1.EnvVar{Name: "BUCKET", Value: bucket})
	}
	for _, e := range s.Env {
		c.Env = append(c.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	if s.Bucket {
		for _, e := range extra {
			c.Env = append(c.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
		}
	}
	return c
}

// RestrictedPodSecurity is the pod half of the restricted Pod Security Standard, as the
// program sets it on the members' pods (components/podspec.go): the members' user and
// group, which own their data, and RuntimeDefault seccomp.
func RestrictedPodSecurity() *corev1.PodSecurityContext {
	uid := int64(naming.NonRootUID)
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(uid),
		RunAsGroup:     ptr.To(uid),
		FSGroup:        ptr.To(uid),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// RestrictedContainerSecurity is the container half: no privilege escalation, every
// capability dropped, a read-only root filesystem.
func RestrictedContainerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
	}
}
