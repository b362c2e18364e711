package tests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

// containerEnv is a container's environment as a map.
func containerEnv(t *testing.T, c map[string]any) map[string]string {
	t.Helper()
	env := map[string]string{}
	list, _ := c["env"].([]any)
	for _, e := range list {
		m := e.(map[string]any)
		value, _ := m["value"].(string)
		env[m["name"].(string)] = value
	}
	return env
}

// jobContainers are a CronJob's containers by name.
func jobContainers(t *testing.T, rec *mockstack.Recording, name string) map[string]map[string]any {
	t.Helper()
	pod := get(t, inputs(object(t, rec, "CronJob", name)), "spec.jobTemplate.spec.template.spec").(map[string]any)
	out := map[string]map[string]any{}
	for _, c := range containersOf(pod) {
		out[c["name"].(string)] = c
	}
	return out
}

// The upload never needs storage.objects.delete: parallel composite uploads are off
// (they compose temporary objects and delete them: "Parallel composite uploads",
// https://cloud.google.com/storage/docs/parallel-composite-uploads, and the gcloud
// property storage/parallel_composite_upload_enabled,
// https://cloud.google.com/sdk/gcloud/reference/config/set), and a retry after an upload
// that landed skips instead of overwriting (--no-clobber,
// https://cloud.google.com/sdk/gcloud/reference/storage/cp). gcloud keeps its
// configuration on the pod's volume: the non-root user has no home.
func TestGKESnapshotUploadNeedsNoDelete(t *testing.T) {
	rec := runStack(t, "gke")
	for _, shard := range []string{"root", "alpha"} {
		for job, containers := range map[string][]string{"etcd-" + shard + "-snapshot": {"upload"}, "etcd-" + shard + "-restore-drill": {"fetch"}} {
			for _, name := range containers {
				c := jobContainers(t, rec, job)[name]
				require.NotNil(t, c, "%s has no container %s", job, name)
				env := containerEnv(t, c)
				require.Equal(t, "False", env["CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_ENABLED"], job)
				mount := getString(t, c, "volumeMounts[0].mountPath")
				require.Equal(t, mount+"/gcloud", env["CLOUDSDK_CONFIG"], job)
				require.Equal(t, shard, env["SHARD"], job)
				require.Equal(t, "kcp-etcd-snapshots-5eed0001", env["BUCKET"], job)
			}
		}
		upload := jobContainers(t, rec, "etcd-"+shard+"-snapshot")["upload"]
		script := stringList(t, upload, "command")
		require.Len(t, script, 3)
		require.Equal(t, []string{"bash", "-c"}, script[:2])
		require.Contains(t, script[2], `gcloud storage cp --no-clobber /backup/snapshot.db "${target}"`)
	}
}

// The google-cloud-cli image installs python3 only where the machine is not x86_64
// (its Dockerfile installs python3 for arm only; on x86_64 gcloud runs its bundled
// Python, which is not on PATH). No script of the jobs may call python. The run with
// only the image's tools on PATH is tests/snapshots.
func TestGKEJobScriptsNeedNoPython(t *testing.T) {
	rec := runStack(t, "gke")
	for _, job := range []string{"etcd-root-snapshot", "etcd-root-restore-drill"} {
		for name, c := range jobContainers(t, rec, job) {
			argv := strings.Join(stringList(t, c, "command"), " ")
			require.NotContains(t, argv, "python", "%s/%s", job, name)
		}
	}
	verify := stringList(t, jobContainers(t, rec, "etcd-root-restore-drill")["verify"], "command")
	require.Len(t, verify, 3)
	require.Equal(t, []string{"bash", "-c"}, verify[:2])
	require.Contains(t, verify[2], "exec 3<>/dev/tcp/127.0.0.1/2379", "the drill asks the restored etcd over bash's /dev/tcp")
}

// The snapshot and drill pods hold a full copy of a shard's data and serve nothing: a
// NetworkPolicy with no ingress rule selects them all. The snapshot pod carries the
// etcd client label, so the etcd policy lets it in; the drill pod does not and never
// reaches the live etcd. Semantics from "Network Policies"
// (https://kubernetes.io/docs/concepts/services-networking/network-policies/): a
// policy that selects a pod with policyTypes [Ingress] and no rules denies all ingress.
func TestGKEEtcdJobPodsAreIsolated(t *testing.T) {
	rec := runStack(t, "gke")
	policy := inputs(object(t, rec, "NetworkPolicy", "etcd-jobs"))
	require.Equal(t, naming.NamespaceEtcd, getString(t, policy, "metadata.namespace"))
	require.Equal(t, []string{"Ingress"}, stringList(t, policy, "spec.policyTypes"))
	require.NotContains(t, get(t, policy, "spec"), "ingress", "no rule: nothing may connect")
	expr := get(t, policy, "spec.podSelector.matchExpressions[0]").(map[string]any)
	require.Equal(t, map[string]any{"key": naming.EtcdJobLabel, "operator": "Exists"}, expr)
	for _, shard := range []string{"root", "alpha"} {
		etcdPolicy := inputs(object(t, rec, "NetworkPolicy", "etcd-"+shard))
		clientSelector := get(t, etcdPolicy, "spec.ingress[1].from[0].podSelector.matchLabels").(map[string]any)
		for job, wantClient := range map[string]bool{"etcd-" + shard + "-snapshot": true, "etcd-" + shard + "-restore-drill": false} {
			labels := get(t, inputs(object(t, rec, "CronJob", job)), "spec.jobTemplate.spec.template.metadata.labels").(map[string]any)
			require.Contains(t, labels, naming.EtcdJobLabel, "%s is selected by the jobs policy", job)
			matches := true
			for k, v := range clientSelector {
				if labels[k] != v {
					matches = false
				}
			}
			require.Equal(t, wantClient, matches, "%s reaches the live etcd of %s", job, shard)
		}
		require.Contains(t, stringList(t, get(t, etcdPolicy, "spec"), "policyTypes"), "Ingress")
	}
}

// Custom resources are not awaited by the Kubernetes provider unless they carry
// pulumi.com/waitFor ("Kubernetes provider: await logic", pulumi-kubernetes >= 4.18):
// the Gateway waits for its address, so edgeAddress is set after the first up.
func TestGKEGatewayIsAwaitedForItsAddress(t *testing.T) {
	rec := runStack(t, "gke")
	gateway := inputs(object(t, rec, "Gateway", naming.EdgeGatewayName))
	annotations := get(t, gateway, "metadata.annotations").(map[string]any)
	require.Equal(t, "jsonpath={.status.addresses[0].value}", annotations[naming.AnnotationWaitFor])
}
