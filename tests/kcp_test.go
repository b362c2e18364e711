package tests

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

var stacks = []string{"kind", "gke"}

// kcpObjects are the RootShard, every Shard and the FrontProxy of a stack.
func kcpObjects(t *testing.T, rec *mockstack.Recording, cfg *config.Config) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{
		"RootShard root":        inputs(object(t, rec, "RootShard", naming.RootShardName)),
		"FrontProxy frontproxy": inputs(object(t, rec, "FrontProxy", naming.FrontProxyName)),
	}
	for _, s := range cfg.Kcp.Shards {
		out["Shard "+s.Name] = inputs(object(t, rec, "Shard", s.Name))
	}
	return out
}

// Pin every kcp image, including the root shard's proxy: otherwise a component follows
// the operator's default and drifts on the next operator upgrade.
func TestEveryKcpImageUsesThePinnedVersion(t *testing.T) {
	for _, stack := range stacks {
		rec, cfg := runStack(t, stack), shippedConfig(t, stack)
		images := map[string]map[string]any{}
		for name, obj := range kcpObjects(t, rec, cfg) {
			images[name] = get(t, obj, "spec.image").(map[string]any)
		}
		images["RootShard root proxy"] = get(t, inputs(object(t, rec, "RootShard", "root")), "spec.proxy.image").(map[string]any)
		require.Len(t, images, 4, stack)
		for name, image := range images {
			require.Equal(t, config.KcpImageRepository, image["repository"], "%s %s", stack, name)
			require.Equal(t, cfg.Versions.Kcp, image["tag"], "%s %s", stack, name)
		}
	}
	// The tag follows the config: a new version moves every image at once.
	values := stackValues(t, "kind")
	setIn(values, "versions", "kcp", "v0.33.1")
	rec, err := runValues(t, "kind", values, mockstack.Options{})
	require.NoError(t, err)
	for _, kind := range []string{"RootShard", "Shard", "FrontProxy"} {
		for _, res := range declared(t, rec, "kubernetes:operator.kcp.io/v1alpha1:"+kind) {
			require.Equal(t, "v0.33.1", getString(t, inputs(res), "spec.image.tag"), kind)
		}
	}
	require.Equal(t, "v0.33.1", getString(t, inputs(object(t, rec, "RootShard", "root")), "spec.proxy.image.tag"))
}

// Every kcp server requests what kcp.resources says, with a memory limit and no CPU limit;
// kind's default CPU request leaves room for a rollout's surge pod on a small machine.
func TestEveryKcpServerRequestsTheConfiguredResources(t *testing.T) {
	wantCPU := map[string]string{"kind": config.DefaultKindKcpCPU, "gke": config.DefaultGKEKcpCPU}
	for _, stack := range stacks {
		rec := runStack(t, stack)
		servers := append(declared(t, rec, "kubernetes:operator.kcp.io/v1alpha1:RootShard"), declared(t, rec, "kubernetes:operator.kcp.io/v1alpha1:Shard")...)
		require.Len(t, servers, 2, stack)
		for _, res := range servers {
			r := get(t, inputs(res), "spec.resources").(map[string]any)
			require.Equal(t, map[string]any{"cpu": wantCPU[stack], "memory": config.DefaultKcpMemory}, r["requests"], "%s %s", stack, res.URN)
			require.Equal(t, map[string]any{"memory": config.DefaultKcpMemoryLimit}, r["limits"], "%s %s", stack, res.URN)
		}
	}
	values := stackValues(t, "kind")
	setIn(values, "kcp", "resources.cpu", "250m")
	rec, err := runValues(t, "kind", values, mockstack.Options{})
	require.NoError(t, err)
	require.Equal(t, "250m", getString(t, inputs(object(t, rec, "Shard", "alpha")), "spec.resources.requests.cpu"))
}

// Enable CacheAPIs, and set the virtual-workspace URL to the shard's public hostname.
func TestEveryShardEnablesCacheAPIsAndAdvertisesItsVirtualWorkspaceURL(t *testing.T) {
	for _, stack := range stacks {
		rec, cfg := runStack(t, stack), shippedConfig(t, stack)
		for _, s := range cfg.Kcp.AllShards() {
			kind := "Shard"
			if s.Name == naming.RootShardName {
				kind = "RootShard"
			}
			args := stringList(t, inputs(object(t, rec, kind, s.Name)), "spec.extraArgs")
			require.Contains(t, strings.Join(args, " "), "CacheAPIs=true", "%s %s", stack, s.Name)
			require.Contains(t, args, "--shard-virtual-workspace-url=https://"+s.Hostname, "%s %s", stack, s.Name)
			// kcp refuses --request-timeout and --min-request-timeout (its disallowedFlags);
			// tests/e2e runs every flag through the real kcp binary.
			for _, arg := range args {
				require.False(t, strings.HasPrefix(arg, "--request-timeout") || strings.HasPrefix(arg, "--min-request-timeout"),
					"%s %s: kcp refuses %s", stack, s.Name, arg)
			}
			// The in-cluster path presents the serving certificate under the public name.
			require.Contains(t, stringList(t, inputs(object(t, rec, kind, s.Name)), "spec.certificateTemplates.server.spec.dnsNames"), s.Hostname)
		}
	}
}

// Set the virtual-workspace URL, never the base URL: no shard base URL anywhere.
func TestNoShardBaseURLIsDeclaredAnywhere(t *testing.T) {
	for _, stack := range stacks {
		rec := runStack(t, stack)
		require.NotEmpty(t, rec.Resources)
		for _, res := range rec.Resources {
			encoded, err := json.Marshal(inputs(res))
			require.NoError(t, err)
			require.NotContains(t, string(encoded), "shardBaseURL", "%s %s", stack, res)
			require.NotContains(t, string(encoded), "--shard-base-url", "%s %s", stack, res)
		}
	}
}

// OIDC must match the hub exactly, on every component that validates tokens.
func TestOIDCMatchesTheHubOnEveryComponent(t *testing.T) {
	for _, stack := range stacks {
		rec, cfg := runStack(t, stack), shippedConfig(t, stack)
		for name, obj := range kcpObjects(t, rec, cfg) {
			oidc := get(t, obj, "spec.auth.oidc")
			require.Equal(t, cfg.OIDC.IssuerURL, getString(t, oidc, "issuerURL"), name)
			require.Equal(t, cfg.OIDC.ClientID, getString(t, oidc, "clientID"), name)
			require.Equal(t, "email", getString(t, oidc, "usernameClaim"), name)
			require.Equal(t, "groups", getString(t, oidc, "groupsClaim"), name)
			require.Equal(t, "railgrid:", getString(t, oidc, "usernamePrefix"), name)
			require.Equal(t, "railgrid:", getString(t, oidc, "groupsPrefix"), name)
			// The front proxy's CRD requires service-account auth with OIDC.
			require.Equal(t, true, get(t, obj, "spec.auth.serviceAccount.enabled"), name)
			require.NotContains(t, oidc.(map[string]any), "caFileRef", "no CA configured in the shipped stacks")
		}
	}
	// An issuer CA is wired where kcp reads it: caFileRef on every component.
	values := stackValues(t, "gke")
	setIn(values, "oidc", "caSecret", map[string]any{"name": "oidc-issuer-ca"})
	rec, err := runValues(t, "gke", values, mockstack.Options{})
	require.NoError(t, err)
	for name, obj := range kcpObjects(t, rec, shippedConfig(t, "gke")) {
		require.Equal(t, "oidc-issuer-ca", getString(t, obj, "spec.auth.oidc.caFileRef.name"), name)
		require.Equal(t, "ca.crt", getString(t, obj, "spec.auth.oidc.caFileRef.key"), name)
	}
}

// Each shard has its own etcd and lists every member of it.
func TestEachShardListsEveryMemberOfItsOwnEtcd(t *testing.T) {
	for _, stack := range stacks {
		rec, cfg := runStack(t, stack), shippedConfig(t, stack)
		seen := map[string]bool{}
		for _, s := range cfg.Kcp.AllShards() {
			kind := "Shard"
			if s.Name == naming.RootShardName {
				kind = "RootShard"
			}
			sts := inputs(object(t, rec, "StatefulSet", "etcd-"+s.Name))
			replicas := number(t, sts, "spec.replicas")
			require.Equal(t, cfg.Etcd.Members, replicas)
			headless := getString(t, sts, "spec.serviceName")
			namespace := getString(t, sts, "metadata.namespace")
			var want []string
			for i := 0; i < replicas; i++ {
				want = append(want, fmt.Sprintf("http://etcd-%s-%d.%s.%s.svc.cluster.local:2379", s.Name, i, headless, namespace))
			}
			got := stringList(t, inputs(object(t, rec, kind, s.Name)), "spec.etcd.endpoints")
			require.Equal(t, want, got, "%s %s", stack, s.Name)
			for _, e := range got {
				require.False(t, seen[e], "%s: endpoint %s is shared between shards", stack, e)
				seen[e] = true
			}
			// The headless Service publishes members before they are ready.
			headlessSvc := inputs(object(t, rec, "Service", headless))
			require.Equal(t, true, get(t, headlessSvc, "spec.publishNotReadyAddresses"))
			require.Equal(t, "None", getString(t, headlessSvc, "spec.clusterIP"))
		}
	}
}

// Three members per shard spread over zones with minDomains 3, one member per node.
func TestProductionEtcdSpreadsMembersOverZonesWithMinDomains(t *testing.T) {
	rec := runStack(t, "gke")
	for _, shard := range []string{"root", "alpha"} {
		pod := get(t, inputs(object(t, rec, "StatefulSet", "etcd-"+shard)), "spec.template.spec")
		spread := get(t, pod, "topologySpreadConstraints[0]")
		require.Equal(t, "topology.kubernetes.io/zone", getString(t, spread, "topologyKey"))
		require.Equal(t, 1, number(t, spread, "maxSkew"))
		require.Equal(t, "DoNotSchedule", getString(t, spread, "whenUnsatisfiable"))
		require.Equal(t, 3, number(t, spread, "minDomains"))
		require.Equal(t, "etcd-"+shard, getString(t, spread, "labelSelector.matchLabels.app"))
		anti := get(t, pod, "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]")
		require.Equal(t, "kubernetes.io/hostname", getString(t, anti, "topologyKey"))
		require.Equal(t, "Parallel", getString(t, inputs(object(t, rec, "StatefulSet", "etcd-"+shard)), "spec.podManagementPolicy"))
	}
	// A single member has nothing to spread; a zone constraint would only keep it
	// Pending on nodes without zone labels.
	kindPod := get(t, inputs(object(t, runStack(t, "kind"), "StatefulSet", "etcd-root")), "spec.template.spec").(map[string]any)
	require.NotContains(t, kindPod, "topologySpreadConstraints")
	// Five members: minDomains 5.
	values := stackValues(t, "gke")
	setIn(values, "etcd", "members", 5)
	setIn(values, "gke", "zones", []any{"europe-west1-a", "europe-west1-b", "europe-west1-c", "europe-west1-d", "europe-west1-e"})
	rec5, err := runValues(t, "gke", values, mockstack.Options{})
	require.NoError(t, err)
	require.Equal(t, 5, number(t, inputs(object(t, rec5, "StatefulSet", "etcd-root")), "spec.template.spec.topologySpreadConstraints[0].minDomains"))
	require.Equal(t, 3, number(t, inputs(object(t, rec5, "PodDisruptionBudget", "etcd-root")), "spec.minAvailable"), "quorum of 5")
}

// etcd is pinned, keeps quorum through disruptions and is reachable only from its own
// shard's kcp pods, its snapshot jobs and its peers.
func TestEtcdIsPinnedBudgetedAndUnreachableFromOutside(t *testing.T) {
	rec, cfg := runStack(t, "gke"), shippedConfig(t, "gke")
	for _, shard := range []string{"root", "alpha"} {
		sts := inputs(object(t, rec, "StatefulSet", "etcd-"+shard))
		require.Equal(t, config.EtcdImageRepository+":"+cfg.Versions.Etcd, getString(t, sts, "spec.template.spec.containers[0].image"))
		require.Equal(t, "/readyz", getString(t, sts, "spec.template.spec.containers[0].readinessProbe.httpGet.path"))
		require.Equal(t, "/livez", getString(t, sts, "spec.template.spec.containers[0].livenessProbe.httpGet.path"))
		require.Equal(t, 2, number(t, inputs(object(t, rec, "PodDisruptionBudget", "etcd-"+shard)), "spec.minAvailable"))

		policy := inputs(object(t, rec, "NetworkPolicy", "etcd-"+shard))
		require.Equal(t, []string{"Ingress"}, stringList(t, policy, "spec.policyTypes"))
		component := naming.ComponentShard
		if shard == "root" {
			component = naming.ComponentRootShard
		}
		kcpPeer := get(t, policy, "spec.ingress[0].from[0]")
		require.Equal(t, naming.NamespaceKcp, getString(t, kcpPeer, "namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name"))
		require.Equal(t, component, getString(t, kcpPeer, "podSelector.matchLabels.app\\.kubernetes\\.io/component"))
		require.Equal(t, shard, getString(t, kcpPeer, "podSelector.matchLabels.app\\.kubernetes\\.io/instance"))
		require.Equal(t, 2379, number(t, policy, "spec.ingress[0].ports[0].port"))
		require.Equal(t, shard, getString(t, policy, "spec.ingress[1].from[0].podSelector.matchLabels.railgrid\\.io/etcd-client"))
	}
}

// Owned Services select the operator's pods and keep a fixed ClusterIP and
// appProtocol HTTPS.
func TestOwnedServicesSelectTheOperatorsPodsWithFixedClusterIPs(t *testing.T) {
	for _, stack := range stacks {
		rec, cfg := runStack(t, stack), shippedConfig(t, stack)
		want := []struct {
			service, component, instance, clusterIP string
		}{
			{"kcp-frontproxy", "front-proxy", "frontproxy", cfg.Kcp.FrontProxy.ClusterIP},
			{"kcp-root", "rootshard", "root", cfg.Kcp.RootShard.ClusterIP},
			{"kcp-alpha", "shard", "alpha", cfg.Kcp.Shards[0].ClusterIP},
		}
		for _, w := range want {
			svc := inputs(object(t, rec, "Service", w.service))
			require.Equal(t, naming.NamespaceKcp, getString(t, svc, "metadata.namespace"))
			require.Equal(t, w.clusterIP, getString(t, svc, "spec.clusterIP"), "%s %s", stack, w.service)
			require.Equal(t, map[string]any{"app.kubernetes.io/component": w.component, "app.kubernetes.io/instance": w.instance}, get(t, svc, "spec.selector"))
			ports := get(t, svc, "spec.ports").([]any)
			var kcpPort bool
			for i := range ports {
				require.Equal(t, "HTTPS", getString(t, svc, fmt.Sprintf("spec.ports[%d].appProtocol", i)))
				require.Equal(t, 6443, number(t, svc, fmt.Sprintf("spec.ports[%d].targetPort", i)))
				kcpPort = kcpPort || number(t, svc, fmt.Sprintf("spec.ports[%d].port", i)) == 6443
			}
			require.True(t, kcpPort, "%s serves port 6443", w.service)
		}
	}
}

// Every kcp object waits for Available, so dependents start only when it is ready.
func TestKcpObjectsWaitForAvailable(t *testing.T) {
	rec := runStack(t, "kind")
	for _, kind := range []string{"RootShard", "Shard", "FrontProxy", "Kubeconfig"} {
		objs := rec.ByType("kubernetes:operator.kcp.io/v1alpha1:" + kind)
		require.NotEmpty(t, objs, kind)
		for _, res := range objs {
			require.Equal(t, "condition=Available", getString(t, inputs(res), "metadata.annotations.pulumi\\.com/waitFor"), kind)
			require.Equal(t, naming.NamespaceKcp, getString(t, inputs(res), "metadata.namespace"))
		}
	}
}

// The root shard is created after the operator release, the Issuer and its etcd; the
// shard and the front proxy after the root shard, independently; the Kubeconfig after
// the front proxy; the hub Secret after the Kubeconfig.
func TestKcpObjectsAreOrderedByWhatTheyNeed(t *testing.T) {
	for _, stack := range stacks {
		rec := runStack(t, stack)
		urn := func(kind, name string) string { return object(t, rec, kind, name).URN }
		root := urn("RootShard", "root")
		release, ok := rec.Find("kubernetes:helm.sh/v3:Release", "railgrid-kcp-operator-release")
		require.True(t, ok)
		for _, prerequisite := range []string{release.URN, urn("Issuer", "selfsigned"), urn("StatefulSet", "etcd-root")} {
			require.True(t, rec.DependsOnTransitively(root, prerequisite), "%s: RootShard must wait for %s", stack, prerequisite)
		}
		shard, frontProxy := urn("Shard", "alpha"), urn("FrontProxy", "frontproxy")
		require.True(t, rec.DependsOnTransitively(shard, root))
		require.True(t, rec.DependsOnTransitively(shard, urn("StatefulSet", "etcd-alpha")))
		require.True(t, rec.DependsOnTransitively(frontProxy, root))
		require.False(t, rec.DependsOnTransitively(shard, frontProxy))
		require.False(t, rec.DependsOnTransitively(frontProxy, shard))
		kubeconfig := urn("Kubeconfig", naming.KubeconfigName)
		require.True(t, rec.DependsOnTransitively(kubeconfig, frontProxy))
		require.True(t, rec.DependsOnTransitively(urn("Secret", "railgrid-kcp"), kubeconfig))
		// etcd does not wait for the root shard (nothing circular).
		require.False(t, rec.DependsOnTransitively(urn("StatefulSet", "etcd-root"), root))
	}
}

// On an upgrade the root shard rolls out first: the RootShard's update waits for its
// Deployments to roll out (the operator's Available passes while old pods still serve),
// and a Shard or the FrontProxy is updated only after the root shard has rolled out, then
// waits for its own rollout. A create waits for nothing more than Available, and the
// Kubeconfig (no Deployment) for nothing. tests/e2e's version bump proves the order with
// the real engine and operator.
func TestKcpUpgradesRollTheRootShardFirst(t *testing.T) {
	for _, stack := range stacks {
		rec := runStack(t, stack)
		for kind, before := range map[string][]string{
			"RootShard":  nil,
			"Shard":      {naming.RootShardFirstHook},
			"FrontProxy": {naming.RootShardFirstHook},
			"Kubeconfig": nil,
		} {
			after := []string{naming.KcpRolloutHook}
			if kind == "Kubeconfig" {
				after = nil
			}
			objs := rec.ByType("kubernetes:operator.kcp.io/v1alpha1:" + kind)
			require.NotEmpty(t, objs, "%s %s", stack, kind)
			for _, res := range objs {
				require.Equal(t, before, res.BeforeUpdateHooks, "%s %s: before-update hooks", stack, res.URN)
				require.Equal(t, after, res.AfterUpdateHooks, "%s %s: after-update hooks", stack, res.URN)
				require.Empty(t, res.BeforeCreateHooks, "%s %s: a create waits for Available only", stack, res.URN)
				require.Empty(t, res.AfterCreateHooks, "%s %s: a create waits for Available only", stack, res.URN)
			}
		}
	}
}

// The hub's Secret is where the hub reads it, and Pulumi declares it without data: the
// copy fills it (TestHubKubeconfigIsCopiedByKubectlAlone), so the kubeconfig is in no
// input of the plan, and the only read of it, for the outputs, is a Pulumi secret.
func TestHubKubeconfigIsSecretAndWhereTheHubReadsIt(t *testing.T) {
	for _, stack := range stacks {
		rec, cfg := runStack(t, stack), shippedConfig(t, stack)
		kc := inputs(object(t, rec, "Kubeconfig", naming.KubeconfigName))
		require.Equal(t, "kcp-admin", getString(t, kc, "spec.username"))
		require.Equal(t, []string{"system:kcp:admin"}, stringList(t, kc, "spec.groups"))
		require.Equal(t, cfg.Hub.KubeconfigValidity, getString(t, kc, "spec.validity"))
		require.Equal(t, naming.KubeconfigName, getString(t, kc, "spec.secretRef.name"))
		require.Equal(t, naming.FrontProxyName, getString(t, kc, "spec.target.frontProxyRef.name"))

		hub := object(t, rec, "Secret", cfg.Hub.SecretName)
		require.Equal(t, cfg.Hub.Namespace, getString(t, inputs(hub), "metadata.namespace"))
		require.NotContains(t, hub.Inputs, resource.PropertyKey("data"), "%s: the copy owns the hub Secret's data", stack)
		require.NotContains(t, hub.Inputs, resource.PropertyKey("stringData"), stack)
		require.Equal(t, naming.HubSecretFieldManager, getString(t, inputs(hub), "metadata.annotations.pulumi\\.com/patchFieldManager"),
			"%s: not the manager that applied the data before the copy did, so that an upgraded stack keeps its data", stack)
		require.NotEqual(t, naming.FieldManager, naming.HubSecretFieldManager)
		require.Subset(t, hub.AdditionalSecretOutputs, []string{"data", "stringData"}, "%s: what the live Secret holds stays secret in the state", stack)

		minted, ok := rec.Find("kubernetes:core/v1:Secret", "railgrid-kcp-hub-minted")
		require.True(t, ok)
		require.True(t, minted.Read, "the operator's Secret is read, not managed")
		require.Equal(t, naming.NamespaceKcp+"/"+naming.KubeconfigName, minted.ReadID)
	}
}

// The copy is kubectl's image running kubectl alone: a server-side apply, under its own
// field manager, of a kustomization that makes the hub's Secret, with the hub's name and
// key, from the operator's kubeconfig Secret mounted beside it. Its identity may read and
// patch that one Secret and nothing else. The Job the up waits for and the CronJob run
// the same pod; the Job's pod carries the hub Secret's UID, so a Secret made again
// replaces the Job.
func TestHubKubeconfigIsCopiedByKubectlAlone(t *testing.T) {
	for _, stack := range stacks {
		rec, cfg := runStack(t, stack), shippedConfig(t, stack)
		job := inputs(object(t, rec, "Job", naming.HubCopyJob(0)))
		cron := inputs(object(t, rec, "CronJob", naming.HubCopy))
		require.Equal(t, naming.NamespaceKcp, getString(t, job, "metadata.namespace"))
		require.Equal(t, cfg.Hub.CopySchedule, getString(t, cron, "spec.schedule"), stack)
		require.Equal(t, "Forbid", getString(t, cron, "spec.concurrencyPolicy"))
		jobPod := get(t, job, "spec.template.spec")
		require.Equal(t, get(t, cron, "spec.jobTemplate.spec.template.spec"), jobPod, "%s: the CronJob repeats the up's copy", stack)
		jobRes := object(t, rec, "Job", naming.HubCopyJob(0))
		require.Equal(t, mockstack.Computed, getString(t, job, "spec.template.metadata.annotations.railgrid\\.io/hub-secret-uid"),
			"%s: the Job carries the hub Secret's UID, which the API server assigns", stack)
		require.Contains(t, jobRes.Dependencies, object(t, rec, "Secret", cfg.Hub.SecretName).URN, stack)
		require.True(t, object(t, rec, "Job", naming.HubCopyJob(0)).DeleteBeforeReplace, "a replaced Job of the same name goes first")
		require.Equal(t, "true", getString(t, job, "metadata.annotations.pulumi\\.com/replaceUnready"), "%s: a failed copy is made again by the next up", stack)
		cronJob := object(t, rec, "CronJob", naming.HubCopy)
		require.True(t, cronJob.DeleteBeforeReplace && slices.Contains(cronJob.ReplaceOnChanges, "spec"),
			"%s: a changed CronJob is deleted, with its runs of the previous credential, before it is made again", stack)
		require.Contains(t, object(t, rec, "Job", naming.HubCopyJob(0)).Dependencies, cronJob.URN, "%s: the up's copy runs after the CronJob's change", stack)

		c := containersOf(jobPod.(map[string]any))
		require.Len(t, c, 1)
		require.Equal(t, config.HubCopyImage, c[0]["image"])
		require.Equal(t, []string{"/bin/kubectl", "apply", "--server-side", "--force-conflicts",
			"--field-manager=" + naming.HubCopy, "--cache-dir=/cache", "-k", "/copy"}, stringList(t, c[0], "command"))
		sources := get(t, jobPod, "volumes[0].projected.sources").([]any)
		require.Len(t, sources, 2)
		require.Equal(t, naming.HubCopy, getString(t, sources[0], "configMap.name"))
		require.Equal(t, naming.KubeconfigName, getString(t, sources[1], "secret.name"), "%s: the operator's Secret of this generation", stack)
		require.Equal(t, naming.KubeconfigSecretKey, getString(t, sources[1], "secret.items[0].path"))
		require.EqualValues(t, 0o440, number(t, jobPod, "volumes[0].projected.defaultMode"))
		require.Equal(t, naming.HubCopy, getString(t, jobPod, "serviceAccountName"))

		var kustomization struct {
			Namespace        string `yaml:"namespace"`
			GeneratorOptions struct {
				DisableNameSuffixHash bool `yaml:"disableNameSuffixHash"`
			} `yaml:"generatorOptions"`
			SecretGenerator []struct {
				Name  string   `yaml:"name"`
				Type  string   `yaml:"type"`
				Files []string `yaml:"files"`
			} `yaml:"secretGenerator"`
		}
		cm := inputs(object(t, rec, "ConfigMap", naming.HubCopy))
		require.NoError(t, yaml.Unmarshal([]byte(getString(t, cm, "data.kustomization\\.yaml")), &kustomization))
		require.Equal(t, cfg.Hub.Namespace, kustomization.Namespace)
		require.True(t, kustomization.GeneratorOptions.DisableNameSuffixHash, "the hub reads a fixed name")
		require.Len(t, kustomization.SecretGenerator, 1)
		require.Equal(t, cfg.Hub.SecretName, kustomization.SecretGenerator[0].Name)
		require.Equal(t, "Opaque", kustomization.SecretGenerator[0].Type)
		require.Equal(t, []string{cfg.Hub.SecretKey + "=" + naming.KubeconfigSecretKey}, kustomization.SecretGenerator[0].Files)

		role := inputs(object(t, rec, "Role", naming.HubCopy))
		require.Equal(t, cfg.Hub.Namespace, getString(t, role, "metadata.namespace"))
		rules := get(t, role, "rules").([]any)
		require.Len(t, rules, 1, "one rule: the hub's Secret")
		require.Equal(t, []string{"secrets"}, stringList(t, rules[0], "resources"))
		require.Equal(t, []string{cfg.Hub.SecretName}, stringList(t, rules[0], "resourceNames"))
		require.Equal(t, []string{"get", "patch", "create"}, stringList(t, rules[0], "verbs"))
		binding := inputs(object(t, rec, "RoleBinding", naming.HubCopy))
		require.Equal(t, cfg.Hub.Namespace, getString(t, binding, "metadata.namespace"))
		require.Equal(t, naming.HubCopy, getString(t, binding, "roleRef.name"))
		require.Equal(t, naming.HubCopy, getString(t, binding, "subjects[0].name"))
		require.Equal(t, naming.NamespaceKcp, getString(t, binding, "subjects[0].namespace"))
	}
}

// A re-mint's copy reads the new generation's Secret, in a Job of the generation's name.
func TestRemintCopiesTheNewGenerationsKubeconfig(t *testing.T) {
	values := stackValues(t, "kind")
	setIn(values, "hub", "remintGeneration", 2)
	rec, err := runValues(t, "kind", values, mockstack.Options{})
	require.NoError(t, err)
	job := inputs(object(t, rec, "Job", naming.HubCopyJob(2)))
	require.Equal(t, naming.KubeconfigObjectName(2), getString(t, job, "spec.template.spec.volumes[0].projected.sources[1].secret.name"))
	cron := inputs(object(t, rec, "CronJob", naming.HubCopy))
	require.Equal(t, naming.KubeconfigObjectName(2), getString(t, cron, "spec.jobTemplate.spec.template.spec.volumes[0].projected.sources[1].secret.name"))
}

// Re-minting from config replaces the Kubeconfig object with one of a new name (and
// Secret), so that cert-manager issues a new Certificate for it; generation 0 keeps the
// design document's name.
func TestRemintGenerationReplacesTheKubeconfig(t *testing.T) {
	rec := runStack(t, "kind")
	kc := object(t, rec, "Kubeconfig", naming.KubeconfigName)
	require.False(t, kc.DeleteBeforeReplace, "the new generation is created before the old one is deleted")
	require.Equal(t, "0", getString(t, inputs(kc), "metadata.annotations.railgrid\\.io/remint-generation"))
	require.Equal(t, naming.KubeconfigName, getString(t, inputs(kc), "spec.secretRef.name"))

	values := stackValues(t, "kind")
	setIn(values, "hub", "remintGeneration", 3)
	rec3, err := runValues(t, "kind", values, mockstack.Options{})
	require.NoError(t, err)
	name3 := naming.KubeconfigObjectName(3)
	require.Equal(t, naming.KubeconfigName+"-remint-3", name3)
	kc3obj := object(t, rec3, "Kubeconfig", name3)
	require.Equal(t, kc.URN, kc3obj.URN, "same resource, so the engine replaces it")
	kc3 := inputs(kc3obj)
	require.Equal(t, "3", getString(t, kc3, "metadata.annotations.railgrid\\.io/remint-generation"))
	require.Equal(t, name3, getString(t, kc3, "spec.secretRef.name"))
	require.Equal(t, []string{"railgrid-kcp-mint-3"}, stringList(t, kc3, "spec.certificateTemplate.spec.subject.organizationalUnits"))
	minted, ok := rec3.Find("kubernetes:core/v1:Secret", "railgrid-kcp-hub-minted")
	require.True(t, ok)
	require.Equal(t, naming.NamespaceKcp+"/"+name3, minted.ReadID)
}

// What holds data survives `pulumi destroy` and renames.
func TestDataHoldersSurviveDestroy(t *testing.T) {
	for _, stack := range stacks {
		rec, cfg := runStack(t, stack), shippedConfig(t, stack)
		require.True(t, object(t, rec, "Namespace", naming.NamespaceEtcd).RetainOnDelete, "%s: deleting the etcd namespace deletes the volume claims", stack)
		require.True(t, object(t, rec, "Namespace", cfg.Hub.Namespace).RetainOnDelete)
		release := find(t, rec, "kubernetes:helm.sh/v3:Release", "railgrid-kcp-operator-release")
		require.True(t, release.RetainOnDelete, "%s: uninstalling the chart deletes the CRDs and every kcp object", stack)
		for _, shard := range []string{"root", "alpha"} {
			sts := inputs(object(t, rec, "StatefulSet", "etcd-"+shard))
			require.Equal(t, "Retain", getString(t, sts, "spec.persistentVolumeClaimRetentionPolicy.whenDeleted"))
			require.Equal(t, "Retain", getString(t, sts, "spec.persistentVolumeClaimRetentionPolicy.whenScaled"))
			require.Equal(t, cfg.Etcd.StorageClass, getString(t, sts, "spec.volumeClaimTemplates[0].spec.storageClassName"))
			require.Equal(t, cfg.Etcd.VolumeSize, getString(t, sts, "spec.volumeClaimTemplates[0].spec.resources.requests.storage"))
		}
	}
}

// The operator is installed from the pinned chart with the pinned image.
func TestOperatorReleaseIsPinned(t *testing.T) {
	for _, stack := range stacks {
		rec, cfg := runStack(t, stack), shippedConfig(t, stack)
		release, ok := rec.Find("kubernetes:helm.sh/v3:Release", "railgrid-kcp-operator-release")
		require.True(t, ok)
		in := inputs(release)
		require.Equal(t, "kcp-operator", getString(t, in, "chart"))
		require.Equal(t, cfg.Versions.OperatorChart, getString(t, in, "version"))
		require.Equal(t, config.OperatorChartRepository, getString(t, in, "repositoryOpts.repo"))
		require.Equal(t, naming.NamespaceOperator, getString(t, in, "namespace"))
		require.Equal(t, cfg.Versions.OperatorImage, getString(t, in, "values.image.tag"))
		require.Equal(t, true, get(t, in, "values.crds.create"))
	}
}
