package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config/stackconfig"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

func gcpResource(t *testing.T, rec *mockstack.Recording, typ, name string) mockstack.Resource {
	t.Helper()
	res, ok := rec.Find(typ, name)
	require.True(t, ok, "no %s %q", typ, name)
	return res
}

// The existing cluster is looked up, never managed; the fixed ClusterIPs are checked
// against the range the lookup reports.
func TestGKEClusterIsLookedUpNotManaged(t *testing.T) {
	rec, cfg := runStack(t, "gke"), shippedConfig(t, "gke")
	require.Empty(t, rec.ByType("gcp:container/cluster:Cluster"))
	var lookups []mockstack.Invoke
	for _, inv := range rec.Invokes {
		if inv.Token != stackconfig.ReadStackOutputsToken {
			lookups = append(lookups, inv)
		}
	}
	require.Len(t, lookups, 1)
	lookup := lookups[0]
	require.Equal(t, "gcp:container/getCluster:getCluster", lookup.Token)
	require.Equal(t, cfg.GKE.Cluster, lookup.Args["name"].StringValue())
	require.Equal(t, cfg.GKE.Location, lookup.Args["location"].StringValue())
	require.Equal(t, cfg.GKE.Project, lookup.Args["project"].StringValue())
	provider := gcpResource(t, rec, "pulumi:providers:kubernetes", "railgrid-kcp-gke-k8s")
	kubeconfig := getString(t, inputs(provider), "kubeconfig")
	require.Contains(t, kubeconfig, "server: https://203.0.113.10", "endpoint from the lookup")
	require.Contains(t, kubeconfig, "command: gke-gcloud-auth-plugin")
	// Every Kubernetes object goes through that provider.
	require.NotEmpty(t, rec.Resources)
	for _, res := range rec.Resources {
		if strings.HasPrefix(res.Type, "kubernetes:") && res.Custom {
			require.Contains(t, res.Provider, "railgrid-kcp-gke-k8s", res.String())
		}
	}
}

// Node pools over exactly the configured zones, autoscaled per zone, balanced,
// repaired and upgraded, with Workload Identity; the etcd pool is labelled and tainted.
func TestGKENodePoolsSpanTheConfiguredZones(t *testing.T) {
	rec, cfg := runStack(t, "gke"), shippedConfig(t, "gke")
	pools := map[string]struct {
		name string
		min  int
		max  int
	}{
		"railgrid-kcp-gke-pool-kcp":  {"kcp", cfg.GKE.NodePools.Kcp.MinPerZone, cfg.GKE.NodePools.Kcp.MaxPerZone},
		"railgrid-kcp-gke-pool-etcd": {"etcd", cfg.GKE.NodePools.Etcd.MinPerZone, cfg.GKE.NodePools.Etcd.MaxPerZone},
	}
	for logical, want := range pools {
		pool := inputs(gcpResource(t, rec, "gcp:container/nodePool:NodePool", logical))
		require.Equal(t, cfg.GKE.Zones, stringList(t, pool, "nodeLocations"), logical)
		require.Equal(t, cfg.GKE.Cluster, getString(t, pool, "cluster"))
		require.Equal(t, want.name, getString(t, pool, "name"))
		require.Equal(t, want.min, number(t, pool, "autoscaling.minNodeCount"), logical)
		require.Equal(t, want.max, number(t, pool, "autoscaling.maxNodeCount"), logical)
		require.Equal(t, "BALANCED", getString(t, pool, "autoscaling.locationPolicy"))
		require.Equal(t, true, get(t, pool, "management.autoRepair"))
		require.Equal(t, true, get(t, pool, "management.autoUpgrade"))
		require.Equal(t, "GKE_METADATA", getString(t, pool, "nodeConfig.workloadMetadataConfig.mode"))
	}
	etcdPool := inputs(gcpResource(t, rec, "gcp:container/nodePool:NodePool", "railgrid-kcp-gke-pool-etcd"))
	require.Equal(t, "etcd", getString(t, etcdPool, "nodeConfig.labels.workload"))
	require.Equal(t, "dedicated", getString(t, etcdPool, "nodeConfig.taints[0].key"))
	require.Equal(t, "etcd", getString(t, etcdPool, "nodeConfig.taints[0].value"))
	require.Equal(t, "NO_SCHEDULE", getString(t, etcdPool, "nodeConfig.taints[0].effect"))
}

// etcd pods select and tolerate the etcd pool and claim the Retain pd-ssd class.
func TestGKEEtcdRunsOnItsPoolWithRetainedSSDs(t *testing.T) {
	rec, cfg := runStack(t, "gke"), shippedConfig(t, "gke")
	class := inputs(object(t, rec, "StorageClass", cfg.Etcd.StorageClass))
	require.Equal(t, "pd.csi.storage.gke.io", getString(t, class, "provisioner"))
	require.Equal(t, "pd-ssd", getString(t, class, "parameters.type"))
	require.Equal(t, "WaitForFirstConsumer", getString(t, class, "volumeBindingMode"))
	require.Equal(t, "Retain", getString(t, class, "reclaimPolicy"))
	require.Equal(t, true, get(t, class, "allowVolumeExpansion"))
	poolURN := gcpResource(t, rec, "gcp:container/nodePool:NodePool", "railgrid-kcp-gke-pool-etcd").URN
	for _, shard := range []string{"root", "alpha"} {
		res := object(t, rec, "StatefulSet", "etcd-"+shard)
		sts := inputs(res)
		pod := get(t, sts, "spec.template.spec")
		require.Equal(t, "etcd", getString(t, pod, "nodeSelector.workload"))
		require.Equal(t, map[string]any{"key": "dedicated", "operator": "Equal", "value": "etcd", "effect": "NoSchedule"}, get(t, pod, "tolerations[0]"))
		require.Equal(t, cfg.Etcd.StorageClass, getString(t, sts, "spec.volumeClaimTemplates[0].spec.storageClassName"))
		require.True(t, rec.DependsOnTransitively(res.URN, poolURN), "etcd waits for its node pool")
	}
}

// Snapshots go to a private, versioned, protected bucket that ages them out.
func TestGKESnapshotBucketIsPrivateVersionedAndProtected(t *testing.T) {
	rec, cfg := runStack(t, "gke"), shippedConfig(t, "gke")
	res := gcpResource(t, rec, "gcp:storage/bucket:Bucket", "railgrid-kcp-snapshots-bucket")
	require.True(t, res.Protect, "pulumi destroy must not delete the snapshots")
	bucket := inputs(res)
	require.Equal(t, "enforced", getString(t, bucket, "publicAccessPrevention"))
	require.Equal(t, true, get(t, bucket, "uniformBucketLevelAccess"))
	require.Equal(t, true, get(t, bucket, "versioning.enabled"))
	require.Equal(t, strings.ToUpper(cfg.GKE.Location), getString(t, bucket, "location"))
	require.Equal(t, "Delete", getString(t, bucket, "lifecycleRules[0].action.type"))
	require.Equal(t, cfg.GKE.Snapshots.RetentionDays, number(t, bucket, "lifecycleRules[0].condition.age"))
	require.Equal(t, "kcp-etcd-snapshots-5eed0001", getString(t, bucket, "name"), "made unique with the random suffix")
	suffix := gcpResource(t, rec, "random:index/randomId:RandomId", "railgrid-kcp-snapshots-bucket-suffix")
	require.Contains(t, suffix.Faked, "hex")
	require.True(t, suffix.Protect, "a new suffix is a new bucket name: the bucket would be replaced")
	// Noncurrent versions age out after retentionDays. noAge: without it the provider
	// sends age 0 with the rule (pulumi-gcp BucketLifecycleRuleCondition, field noAge:
	// "This prevents a default age of 0 from being applied").
	noncurrent := get(t, bucket, "lifecycleRules[1].condition")
	require.Equal(t, cfg.GKE.Snapshots.RetentionDays, number(t, noncurrent, "daysSinceNoncurrentTime"))
	require.Equal(t, "ARCHIVED", getString(t, noncurrent, "withState"))
	require.Equal(t, true, get(t, noncurrent, "noAge"))
	require.NotContains(t, noncurrent, "age")
}

// The snapshot account may create, get and list objects (what `gcloud storage cp`
// needs) and the drill only read them, each bound to its Kubernetes ServiceAccount
// through Workload Identity. The permissions behind the roles are checked against what
// each command needs in TestGKESnapshotIAMContract.
func TestGKESnapshotIAMIsMinimal(t *testing.T) {
	rec, cfg := runStack(t, "gke"), shippedConfig(t, "gke")
	cases := []struct {
		prefix  string
		roles   []string
		ksa     string
		account string
	}{
		{"railgrid-kcp-snapshots-snapshots", []string{"roles/storage.objectCreator", "roles/storage.objectViewer"}, naming.SnapshotServiceAccount, "kcp-etcd-snapshots"},
		{"railgrid-kcp-snapshots-drill", []string{"roles/storage.objectViewer"}, naming.DrillServiceAccount, "kcp-etcd-restore-drill"},
	}
	require.Len(t, rec.ByType("gcp:storage/bucketIAMMember:BucketIAMMember"), 3, "no other bucket grants")
	require.Empty(t, rec.ByType("gcp:projects/iAMMember:IAMMember"), "no project-wide grants")
	for _, c := range cases {
		email := fmt.Sprintf("%s@%s.iam.gserviceaccount.com", c.account, cfg.GKE.Project)
		var granted []string
		for _, res := range rec.ByType("gcp:storage/bucketIAMMember:BucketIAMMember") {
			grant := inputs(res)
			if getString(t, grant, "member") == "serviceAccount:"+email {
				require.True(t, strings.HasPrefix(res.Name, c.prefix+"-bucket-"), res.Name)
				granted = append(granted, getString(t, grant, "role"))
			}
		}
		require.ElementsMatch(t, c.roles, granted, c.account)
		wi := inputs(gcpResource(t, rec, "gcp:serviceaccount/iAMMember:IAMMember", c.prefix+"-workload-identity"))
		require.Equal(t, "roles/iam.workloadIdentityUser", getString(t, wi, "role"))
		require.Equal(t, fmt.Sprintf("serviceAccount:%s.svc.id.goog[etcd/%s]", cfg.GKE.Project, c.ksa), getString(t, wi, "member"))
		ksa := inputs(object(t, rec, "ServiceAccount", c.ksa))
		require.Equal(t, "etcd", getString(t, ksa, "metadata.namespace"))
		require.Equal(t, email, getString(t, ksa, "metadata.annotations.iam\\.gke\\.io/gcp-service-account"))
	}
}

// Each shard's etcd is snapshotted on schedule from one member to gs://<bucket>/<shard>/,
// without overlapping runs; the drill restores the newest snapshot and checks it serves.
func TestGKEScheduledSnapshotsAndRestoreDrill(t *testing.T) {
	rec, cfg := runStack(t, "gke"), shippedConfig(t, "gke")
	for _, shard := range []string{"root", "alpha"} {
		job := inputs(object(t, rec, "CronJob", "etcd-"+shard+"-snapshot"))
		require.Equal(t, cfg.GKE.Snapshots.Schedule, getString(t, job, "spec.schedule"))
		require.Equal(t, "Forbid", getString(t, job, "spec.concurrencyPolicy"))
		require.Positive(t, number(t, job, "spec.successfulJobsHistoryLimit"))
		require.Positive(t, number(t, job, "spec.failedJobsHistoryLimit"))
		pod := get(t, job, "spec.jobTemplate.spec.template.spec")
		require.Equal(t, "Never", getString(t, pod, "restartPolicy"), "a failure is a failed Job")
		require.Equal(t, naming.SnapshotServiceAccount, getString(t, pod, "serviceAccountName"))
		require.Equal(t, shard, getString(t, job, "spec.jobTemplate.spec.template.metadata.labels.railgrid\\.io/etcd-client"), "allowed through the etcd NetworkPolicy")
		require.Equal(t, "connect", getString(t, pod, "initContainers[0].name"), "etcd is reached first, failing fast")
		require.Contains(t, stringList(t, pod, "initContainers[0].command"), "status")
		require.Equal(t, "save", getString(t, pod, "initContainers[1].name"))
		save := stringList(t, pod, "initContainers[1].command")
		require.Equal(t, "/usr/local/bin/etcdctl", save[0])
		var endpoints []string
		for _, arg := range save {
			if strings.HasPrefix(arg, "--endpoints=") {
				endpoints = append(endpoints, arg)
			}
		}
		require.Equal(t, []string{fmt.Sprintf("--endpoints=http://etcd-%s.etcd.svc.cluster.local:2379", shard)}, endpoints, "one endpoint: etcdctl refuses several for a snapshot")
		require.Contains(t, save, "save")
		upload := stringList(t, pod, "containers[0].command")
		require.Contains(t, upload[len(upload)-1], `target="gs://${BUCKET}/${SHARD}/${ts}.db"`)
		require.Contains(t, upload[len(upload)-1], `gcloud storage cp --no-clobber /backup/snapshot.db "${target}"`)
		require.Contains(t, upload[len(upload)-1], `date -u +%Y%m%dT%H%M%SZ`)
		require.Equal(t, shard, getString(t, pod, "containers[0].env[1].value"))

		drill := inputs(object(t, rec, "CronJob", "etcd-"+shard+"-restore-drill"))
		require.Equal(t, cfg.GKE.Snapshots.DrillSchedule, getString(t, drill, "spec.schedule"))
		dpod := get(t, drill, "spec.jobTemplate.spec.template.spec")
		require.Equal(t, naming.DrillServiceAccount, getString(t, dpod, "serviceAccountName"))
		steps := map[string][]string{}
		for i := range get(t, dpod, "initContainers").([]any) {
			steps[getString(t, dpod, fmt.Sprintf("initContainers[%d].name", i))] = stringList(t, dpod, fmt.Sprintf("initContainers[%d].command", i))
		}
		require.Contains(t, strings.Join(steps["fetch"], " "), "sort | tail -n 1", "the newest snapshot")
		require.Equal(t, []string{"/usr/local/bin/etcdutl", "snapshot", "status"}, steps["status"][:3])
		require.Equal(t, []string{"/usr/local/bin/etcdutl", "snapshot", "restore"}, steps["restore"][:3])
		require.Equal(t, "/usr/local/bin/etcd", steps["etcd"][0], "a throwaway etcd on the restored data")
		require.Contains(t, strings.Join(stringList(t, dpod, "containers[0].command"), " "), "serves no keys")
	}
}

// One response-policy rule per shard hostname answers with its owned Service ClusterIP.
func TestGKESplitHorizonAnswersShardHostnamesWithClusterIPs(t *testing.T) {
	rec, cfg := runStack(t, "gke"), shippedConfig(t, "gke")
	policy := inputs(gcpResource(t, rec, "gcp:dns/responsePolicy:ResponsePolicy", "railgrid-kcp-dns-policy"))
	require.Equal(t, "https://www.googleapis.com/compute/v1/projects/railgrid-prod/global/networks/railgrid", getString(t, policy, "networks[0].networkUrl"))
	require.Equal(t, "projects/railgrid-prod/locations/europe-west1/clusters/railgrid", getString(t, policy, "gkeClusters[0].gkeClusterName"))
	rules := rec.ByType("gcp:dns/responsePolicyRule:ResponsePolicyRule")
	require.Len(t, rules, len(cfg.Kcp.AllShards()), "one rule per shard hostname, none for the front proxy")
	for _, s := range cfg.Kcp.AllShards() {
		rule := inputs(gcpResource(t, rec, "gcp:dns/responsePolicyRule:ResponsePolicyRule", "railgrid-kcp-dns-rule-"+s.Name))
		require.Equal(t, s.Hostname+".", getString(t, rule, "dnsName"))
		require.Equal(t, naming.ResponsePolicyName, getString(t, rule, "responsePolicy"))
		data := get(t, rule, "localData.localDatas[0]")
		require.Equal(t, "A", getString(t, data, "type"))
		require.Equal(t, []string{s.ClusterIP}, stringList(t, data, "rrdatas"))
		require.Equal(t, cfg.GKE.DNS.TTL, number(t, data, "ttl"))
		require.Equal(t, s.Hostname+".", getString(t, data, "name"))
	}
	// Only one policy can be bound to a network: an existing one gets the rules instead.
	values := stackValues(t, "gke")
	setIn(values, "gke", "dns.existingResponsePolicy", "shared-vpc-policy")
	rec2, err := runValues(t, "gke", values, mockstack.Options{})
	require.NoError(t, err)
	require.Empty(t, rec2.ByType("gcp:dns/responsePolicy:ResponsePolicy"))
	for _, rule := range declared(t, rec2, "gcp:dns/responsePolicyRule:ResponsePolicyRule") {
		require.Equal(t, "shared-vpc-policy", getString(t, inputs(rule), "responsePolicy"))
	}
}

// Every exposed Service has a backend policy with the long timeout and a /readyz health
// check over HTTPS; the Gateway has an HTTPS listener per hostname.
func TestGKEGatewayKeepsWatchesOpenAndChecksReadyz(t *testing.T) {
	rec, cfg := runStack(t, "gke"), shippedConfig(t, "gke")
	timeout := int(cfg.LoadBalancerTimeout().Seconds())
	require.Equal(t, 3600, timeout)
	gateway := inputs(object(t, rec, "Gateway", naming.EdgeGatewayName))
	require.Equal(t, cfg.GKE.Gateway.ClassName, getString(t, gateway, "spec.gatewayClassName"))
	require.Equal(t, cfg.GKE.Gateway.CertManagerClusterIssuer, getString(t, gateway, "metadata.annotations.cert-manager\\.io/cluster-issuer"))
	hosts := map[string]string{"frontproxy": cfg.Kcp.FrontProxy.Hostname, "root": cfg.Kcp.RootShard.Hostname, "alpha": cfg.Kcp.Shards[0].Hostname}
	var listenerHosts []string
	for i := range get(t, gateway, "spec.listeners").([]any) {
		l := get(t, gateway, fmt.Sprintf("spec.listeners[%d]", i))
		require.Equal(t, "HTTPS", getString(t, l, "protocol"))
		require.Equal(t, "Terminate", getString(t, l, "tls.mode"))
		listenerHosts = append(listenerHosts, getString(t, l, "hostname"))
	}
	for name, host := range hosts {
		require.Contains(t, listenerHosts, host)
		service := naming.OwnedServiceName(name)
		route := inputs(object(t, rec, "HTTPRoute", "kcp-"+name))
		require.Equal(t, []string{host}, stringList(t, route, "spec.hostnames"))
		require.Equal(t, service, getString(t, route, "spec.rules[0].backendRefs[0].name"))
		backend := inputs(object(t, rec, "GCPBackendPolicy", service))
		require.Equal(t, service, getString(t, backend, "spec.targetRef.name"))
		require.Equal(t, "Service", getString(t, backend, "spec.targetRef.kind"))
		require.Equal(t, timeout, number(t, backend, "spec.default.timeoutSec"))
		health := inputs(object(t, rec, "HealthCheckPolicy", service))
		require.Equal(t, service, getString(t, health, "spec.targetRef.name"))
		require.Equal(t, "HTTPS", getString(t, health, "spec.default.config.type"))
		require.Equal(t, "/readyz", getString(t, health, "spec.default.config.httpsHealthCheck.requestPath"))
		require.Equal(t, 6443, number(t, health, "spec.default.config.httpsHealthCheck.port"))
		require.Equal(t, "USE_FIXED_PORT", getString(t, health, "spec.default.config.httpsHealthCheck.portSpecification"))
	}
	// The timeout follows the config.
	values := stackValues(t, "gke")
	setIn(values, "loadBalancer", "timeout", "2h")
	rec2, err := runValues(t, "gke", values, mockstack.Options{})
	require.NoError(t, err)
	for _, res := range declared(t, rec2, "kubernetes:networking.gke.io/v1:GCPBackendPolicy") {
		require.Equal(t, 7200, number(t, inputs(res), "spec.default.timeoutSec"))
	}
}
