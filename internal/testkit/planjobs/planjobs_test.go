package planjobs

import (
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/railgrid/railgrid-kcp/naming"
)

var (
	loadOnce sync.Once
	loaded   *Plan
	loadErr  error
)

func gkePlan(t *testing.T) *Plan {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = LoadGKE(filepath.Join("..", "..", "..", "Pulumi.gke.yaml")) })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

var emulator = [][2]string{
	{"CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE", "http://10.244.0.1:4443/"},
	{"CLOUDSDK_AUTH_DISABLE_CREDENTIALS", "True"},
}

// The one-off Job is the CronJob's job template, as kubectl create job --from=cronjob
// makes it: the template's spec and labels, the manual-instantiation annotation, the
// CronJob's namespace. Every container keeps its name, image, command, arguments,
// mounts and security context; only the containers of the gcloud image get the extra
// environment, after the plan's, and the pod the ServiceAccount asked for.
func TestSnapshotJobIsTheCronJobsTemplateWithTheEmulatorsEnvironment(t *testing.T) {
	p := gkePlan(t)
	cj, err := p.CronJob(naming.EtcdSnapshotCronJob("root"))
	if err != nil {
		t.Fatal(err)
	}
	job, err := p.SnapshotJob("root", Options{Name: "snapshot-e2e", Env: emulator, ServiceAccount: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if job.Name != "snapshot-e2e" || job.Namespace != naming.NamespaceEtcd || job.Annotations["cronjob.kubernetes.io/instantiate"] != "manual" {
		t.Errorf("job %s/%s annotations %v", job.Namespace, job.Name, job.Annotations)
	}
	want, got := cj.Spec.JobTemplate.Spec.Template.Spec, job.Spec.Template.Spec
	if got.ServiceAccountName != "default" || want.ServiceAccountName != naming.SnapshotServiceAccount {
		t.Errorf("service account %q (plan %q)", got.ServiceAccountName, want.ServiceAccountName)
	}
	if !reflect.DeepEqual(job.Spec.Template.Labels, cj.Spec.JobTemplate.Spec.Template.Labels) || job.Spec.Template.Labels[naming.EtcdClientLabel] != "root" {
		t.Errorf("pod labels %v, want the plan's (with the etcd client label)", job.Spec.Template.Labels)
	}
	if *job.Spec.BackoffLimit != *cj.Spec.JobTemplate.Spec.BackoffLimit || !reflect.DeepEqual(got.Volumes, want.Volumes) || !reflect.DeepEqual(got.SecurityContext, want.SecurityContext) {
		t.Error("the job's spec differs from the template's")
	}
	all := func(s corev1.PodSpec) []corev1.Container {
		return append(append([]corev1.Container{}, s.InitContainers...), s.Containers...)
	}
	wantC, gotC := all(want), all(got)
	if len(gotC) != len(wantC) || len(gotC) != 4 {
		t.Fatalf("%d containers, want the plan's %d (connect, save, check, upload)", len(gotC), len(wantC))
	}
	for i := range wantC {
		w, g := wantC[i], gotC[i]
		if g.Name != w.Name || g.Image != w.Image || !reflect.DeepEqual(g.Command, w.Command) || !reflect.DeepEqual(g.Args, w.Args) ||
			!reflect.DeepEqual(g.VolumeMounts, w.VolumeMounts) || !reflect.DeepEqual(g.SecurityContext, w.SecurityContext) || !reflect.DeepEqual(g.Resources, w.Resources) {
			t.Errorf("container %s differs from the plan's", w.Name)
		}
		if w.Image != p.GcloudImage() {
			if !reflect.DeepEqual(g.Env, w.Env) {
				t.Errorf("container %s (image %s) got environment %v", w.Name, w.Image, g.Env)
			}
			continue
		}
		if !reflect.DeepEqual(g.Env[:len(w.Env)], w.Env) {
			t.Errorf("container %s: the plan's environment changed", w.Name)
		}
		extra := g.Env[len(w.Env):]
		if len(extra) != 2 || extra[0].Name != emulator[0][0] || extra[0].Value != emulator[0][1] || extra[1].Name != emulator[1][0] {
			t.Errorf("container %s: extra environment %v, want %v", w.Name, extra, emulator)
		}
		if !strings.Contains(strings.Join(g.Command, " "), "gcloud storage cp --no-clobber") {
			t.Errorf("container %s does not run the upload script", g.Name)
		}
	}
	plain, err := p.Job(naming.EtcdSnapshotCronJob("root"), Options{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if b := Bucket(job); b == "" || b != Bucket(plain) || b != plain.Spec.Template.Spec.Containers[0].Env[0].Value {
		t.Errorf("BUCKET %q: want the plan's", b)
	}
}

// A variable the plan sets is replaced where it is, not added twice; the plan's
// ServiceAccount stays when none is asked for.
func TestEnvironmentReplacesThePlansVariables(t *testing.T) {
	p := gkePlan(t)
	job, err := p.SnapshotJob("alpha", Options{Name: "s", Env: [][2]string{{"BUCKET", "e2e-bucket"}}})
	if err != nil {
		t.Fatal(err)
	}
	upload := job.Spec.Template.Spec.Containers[0]
	count := 0
	for _, e := range upload.Env {
		if e.Name == "BUCKET" {
			count++
		}
	}
	if count != 1 || upload.Env[0].Name != "BUCKET" || Bucket(job) != "e2e-bucket" {
		t.Errorf("upload env %v: want BUCKET=e2e-bucket once, first", upload.Env)
	}
	if job.Spec.Template.Spec.ServiceAccountName != naming.SnapshotServiceAccount {
		t.Errorf("service account %q, want the plan's", job.Spec.Template.Spec.ServiceAccountName)
	}
}

// The Job rewrites no command, so a cluster whose etcd has another address is refused
// instead of being snapshotted from the wrong place; a Job without a name is refused.
func TestAnotherEndpointIsRefused(t *testing.T) {
	p := gkePlan(t)
	_, err := p.SnapshotJob("root", Options{Name: "s", Endpoint: "http://etcd.example:2379"})
	if err == nil || !strings.Contains(err.Error(), "container connect dials http://etcd-root.etcd.svc.cluster.local:2379, not http://etcd.example:2379") {
		t.Errorf("got %v", err)
	}
	if _, err := p.SnapshotJob("root", Options{}); err == nil {
		t.Error("a Job without a name was rendered")
	}
	if _, err := p.Job("etcd-gamma-snapshot", Options{Name: "s"}); err == nil || !strings.Contains(err.Error(), "no CronJob etcd-gamma-snapshot") {
		t.Errorf("got %v", err)
	}
}
