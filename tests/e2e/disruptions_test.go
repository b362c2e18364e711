//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// What GKE does on its own, made real against the gke plan's kcp servers and the kind
// stack's etcd: the gke plan's objects (applyGKEPlanKcpObjects) go to a kcp pool of kwok
// nodes over three zones, where the real scheduler places the pods the real operator
// writes, the real disruption controller keeps their budgets, and the API server answers
// evictions; the kind stack's etcd is defragmented by its own CronJob's Job on the real
// node while kcp serves.

// kcpPoolNodes are the gke plan's kcp pool: kwok nodes with the label the plan's kcp
// servers select, over the three zones, with two nodes in the last zone, so that once
// the other zones are gone a node without a replica is left there, and only the zone
// spread can keep a second replica out of that zone.
var kcpPoolNodes = []struct{ name, zone string }{
	{kwokNodePrefix + "kcp-a", "zone-a"}, {kwokNodePrefix + "kcp-b", "zone-b"},
	{kwokNodePrefix + "kcp-c", "zone-c"}, {kwokNodePrefix + "kcp-c2", "zone-c"},
}

// gkePlanServers are the Deployments the operator writes for the gke plan's kcp servers,
// with the operator's labels on their pods.
var gkePlanServers = []struct{ deployment, component, instance string }{
	{naming.RootShardDeployment(naming.RootShardName), naming.ComponentRootShard, naming.RootShardName},
	{naming.RootShardProxyDeployment(naming.RootShardName), naming.ComponentRootShardProxy, naming.RootShardName},
	{naming.ShardDeployment("alpha"), naming.ComponentShard, "alpha"},
	{naming.FrontProxyDeployment(naming.FrontProxyName), naming.ComponentFrontProxy, naming.FrontProxyName},
}

// createKcpPool creates the kcp pool's nodes with the plan's node selector as labels, and
// returns a func that removes those that are left.
func createKcpPool(ctx context.Context, c *cluster, selector map[string]string) (remove func(), err error) {
	for _, n := range kcpPoolNodes {
		l := map[string]string{
			"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			corev1.LabelTopologyZone: n.zone, corev1.LabelTopologyRegion: "e2e", kwokNodeLabel: kwokNodeLabelValue,
		}
		for k, v := range selector {
			l[k] = v
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: l,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}}}
		if _, err := c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
			return nil, fmt.Errorf("creating the kcp pool's node %s: %w", n.name, err)
		}
	}
	return func() {
		for _, n := range kcpPoolNodes {
			_ = c.kube.CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{})
		}
	}, nil
}

// serverPods are one server's pods in the gke plan's namespace that are not terminating.
func serverPods(ctx context.Context, c *cluster, component, instance string) ([]corev1.Pod, error) {
	sel := labels.SelectorFromSet(labels.Set{naming.LabelComponent: component, naming.LabelInstance: instance}).String()
	list, err := c.kube.CoreV1().Pods(gkePlanNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeZones maps every node to its zone.
func nodeZones(ctx context.Context, c *cluster) (map[string]string, error) {
	nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, n := range nodes.Items {
		out[n.Name] = n.Labels[corev1.LabelTopologyZone]
	}
	return out, nil
}

// placement says where a server's pods are: "zone-a(node) zone-b(node) pending".
func placement(pods []corev1.Pod, zones map[string]string) string {
	var parts []string
	for _, p := range pods {
		switch {
		case p.Spec.NodeName == "":
			parts = append(parts, "pending")
		case podReady(&p):
			parts = append(parts, zones[p.Spec.NodeName]+"("+p.Spec.NodeName+")")
		default:
			parts = append(parts, zones[p.Spec.NodeName]+"("+p.Spec.NodeName+", not ready)")
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// waitSpread waits until every gke plan server has want Ready pods in distinct zones,
// none in the zones gone, and returns where they are.
func waitSpread(ctx context.Context, c *cluster, want int, gone ...string) (map[string]string, error) {
	where := map[string]string{}
	err := testenv.WaitFor(ctx, 3*time.Minute, nil, func() (bool, error) {
		zones, err := nodeZones(ctx, c)
		if err != nil {
			return false, nil
		}
		done := true
		for _, s := range gkePlanServers {
			pods, err := serverPods(ctx, c, s.component, s.instance)
			if err != nil {
				return false, nil
			}
			where[s.deployment] = placement(pods, zones)
			seen := map[string]bool{}
			for _, p := range pods {
				z := zones[p.Spec.NodeName]
				if !podReady(&p) || slices.Contains(gone, z) {
					continue
				}
				if seen[z] {
					return false, fmt.Errorf("%s has two Ready pods in %s: %s", s.deployment, z, where[s.deployment])
				}
				seen[z] = true
			}
			if len(seen) != want || len(pods) != want {
				done = false
			}
		}
		return done, nil
	})
	if err != nil {
		return where, fmt.Errorf("%v; pods: %v", err, where)
	}
	return where, nil
}

// gkePlanKcpServersSpreadOverZones: the operator copies the gke plan's deployment
// templates into its Deployments, and the scheduler puts each server's two replicas in
// two zones.
func gkePlanKcpServersSpreadOverZones(t *testing.T, l *lifecycle) {
	for _, s := range gkePlanServers {
		var dep *appsv1.Deployment
		if err := testenv.WaitFor(l.ctx, 3*time.Minute, nil, func() (bool, error) {
			var err error
			dep, err = l.c.kube.AppsV1().Deployments(gkePlanNamespace).Get(l.ctx, s.deployment, metav1.GetOptions{})
			return err == nil, nil
		}); err != nil {
			t.Fatalf("the operator wrote no Deployment %s/%s: %v", gkePlanNamespace, s.deployment, err)
		}
		want := l.verify.gkePlanTemplates[s.deployment]
		got := dep.Spec.Template.Spec
		if !equalJSON(want.NodeSelector, got.NodeSelector) || !equalJSON(want.Affinity, got.Affinity) ||
			!equalJSON(want.TopologySpreadConstraints, got.TopologySpreadConstraints) {
			t.Errorf("the operator's Deployment %s does not carry the plan's template:\n  plan: %s\n  Deployment: nodeSelector %v, affinity %s, topologySpreadConstraints %s",
				s.deployment, asJSON(want), got.NodeSelector, asJSON(got.Affinity), asJSON(got.TopologySpreadConstraints))
		}
	}
	where, err := waitSpread(l.ctx, l.c, 2)
	if err != nil {
		t.Fatalf("the gke plan's kcp servers did not spread over two zones each: %v", err)
	}
	for _, s := range gkePlanServers {
		t.Logf("%s: the Deployment carries the plan's template; pods in %s", s.deployment, where[s.deployment])
	}
}

// kcpBudgetsRefuseASecondEviction: a drain of the root shard's nodes (cordoned first,
// as kubectl drain does) may evict one replica; the API server refuses the second with
// 429 until the first one's replacement is Ready again.
func kcpBudgetsRefuseASecondEviction(t *testing.T, l *lifecycle) {
	root := gkePlanServers[0]
	budget := func() (*policyv1.PodDisruptionBudget, error) {
		return l.c.kube.PolicyV1().PodDisruptionBudgets(gkePlanNamespace).Get(l.ctx, root.deployment, metav1.GetOptions{})
	}
	waitAllowed := func(what string) {
		t.Helper()
		var state string
		if err := testenv.WaitFor(l.ctx, 2*time.Minute, nil, func() (bool, error) {
			pdb, err := budget()
			if err != nil {
				state = err.Error()
				return false, nil
			}
			state = fmt.Sprintf("%d healthy of %d, %d disruptions allowed", pdb.Status.CurrentHealthy, pdb.Status.ExpectedPods, pdb.Status.DisruptionsAllowed)
			return pdb.Status.DisruptionsAllowed == 1 && pdb.Status.CurrentHealthy == 2, nil
		}); err != nil {
			t.Fatalf("%s: the budget %s never allowed one disruption: %s", what, root.deployment, state)
		}
	}
	cordon := func(unschedulable bool) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, unschedulable)
		for _, n := range kcpPoolNodes {
			if _, err := l.c.kube.CoreV1().Nodes().Patch(l.ctx, n.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
				t.Fatalf("cordoning %s: %v", n.name, err)
			}
		}
	}
	evict := func(name string) error {
		return l.c.kube.PolicyV1().Evictions(gkePlanNamespace).Evict(l.ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gkePlanNamespace}})
	}
	waitAllowed("before the drain")
	pods, err := serverPods(l.ctx, l.c, root.component, root.instance)
	if err != nil || len(pods) != 2 {
		t.Fatalf("the root shard's pods: %d, %v", len(pods), err)
	}
	cordon(true)
	defer cordon(false)
	if err := evict(pods[0].Name); err != nil {
		t.Fatalf("evicting the first replica %s: %v", pods[0].Name, err)
	}
	t.Logf("first eviction (%s): allowed", pods[0].Name)
	err = evict(pods[1].Name)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting the second replica %s while the first one's replacement cannot start: %v, want 429 Too Many Requests", pods[1].Name, err)
	}
	t.Logf("second eviction (%s) while the replacement is Pending: refused, 429: %v", pods[1].Name, err)
	cordon(false)
	started := time.Now()
	waitAllowed("after the replacement")
	if err := evict(pods[1].Name); err != nil {
		t.Fatalf("evicting %s once the replacement is Ready: %v", pods[1].Name, err)
	}
	t.Logf("second eviction (%s): allowed once the replacement was Ready (%s after the uncordon)", pods[1].Name, time.Since(started).Round(100*time.Millisecond))
	if _, err := waitSpread(l.ctx, l.c, 2); err != nil {
		t.Fatalf("after the drain: %v", err)
	}
}

// gkePlanKcpServersNeverPackIntoTheZonesLeft: a zone lost, each server's replica there
// comes back in the zone that has none; a second zone lost, the replacements stay
// Pending rather than join their sibling in the last zone, where a free node is left.
func gkePlanKcpServersNeverPackIntoTheZonesLeft(t *testing.T, l *lifecycle) {
	loseZone := func(zone string) {
		t.Helper()
		for _, n := range kcpPoolNodes {
			if n.zone != zone {
				continue
			}
			if err := l.c.kube.CoreV1().Nodes().Delete(l.ctx, n.name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("deleting node %s: %v", n.name, err)
			}
			// What the node lifecycle controller does to a lost node's pods, minutes later.
			pods, err := l.c.kube.CoreV1().Pods(gkePlanNamespace).List(l.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.name})
			if err != nil {
				t.Fatal(err)
			}
			zero := int64(0)
			for _, p := range pods.Items {
				_ = l.c.kube.CoreV1().Pods(gkePlanNamespace).Delete(l.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
		}
	}
	loseZone("zone-a")
	where, err := waitSpread(l.ctx, l.c, 2, "zone-a")
	if err != nil {
		t.Fatalf("zone-a lost: %v", err)
	}
	for _, s := range gkePlanServers {
		t.Logf("zone-a lost: %s in %s", s.deployment, where[s.deployment])
	}
	loseZone("zone-b")
	pending := map[string]string{}
	// packedOrPending: each server has one Ready pod in zone-c and one Pending, refused by
	// its zone spread; never two in zone-c.
	packedOrPending := func() (bool, error) {
		zones, err := nodeZones(l.ctx, l.c)
		if err != nil {
			return false, nil
		}
		for _, s := range gkePlanServers {
			pods, err := serverPods(l.ctx, l.c, s.component, s.instance)
			if err != nil {
				return false, nil
			}
			where[s.deployment] = placement(pods, zones)
			var inC, refused int
			for _, p := range pods {
				if zones[p.Spec.NodeName] == "zone-c" {
					inC++
				}
				for _, cond := range p.Status.Conditions {
					if p.Spec.NodeName == "" && cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable &&
						strings.Contains(cond.Message, "topology spread constraints") {
						refused++
						pending[s.deployment] = cond.Message
					}
				}
			}
			if inC > 1 {
				return false, fmt.Errorf("%s packed two replicas into zone-c: %s", s.deployment, where[s.deployment])
			}
			if inC != 1 || refused != 1 || len(pods) != 2 {
				return false, nil
			}
		}
		return true, nil
	}
	if err := testenv.WaitFor(l.ctx, 2*time.Minute, nil, packedOrPending); err != nil {
		t.Fatalf("zone-b lost too: %v; pods: %v", err, where)
	}
	// A while longer: the scheduler retries, and must keep refusing.
	time.Sleep(5 * time.Second)
	if ok, err := packedOrPending(); !ok || err != nil {
		t.Fatalf("zone-b lost too, 5s later: %v; pods: %v", err, where)
	}
	for _, s := range gkePlanServers {
		t.Logf("zones a and b lost: %s in %s; the other replica Pending: %s", s.deployment, where[s.deployment], pending[s.deployment])
	}
}

// defragLine is the script's line for one member (etcdjobs.DefragScript).
var defragLine = regexp.MustCompile(`defragmented (\S+) \((leader|follower)\): database size (\d+) -> (\d+) bytes`)

// etcdShrinksWhenItsScheduledDefragmentationRuns: after writes and deletes through kcp,
// and the compaction that kcp's storage runs every five minutes (done here at once), the
// root shard's etcd database file keeps its size; a Job of the stack's own
// defragmentation CronJob, as `kubectl create job --from=cronjob/...` makes it, shrinks
// it, measured with etcdctl, while kcp keeps answering reads through the front proxy.
func etcdShrinksWhenItsScheduledDefragmentationRuns(t *testing.T, l *lifecycle) {
	ctx, c := l.ctx, l.c
	member := naming.EtcdName(naming.RootShardName) + "-0"
	status := func() (revision, dbSize int64) {
		t.Helper()
		out, err := kubectl(ctx, l.bins.kubectl, c.kubeconfig, "-n", naming.NamespaceEtcd, "exec", member, "--",
			"/usr/local/bin/etcdctl", "endpoint", "status", "-w", "json")
		if err != nil {
			t.Fatal(err)
		}
		var st []struct {
			Status struct {
				Header struct {
					Revision int64 `json:"revision"`
				} `json:"header"`
				DbSize int64 `json:"dbSize"`
			} `json:"Status"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil || len(st) != 1 {
			t.Fatalf("etcdctl endpoint status: %v: %s", err, out)
		}
		return st[0].Status.Header.Revision, st[0].Status.DbSize
	}
	const workspace = "e2e-defrag"
	if _, err := makeWorkspaceOnShard(ctx, l.env, workspace, naming.RootShardName); err != nil {
		t.Fatal(err)
	}
	probe, err := writeKcpObject(ctx, l.env, workspace, "probe", map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kcpClient(ctx, l.env, "root:"+workspace)
	if err != nil {
		t.Fatal(err)
	}
	_, startSize := status()
	value := strings.Repeat("railgrid-kcp defragmentation ", 200_000/29)
	const objects = 40
	for i := range objects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bulk-%d", i)}, Data: map[string]string{"v": value}}
		if _, err := kube.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("writing %s through kcp: %v", cm.Name, err)
		}
	}
	for i := range objects {
		if err := kube.CoreV1().ConfigMaps("default").Delete(ctx, fmt.Sprintf("bulk-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting bulk-%d through kcp: %v", i, err)
		}
	}
	revision, _ := status()
	if out, err := kubectl(ctx, l.bins.kubectl, c.kubeconfig, "-n", naming.NamespaceEtcd, "exec", member, "--",
		"/usr/local/bin/etcdctl", "compact", strconv.FormatInt(revision, 10), "--physical"); err != nil {
		t.Fatalf("compacting: %v: %s", err, out)
	}
	_, before := status()
	t.Logf("%s: database %d bytes before the writes, %d after %d objects of %d bytes written and deleted through kcp and compacted",
		member, startSize, before, objects, len(value))
	if before < startSize+objects*int64(len(value))/2 {
		t.Fatalf("the database did not grow with the writes (%d -> %d bytes): nothing to defragment", startSize, before)
	}

	// kcp serves throughout: reads through the front proxy, every 100ms.
	var served, failed atomic.Int64
	var lastErr atomic.Value
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if err := probe.readBack(ctx, l.env); err != nil {
				failed.Add(1)
				lastErr.Store(err.Error())
			} else {
				served.Add(1)
			}
		}
	}()
	logs := runCronJobOnce(t, ctx, c, naming.NamespaceEtcd, naming.EtcdDefragCronJob(naming.RootShardName))
	close(stop)
	<-polled
	m := defragLine.FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("the defragmentation's log has no line for a member:\n%s", logs)
	}
	_, after := status()
	t.Logf("the Job's log: %s", strings.TrimSpace(logs))
	t.Logf("%s (etcdctl endpoint status): %d bytes before the defragmentation, %d after", member, before, after)
	if m[2] != "leader" || !strings.Contains(m[1], naming.EtcdMemberHost(naming.RootShardName, 0)) {
		t.Errorf("the one member should be defragmented as the leader: %s", m[0])
	}
	if logBefore, _ := strconv.ParseInt(m[3], 10, 64); logBefore < before/2 {
		t.Errorf("the Job saw %d bytes before, etcdctl %d", logBefore, before)
	}
	if after > before/2 {
		t.Errorf("the database did not shrink: %d -> %d bytes", before, after)
	}
	t.Logf("kcp served %d reads through the front proxy during the defragmentation, %d failed", served.Load(), failed.Load())
	if failed.Load() > 0 || served.Load() == 0 {
		t.Errorf("kcp did not serve throughout: %d reads served, %d failed (last: %v)", served.Load(), failed.Load(), lastErr.Load())
	}
}

// runCronJobOnce runs a Job of a CronJob's template, as `kubectl create job --from` does,
// waits until it has succeeded, deletes it, and returns its pod's log.
func runCronJobOnce(t *testing.T, ctx context.Context, c *cluster, namespace, name string) string {
	t.Helper()
	cj, err := c.kube.BatchV1().CronJobs(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-e2e", Namespace: namespace,
			Annotations:     map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
			Labels:          cj.Spec.JobTemplate.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))},
		},
		Spec: cj.Spec.JobTemplate.Spec,
	}
	if job, err = c.kube.BatchV1().Jobs(namespace).Create(ctx, job, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
		t.Fatal(err)
	}
	background := metav1.DeletePropagationBackground
	defer func() {
		_ = c.kube.BatchV1().Jobs(namespace).Delete(context.Background(), job.Name, metav1.DeleteOptions{PropagationPolicy: &background})
	}()
	var state string
	err = testenv.WaitFor(ctx, 3*time.Minute, nil, func() (bool, error) {
		got, err := c.kube.BatchV1().Jobs(namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		state = fmt.Sprintf("%d active, %d succeeded, %d failed", got.Status.Active, got.Status.Succeeded, got.Status.Failed)
		if got.Status.Failed > 0 {
			return false, fmt.Errorf("the Job failed")
		}
		return got.Status.Succeeded > 0, nil
	})
	logs := jobLogs(ctx, c, namespace, job)
	if err != nil {
		t.Fatalf("Job %s/%s: %v (%s); its log:\n%s", namespace, job.Name, err, state, logs)
	}
	return logs
}

// jobLogs is the log of a Job's pods.
func jobLogs(ctx context.Context, c *cluster, namespace string, job *batchv1.Job) string {
	pods, err := c.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	if err != nil {
		return err.Error()
	}
	var out strings.Builder
	for _, p := range pods.Items {
		raw, err := c.kube.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			fmt.Fprintf(&out, "%s: %v\n", p.Name, err)
			continue
		}
		out.Write(raw)
	}
	return out.String()
}

// gkePlanTemplates reads the pod templates of the gke plan's kcp objects, by the name of
// the Deployment the operator writes for each.
func gkePlanTemplates(objs []*unstructured.Unstructured) (map[string]corev1.PodSpec, error) {
	out := map[string]corev1.PodSpec{}
	read := func(u *unstructured.Unstructured, deployment string, path ...string) error {
		raw, ok, _ := unstructured.NestedMap(u.Object, append(path, "deploymentTemplate", "spec", "template", "spec")...)
		if !ok {
			return fmt.Errorf("the gke plan's %s %s has no %s.deploymentTemplate", u.GetKind(), u.GetName(), strings.Join(path, "."))
		}
		var spec corev1.PodSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
			return err
		}
		out[deployment] = spec
		return nil
	}
	for _, u := range objs {
		var err error
		switch u.GetKind() {
		case "RootShard":
			if err = read(u, naming.RootShardDeployment(u.GetName()), "spec"); err == nil {
				err = read(u, naming.RootShardProxyDeployment(u.GetName()), "spec", "proxy")
			}
		case "Shard":
			err = read(u, naming.ShardDeployment(u.GetName()), "spec")
		case "FrontProxy":
			err = read(u, naming.FrontProxyDeployment(u.GetName()), "spec")
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func asJSON(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

// equalJSON compares two values as the API would store them.
func equalJSON(a, b any) bool { return asJSON(a) == asJSON(b) }
