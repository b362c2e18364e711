package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/etcdrestore"
	"github.com/railgrid/railgrid-kcp/internal/plan"
)

// warningCollector keeps the warnings the API server sends with each response.
type warningCollector struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningCollector) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.warnings
	w.warnings = nil
	return out
}

var podGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// templatePod is a Pod built from one pod template of the plan, as its controller would
// create it (a StatefulSet adds a claim per volumeClaimTemplate).
type templatePod struct {
	owner string
	pod   *unstructured.Unstructured
}

// templatePods builds a Pod from every pod template among the plan's objects (not from
// patches of objects the cluster already has).
func templatePods(objects []plan.Object) ([]templatePod, error) {
	var out []templatePod
	for _, o := range objects {
		if o.Patch {
			continue // a patch of an object the cluster has (kind's CoreDNS): not our template
		}
		obj := &unstructured.Unstructured{Object: o.Manifest}
		var path []string
		switch obj.GetKind() {
		case "StatefulSet", "Deployment", "DaemonSet", "ReplicaSet", "Job":
			path = []string{"spec", "template"}
		case "CronJob":
			path = []string{"spec", "jobTemplate", "spec", "template"}
		default:
			continue
		}
		template, found, err := unstructured.NestedMap(obj.Object, path...)
		if err != nil || !found {
			return nil, fmt.Errorf("%s/%s: no pod template (%v)", obj.GetKind(), obj.GetName(), err)
		}
		spec, _ := template["spec"].(map[string]any)
		if obj.GetKind() == "StatefulSet" {
			claims, _, _ := unstructured.NestedSlice(obj.Object, "spec", "volumeClaimTemplates")
			volumes, _ := spec["volumes"].([]any)
			for _, c := range claims {
				name, _, _ := unstructured.NestedString(c.(map[string]any), "metadata", "name")
				volumes = append(volumes, map[string]any{"name": name, "persistentVolumeClaim": map[string]any{"claimName": name + "-" + obj.GetName() + "-0"}})
			}
			spec["volumes"] = volumes
		}
		meta, _ := template["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta["name"] = strings.ToLower(obj.GetKind()) + "-" + obj.GetName()
		meta["namespace"] = obj.GetNamespace()
		out = append(out, templatePod{
			owner: obj.GetKind() + "/" + obj.GetNamespace() + "/" + obj.GetName(),
			pod:   &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}},
		})
	}
	return out, nil
}

// admitPod creates the Pod with a server-side dry run and returns why it was refused,
// or the PodSecurity warnings it drew ("" when admitted cleanly).
func admitPod(ctx context.Context, dyn dynamic.Interface, warnings *warningCollector, pod *unstructured.Unstructured) string {
	warnings.take()
	_, err := dyn.Resource(podGVR).Namespace(pod.GetNamespace()).Create(ctx, pod.DeepCopy(), metav1.CreateOptions{
		DryRun:          []string{metav1.DryRunAll},
		FieldValidation: metav1.FieldValidationStrict,
	})
	var problems []string
	if err != nil {
		problems = append(problems, "refused: "+err.Error())
	}
	for _, w := range warnings.take() {
		if strings.Contains(w, "PodSecurity") {
			problems = append(problems, "warning: "+w)
		}
	}
	return strings.Join(problems, "; ")
}

// restoreJobObjects are cmd/etcdrestore's Jobs for every shard of a stack, as plan
// objects: they run in the etcd namespace too.
func restoreJobObjects(cfg *config.Config) ([]plan.Object, error) {
	var out []plan.Object
	for _, shard := range cfg.Kcp.AllShards() {
		jobs, err := etcdrestore.Jobs(etcdrestore.Options{Config: cfg, Shard: shard.Name, Bucket: "snapshots", ID: "conformance"})
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			raw, err := json.Marshal(j)
			if err != nil {
				return nil, err
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, err
			}
			out = append(out, plan.Object{Manifest: m})
		}
	}
	return out, nil
}

// TestPodTemplatesPassRestrictedPodSecurity builds a Pod from every pod template of both
// stacks (the etcd StatefulSets, the snapshot and drill CronJobs) and from the restore
// Jobs cmd/etcdrestore prints for each shard, and creates it with a
// server-side dry run in its namespace, as the program declares that namespace, on a real
// kube-apiserver with its PodSecurity admission. The etcd namespace enforces
// `restricted`, so a template that breaks the level is refused; any PodSecurity warning
// also fails the test. The negative case, a template with a privileged container, must
// be refused.
func TestPodTemplatesPassRestrictedPodSecurity(t *testing.T) {
	servers, root := requireServers(t)
	var pods []templatePod
	namespaces := map[string]*unstructured.Unstructured{}
	serviceAccounts := map[string]*unstructured.Unstructured{}
	var serviceCIDR string
	for _, stack := range stacks {
		p, err := renderStack(root, stack)
		if err != nil {
			t.Fatalf("stack %s: %v", stack, err)
		}
		serviceCIDR = p.serviceCIDR.String()
		restores, err := restoreJobObjects(p.cfg)
		if err != nil {
			t.Fatalf("stack %s: %v", stack, err)
		}
		built, err := templatePods(append(append([]plan.Object{}, p.objects...), restores...))
		if err != nil {
			t.Fatalf("stack %s: %v", stack, err)
		}
		for _, tp := range built {
			tp.owner = stack + ": " + tp.owner
			pods = append(pods, tp)
		}
		for _, o := range p.objects {
			obj := &unstructured.Unstructured{Object: o.Manifest}
			switch obj.GetKind() {
			case "Namespace":
				namespaces[stack+"/"+obj.GetName()] = obj
			case "ServiceAccount":
				serviceAccounts[stack+"/"+obj.GetNamespace()+"/"+obj.GetName()] = obj
			}
		}
	}
	if len(pods) < 14 {
		t.Fatalf("found %d pod templates, want the etcd StatefulSets of both stacks, gke's four CronJobs and the restore Jobs (2 on kind, 6 on gke)", len(pods))
	}

	ctx := testContext(t)
	_, admin := startAPIServer(t, ctx, servers, serviceCIDR)
	warnings := &warningCollector{}
	cfg := rest.CopyConfig(admin)
	cfg.WarningHandler = warnings
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := newClient(admin)
	if err != nil {
		t.Fatal(err)
	}

	// Each stack's pods are checked against that stack's own namespaces.
	for _, stack := range stacks {
		t.Run(stack, func(t *testing.T) {
			for key, ns := range namespaces {
				if strings.HasPrefix(key, stack+"/") {
					if _, err := cl.apply(ctx, ns, true); err != nil {
						t.Fatalf("namespace %s: %v", ns.GetName(), err)
					}
					// What kube-controller-manager creates in every namespace.
					sa := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ServiceAccount",
						"metadata": map[string]any{"name": "default", "namespace": ns.GetName()}}}
					if _, err := cl.apply(ctx, sa, true); err != nil {
						t.Fatal(err)
					}
				}
			}
			for key, sa := range serviceAccounts {
				if strings.HasPrefix(key, stack+"/") {
					if _, err := cl.apply(ctx, sa, true); err != nil {
						t.Fatalf("service account %s: %v", sa.GetName(), err)
					}
				}
			}
			checked := 0
			for _, tp := range pods {
				if !strings.HasPrefix(tp.owner, stack+": ") {
					continue
				}
				checked++
				if problem := admitPod(ctx, dyn, warnings, tp.pod); problem != "" {
					t.Errorf("%s: %s", tp.owner, problem)
				}
			}
			t.Logf("%d pod templates checked under their namespaces' Pod Security labels", checked)

			// Negative: the same template with a privileged container is refused.
			privileged := pods[0].pod.DeepCopy()
			for _, tp := range pods {
				if strings.HasPrefix(tp.owner, stack+": ") {
					privileged = tp.pod.DeepCopy()
					break
				}
			}
			containers, _, _ := unstructured.NestedSlice(privileged.Object, "spec", "containers")
			first := containers[0].(map[string]any)
			sc, _ := first["securityContext"].(map[string]any)
			if sc == nil {
				sc = map[string]any{}
			}
			sc["privileged"] = true
			sc["allowPrivilegeEscalation"] = true
			first["securityContext"] = sc
			if err := unstructured.SetNestedSlice(privileged.Object, containers, "spec", "containers"); err != nil {
				t.Fatal(err)
			}
			problem := admitPod(ctx, dyn, warnings, privileged)
			if !strings.Contains(problem, `violates PodSecurity "restricted`) {
				t.Errorf("a privileged container in namespace %s was not refused by PodSecurity (got %q)", privileged.GetNamespace(), problem)
			}
		})
	}
}
