// Package planjobs renders the gke stack's etcd CronJobs, as the program declares them
// (the offline plan of Pulumi.gke.yaml under mocks), as one-off Jobs, as `kubectl create
// job --from=cronjob/<name>` makes them: the CronJob's job template with a name of its
// own. It changes nothing in the containers' commands, scripts or images; it only adds
// environment to the containers that run the gcloud image (a storage emulator's
// endpoint, for a cluster without Cloud Storage) and can name another ServiceAccount. So
// the end-to-end test runs the gke stack's own snapshot job against the kind stack's
// etcd, and tests/snapshots runs the same pods on loopback.
package planjobs

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Plan is the gke stack's plan: its config and the recording of its objects.
type Plan struct {
	Config *config.Config
	rec    *mockstack.Recording
}

// LoadGKE runs the program on a gke stack file (Pulumi.gke.yaml) under mocks, as the
// offline plan does.
func LoadGKE(stackFile string) (*Plan, error) {
	cfg, err := config.ParseStackFile(stackFile)
	if err != nil {
		return nil, err
	}
	if cfg.Platform != config.PlatformGKE {
		return nil, fmt.Errorf("%s is a %s stack, not gke: only the gke stack declares the snapshot jobs", stackFile, cfg.Platform)
	}
	rec, err := mockstack.RunStackFile("gke", stackFile, mockstack.Options{})
	if err != nil {
		return nil, err
	}
	return &Plan{Config: cfg, rec: rec}, nil
}

// GcloudImage and EtcdImage are the images the plan's jobs run.
func (p *Plan) GcloudImage() string { return config.GcloudImage(p.Config.EtcdJobsGcloudImageTag()) }
func (p *Plan) EtcdImage() string   { return config.EtcdImage(p.Config.Versions.Etcd) }

// CronJob is one of the plan's CronJobs.
func (p *Plan) CronJob(name string) (*batchv1.CronJob, error) {
	for _, o := range plan.KubernetesObjects(p.rec) {
		if o.Manifest["kind"] != "CronJob" {
			continue
		}
		if meta, _ := o.Manifest["metadata"].(map[string]any); meta["name"] != name {
			continue
		}
		raw, err := json.Marshal(o.Manifest)
		if err != nil {
			return nil, err
		}
		var cj batchv1.CronJob
		if err := json.Unmarshal(raw, &cj); err != nil {
			return nil, fmt.Errorf("CronJob %s: %w", name, err)
		}
		return &cj, nil
	}
	return nil, fmt.Errorf("the gke plan has no CronJob %s", name)
}

// Options say how a one-off Job differs from its CronJob's template.
type Options struct {
	// Name is the Job's name (required), as kubectl create job takes it.
	Name string
	// Env is set in every container that runs the gcloud image, after what the plan
	// sets; a variable the plan sets (BUCKET, say) is replaced in place.
	Env [][2]string
	// ServiceAccount replaces the pod's ServiceAccount (the gke stack's, bound to a
	// Google service account, exists only there); empty keeps the plan's.
	ServiceAccount string
	// Endpoint, when set, is the etcd client URL the Job must dial: Job refuses a job
	// whose commands dial any other, since it rewrites no command.
	Endpoint string
}

// Job is the plan's CronJob name as a one-off Job.
func (p *Plan) Job(cronJob string, o Options) (*batchv1.Job, error) {
	if o.Name == "" {
		return nil, fmt.Errorf("planjobs: the Job needs a name")
	}
	cj, err := p.CronJob(cronJob)
	if err != nil {
		return nil, err
	}
	tmpl := cj.Spec.JobTemplate
	job := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      o.Name,
			Namespace: cj.Namespace,
			// What kubectl create job --from=cronjob sets, the owner reference aside
			// (there is no CronJob where it runs).
			Annotations: map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
			Labels:      tmpl.Labels,
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	pod := &job.Spec.Template.Spec
	if o.ServiceAccount != "" {
		pod.ServiceAccountName = o.ServiceAccount
	}
	gcloud := p.GcloudImage()
	for _, list := range []*[]corev1.Container{&pod.InitContainers, &pod.Containers} {
		for i := range *list {
			c := &(*list)[i]
			if o.Endpoint != "" {
				for _, arg := range append(slices.Clone(c.Command), c.Args...) {
					if dialed, ok := strings.CutPrefix(arg, "--endpoints="); ok && dialed != o.Endpoint {
						return nil, fmt.Errorf("CronJob %s: container %s dials %s, not %s", cronJob, c.Name, dialed, o.Endpoint)
					}
				}
			}
			if c.Image == gcloud {
				c.Env = withEnv(c.Env, o.Env)
			}
		}
	}
	return job, nil
}

// SnapshotJob is the plan's snapshot CronJob of shard as a one-off Job that must dial
// the shard's etcd client Service, the name the kind stack's etcd has too.
func (p *Plan) SnapshotJob(shard string, o Options) (*batchv1.Job, error) {
	if o.Endpoint == "" {
		o.Endpoint = fmt.Sprintf("http://%s:%d", naming.EtcdServiceHost(shard), naming.EtcdClientPort)
	}
	return p.Job(naming.EtcdSnapshotCronJob(shard), o)
}

// Bucket is the BUCKET a Job's containers get (the plan's, or what Options.Env set).
func Bucket(job *batchv1.Job) string {
	for _, c := range append(slices.Clone(job.Spec.Template.Spec.InitContainers), job.Spec.Template.Spec.Containers...) {
		for _, e := range c.Env {
			if e.Name == "BUCKET" {
				return e.Value
			}
		}
	}
	return ""
}

func withEnv(env []corev1.EnvVar, extra [][2]string) []corev1.EnvVar {
	out := slices.Clone(env)
	for _, kv := range extra {
		i := slices.IndexFunc(out, func(e corev1.EnvVar) bool { return e.Name == kv[0] })
		if i >= 0 {
			out[i] = corev1.EnvVar{Name: kv[0], Value: kv[1]}
			continue
		}
		out = append(out, corev1.EnvVar{Name: kv[0], Value: kv[1]})
	}
	return out
}
