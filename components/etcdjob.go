package components

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	batchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"

	"github.com/railgrid/railgrid-kcp/components/etcdjobs"
)

// What the etcd CronJobs share: the snapshot and the restore drill (snapshots_gke.go) and
// the defragmentation (etcddefrag.go), each built from etcdjobs' steps.

// jobImages are the images of the jobs' steps: the members' etcd image, gcloud's and
// busybox's.
type jobImages struct {
	etcd, gcloud, shell string
}

// containers are the steps as containers, each under the restricted Pod Security
// Standard with a read-only root filesystem: what they write goes to the pod's volume.
func (im jobImages) containers(steps []etcdjobs.Step, bucket pulumi.StringOutput) corev1.ContainerArray {
	var out corev1.ContainerArray
	for _, s := range steps {
		image := im.etcd
		switch s.Image {
		case etcdjobs.GcloudImage:
			image = im.gcloud
		case etcdjobs.ShellImage:
			image = im.shell
		}
		c := &corev1.ContainerArgs{
			Name:            pulumi.String(s.Name),
			Image:           pulumi.String(image),
			Command:         pulumi.ToStringArray(s.Command),
			Resources:       containerResources(s.Resources.CPU, s.Resources.Memory, s.Resources.MemoryLimit),
			SecurityContext: restrictedContainerSecurity(),
		}
		var mounts corev1.VolumeMountArray
		for _, m := range s.Mounts {
			mounts = append(mounts, &corev1.VolumeMountArgs{Name: pulumi.String(m.Volume), MountPath: pulumi.String(m.Path)})
		}
		c.VolumeMounts = mounts
		var env corev1.EnvVarArray
		if s.Bucket {
			env = append(env, &corev1.EnvVarArgs{Name: pulumi.String("BUCKET"), Value: bucket})
		}
		for _, e := range s.Env {
			env = append(env, &corev1.EnvVarArgs{Name: pulumi.String(e.Name), Value: pulumi.String(e.Value)})
		}
		if len(env) > 0 {
			c.Env = env
		}
		if s.Sidecar {
			c.RestartPolicy = pulumi.String("Always")
		}
		out = append(out, c)
	}
	return out
}

// etcdJob is what the etcd CronJobs (snapshot, restore drill, defragmentation) differ in.
type etcdJob struct {
	schedule                            string
	backoffLimit, activeDeadlineSeconds int
	labels                              pulumi.StringMap
	// serviceAccount: empty for a job that calls no API (no token is mounted).
	serviceAccount string
	// volume is the pod's one emptyDir, mounted at /<volume> in every container; empty
	// for none.
	volume                     string
	initContainers, containers corev1.ContainerArray
}

// cronJobSpec is what every etcd CronJob is: never two runs at once, the last runs kept
// for a look, and a pod under the restricted Pod Security Standard that never restarts.
func (j etcdJob) cronJobSpec() *batchv1.CronJobSpecArgs {
	pod := &corev1.PodSpecArgs{
		RestartPolicy:   pulumi.String("Never"),
		SecurityContext: restrictedPodSecurity(),
		InitContainers:  j.initContainers,
		Containers:      j.containers,
	}
	if j.serviceAccount != "" {
		pod.ServiceAccountName = pulumi.String(j.serviceAccount)
	} else {
		pod.AutomountServiceAccountToken = pulumi.Bool(false)
	}
	if j.volume != "" {
		pod.Volumes = corev1.VolumeArray{emptyDir(j.volume)}
	}
	return &batchv1.CronJobSpecArgs{
		Schedule:                   pulumi.String(j.schedule),
		ConcurrencyPolicy:          pulumi.String("Forbid"),
		StartingDeadlineSeconds:    pulumi.Int(600),
		SuccessfulJobsHistoryLimit: pulumi.Int(3),
		FailedJobsHistoryLimit:     pulumi.Int(5),
		JobTemplate: &batchv1.JobTemplateSpecArgs{Spec: &batchv1.JobSpecArgs{
			BackoffLimit:          pulumi.Int(j.backoffLimit),
			ActiveDeadlineSeconds: pulumi.Int(j.activeDeadlineSeconds),
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: j.labels},
				Spec:     pod,
			},
		}},
	}
}

func emptyDir(name string) *corev1.VolumeArgs {
	return &corev1.VolumeArgs{Name: pulumi.String(name), EmptyDir: &corev1.EmptyDirVolumeSourceArgs{}}
}
