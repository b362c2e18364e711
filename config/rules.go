package config

import (
	"fmt"
	"strings"
)

// Rule is one thing a stack config is refused for. Every refusal names its rule; the
// table of what is refused in docs/configuration.md is generated from Rules, and the
// refusal tests walk Rules so that a rule without a refusal test fails them.
type Rule struct {
	// ID names the rule in tests and in docs/configuration.md.
	ID string
	// Keys are the config keys the rule checks, as docs/configuration.md writes them.
	Keys string
	// Refuses says what is refused and why; an error says it again for one value.
	Refuses string
}

var registered []*Rule

func newRule(id, keys, refuses string) *Rule {
	r := &Rule{ID: id, Keys: keys, Refuses: refuses}
	registered = append(registered, r)
	return r
}

// Rules returns every rule, in the order of the table below.
func Rules() []Rule {
	out := make([]Rule, 0, len(registered))
	for _, r := range registered {
		out = append(out, *r)
	}
	return out
}

// RulesMarkdown is docs/configuration.md's table of refusals, generated from Rules.
func RulesMarkdown() string {
	var b strings.Builder
	b.WriteString("| rule | keys | refused when |\n|---|---|---|\n")
	for _, r := range registered {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.ID, r.Keys, strings.ReplaceAll(r.Refuses, "|", `\|`))
	}
	return b.String()
}

// The rules, in one table. Keep docs/configuration.md in step with `go test ./tests -run
// TestConfigurationDocListsEveryRule -update-docs`.
var (
	// Keys and types.
	ruleUnknownKey = newRule("unknown-key", "any key under `railgrid-kcp:`",
		"a key the program does not know, at the top level or inside a section; keys are matched exactly, capitals included")
	ruleDuplicateKey = newRule("duplicate-key", "any key",
		"a key given twice in one mapping")
	ruleType = newRule("type", "any key",
		"a value of the wrong type: a string, a whole number, true/false, a mapping or a list as the key takes; null is refused too (leave a key out for its default)")
	rulePlatform = newRule("platform", "`platform`",
		"missing, or neither kind nor gke")
	ruleOtherPlatformSection = newRule("other-platform-section", "`kind`, `gke`",
		"a non-empty section of the platform the stack does not run on")

	// Versions and the operator chart.
	rulePinnedVersion = newRule("pinned-version", "`versions.*`",
		"must be a pinned release, a full semantic version (vX.Y.Z or a pre-release such as vX.Y.Z-rc.1; the chart without the v, X.Y.Z): not empty, not latest, not a floating tag such as v1.2, no +build suffix")
	ruleOperatorPair = newRule("operator-pair", "`versions.operatorChart`, `versions.operatorImage`",
		"a kcp-operator chart and image that are not a known pair: the chart's CRDs must match the operator, so they move together")
	ruleChartRepository = newRule("chart-repository", "`operator.chartRepository`, `kind.certManagerChart.repository`, `kind.envoyGatewayChart.repository`",
		"must start with https:// (a Helm repository) or oci:// (a path in an OCI registry), in lower case, and have a host and no user name or password (credentials do not belong in stack config), query or fragment")
	ruleChartSource = newRule("chart-source", "`operator.chartRepository`, `operator.chartPath`, `operator.chartCAFile`, `kind.certManagerChart`, `kind.envoyGatewayChart`",
		"two chart settings of which one would be ignored: both chartRepository and chartPath, chartCAFile with chartPath (a local chart is not downloaded, so it needs no CA), kind.certManagerChart with kind.certManagerPresent true or kind.envoyGatewayChart with kind.envoyGatewayPresent true (the stack does not install that chart); or an empty chartPath")
	ruleChartCAFile = newRule("chart-ca-file", "`operator.chartCAFile`, `kind.certManagerChart.caFile`, `kind.envoyGatewayChart.caFile`",
		"must name a readable file, read relative to the directory the program runs in (the project directory under pulumi), of PEM certificates, at least one, each a valid X.509 certificate; "+
			"refused with an oci:// repository: "+ociCARule)

	// kcp.
	ruleShardBaseURL = newRule("shard-base-url", "`kcp.*.shardBaseURL`",
		shardBaseURLRule)
	ruleHostname = newRule("hostname", "`kcp.*.hostname`",
		"must be a valid DNS name as a Gateway API hostname takes it (a lower-case RFC 1123 subdomain, no wildcard), with at least two labels of at most 63 characters and a top-level label that is not all digits")
	ruleHostnameIP = newRule("hostname-ip", "`kcp.*.hostname`",
		"an IP address: Gateway API hostnames are names, and the edge refuses an address")
	ruleHostnameDistinct = newRule("hostname-distinct", "`kcp.*.hostname`",
		"two kcp components with the same hostname")
	ruleReplicas = newRule("replicas", "`kcp.*.replicas`",
		"must be at least 1: 0 would stop the component (leave the key out for the default 2)")
	ruleShardName = newRule("shard-name", "`kcp.shards[].name`",
		fmt.Sprintf("must be a DNS label of at most %d characters that starts with a letter (RFC 1035): it names the shard, its etcd and its Services, and a Service name starts with a letter", maxShardName))
	ruleShardNameRoot = newRule("shard-name-root", "`kcp.shards[].name`",
		"root, the name of the root shard (kcp.rootShard)")
	ruleShardNameDistinct = newRule("shard-name-distinct", "`kcp.shards[].name`",
		"two shards with the same name")
	ruleRetiredShardName = newRule("retired-shard-name", "`kcp.retiredShards[]`",
		"must be the name the shard had in kcp.shards (a DNS label that starts with a letter), listed once")
	ruleRetiredRoot = newRule("retired-root", "`kcp.retiredShards[]`",
		"root: the root shard cannot be removed, as every other shard, the front proxy and the hub's kubeconfig depend on it")
	ruleRetiredActive = newRule("retired-active", "`kcp.retiredShards[]`, `kcp.shards[].name`",
		"a shard both in kcp.shards and in kcp.retiredShards; to bring a retired shard back on its kept volumes, remove it from retiredShards")
	ruleShardVanished = newRule("shard-vanished", "`kcp.shards`, `kcp.retiredShards`",
		"a shard that ran at the last up (the stack's own output "+PreviousShardsOutput+", read through a stack reference to itself) is missing from kcp.shards and not listed in kcp.retiredShards: removed by accident, or renamed in place (a rename is a retire plus an add, and orphans the old shard's data)")
	ruleShardMoved = newRule("shard-moved", "`kcp.rootShard.hostname`, `kcp.rootShard.clusterIP`, `kcp.shards[].hostname`, `kcp.shards[].clusterIP`",
		"a running shard's hostname or ClusterIP differs from the last up (read as for shard-vanished): the serving certificate, virtual-workspace URL, kubeconfigs and cached DNS answers do not all follow in one up; retire the shard and add one instead")
	ruleRequestTimeout = newRule("request-timeout", "`kcp.requestTimeout`",
		"is not configurable: kcp refuses --request-timeout (and --min-request-timeout), so every shard would stop at start with \"unknown flag\"; remove the key and set the long timeout for watches and tunnels at the edge with loadBalancer.timeout")
	ruleNameCollision = newRule("name-collision", "`kcp.shards[].name`, `hub.namespace`",
		"a generated name that another object of the same kind already has: Namespaces, Services and StatefulSets (each in its namespace), edge routes, the operator's Deployments and Services")

	// OIDC.
	ruleIssuerURL = newRule("issuer-url", "`oidc.issuerURL`",
		"must be the hub's https:// issuer URL (idp.issuerURL), without query or fragment")
	ruleClientID = newRule("client-id", "`oidc.clientID`",
		"must be set to the hub's client ID (idp.clientID)")
	ruleOIDCFixed = newRule("oidc-fixed", "`oidc.usernameClaim`, `oidc.groupsClaim`, `oidc.usernamePrefix`, `oidc.groupsPrefix`",
		oidcFixedRule)
	ruleCASecretName = newRule("ca-secret-name", "`oidc.caSecret.name`",
		"must name a Secret in kcp-system (a lower-case RFC 1123 subdomain)")
	ruleCASecretKey = newRule("ca-secret-key", "`oidc.caSecret.key`",
		"must be a Secret key (a file name): letters, digits, '-', '_' and '.', at most 253 characters, not . or .. and not starting with ..")
	ruleCACertificatesAndSecret = newRule("ca-certificates-and-secret", "`oidc.caCertificates`, `oidc.caSecret`",
		"both set: each gives the issuer's CA and kcp reads one CA file; give the CA chain as PEM text (caCertificates, the program owns the Secret) or name a Secret made by hand (caSecret), not both")
	ruleCACertificatesPEM = newRule("ca-certificates-pem", "`oidc.caCertificates`",
		caCertificatesPEMRule)
	ruleCACertificatesCA = newRule("ca-certificates-ca", "`oidc.caCertificates`",
		"a certificate that is not a CA (its basic constraints do not say CA:TRUE), such as the issuer's own serving certificate: kcp needs the CA that issued it")
	ruleCACertificatesValidity = newRule("ca-certificates-validity", "`oidc.caCertificates`",
		"a certificate that has expired or is not valid yet: kcp could not verify the issuer's certificate with it, and would refuse every user's token")

	ruleKcpResources = newRule("kcp-resources", "`kcp.resources`",
		"cpu, memory and memoryLimit must be Kubernetes quantities greater than zero, as a container's resources take them, with memory at most memoryLimit")

	// etcd and where it can run.
	ruleEtcdMembers = newRule("etcd-members", "`etcd.members`",
		"must be 1, 3 or 5: etcd needs an odd member count for quorum (1 for a small cluster, 3 per shard in production)")
	ruleEtcdVolumeSize = newRule("etcd-volume-size", "`etcd.volumeSize`",
		"must be a size as a PersistentVolumeClaim's storage request takes it: a Kubernetes quantity greater than zero, such as 20Gi, 1.5Gi or 2G")
	ruleStorageClass = newRule("storage-class", "`etcd.storageClass`",
		"must name a StorageClass (a lower-case RFC 1123 subdomain)")
	ruleKindSchedulable = newRule("kind-schedulable", "`etcd.members`, `kind.nodeZones`",
		"more etcd members than the kind cluster has nodes in distinct zones (kind.nodeZones, default 1 as kind/cluster.yaml creates one node): each member needs a node of its own, and 3 or 5 members spread over that many zones, so the others would stay Pending")
	ruleKindNodeZones = newRule("kind-node-zones", "`kind.nodeZones`",
		"must be at least 1: the number of nodes of the kind cluster in distinct topology.kubernetes.io/zone zones")
	ruleGKEZonesForMembers = newRule("gke-zones-for-members", "`gke.zones`, `etcd.members`",
		"fewer distinct zones than etcd.members (3 or 5): members are spread one per zone (minDomains)")

	// Network and edge.
	ruleServiceCIDR = newRule("service-cidr", "`network.serviceCIDR`",
		"must be the cluster's IPv4 Service range in CIDR form, such as 10.96.0.0/16 (at most /28)")
	ruleClusterIPAddress = newRule("cluster-ip-address", fixedClusterIPKeys,
		"must be an IPv4 address")
	ruleClusterIPRange = newRule("cluster-ip-range", fixedClusterIPKeys,
		"outside the Service range (network.serviceCIDR; on gke also the range the cluster lookup returns)")
	ruleClusterIPReserved = newRule("cluster-ip-reserved", fixedClusterIPKeys,
		fmt.Sprintf("one of the first %d addresses of the Service range, which the cluster reserves (network address, kubernetes API, cluster DNS)", reservedCount))
	ruleClusterIPBand = newRule("cluster-ip-band", fixedClusterIPKeys,
		"outside the static band of the Service range (its first min(max(16, size/16), 256) addresses), which the dynamic allocator leaves to fixed addresses")
	ruleClusterIPDistinct = newRule("cluster-ip-distinct", fixedClusterIPKeys,
		"two components (the issuer's Service on kind included) with the same address")
	ruleLBTimeout = newRule("lb-timeout", "`loadBalancer.timeout`",
		"must be a duration of at least 60s: watches and edge tunnels are long-lived and a short timeout closes them (default 1h)")

	// The hub's kubeconfig.
	ruleHubNamespace = newRule("hub-namespace", "`hub.namespace`",
		"must be a namespace name (a lower-case RFC 1123 label) other than default and kube-*, which the cluster owns")
	ruleHubSecretName = newRule("hub-secret-name", "`hub.secretName`",
		"must be a Secret name, a lower-case RFC 1123 subdomain (the hub's kcp.external.existingSecret)")
	ruleHubSecretKey = newRule("hub-secret-key", "`hub.secretKey`",
		"must be "+HubSecretKey+": the hub chart mounts that key as /kcp-kubeconfig/"+HubSecretKey)
	ruleHubValidity = newRule("hub-validity", "`hub.kubeconfigValidity`",
		"must be a duration of at least 1h, such as 8766h")
	ruleRemintGeneration = newRule("remint-generation", "`hub.remintGeneration`",
		"must be 0 or more; raise it to mint a new credential")

	// kind.
	ruleKindContext = newRule("kind-context", "`kind.context`",
		"must name the kind cluster's kubeconfig context")
	ruleKindKubeconfig = newRule("kind-kubeconfig", "`kind.kubeconfig`",
		"must be empty ($KUBECONFIG, then ~/.kube/config) or the path of a kubeconfig file that exists")
	ruleKindNodePort = newRule("kind-node-port", "`kind.gatewayNodePort`",
		"must be a NodePort between 30000 and 32767")
	ruleIssuerClusterIPHost = newRule("issuer-cluster-ip-host", "`kind.issuerClusterIP`, `oidc.issuerURL`",
		"set while the issuer's host (of oidc.issuerURL) cannot take a split-horizon answer: an IP address (it needs none), a kcp hostname (the issuer needs a name of its own), or not a DNS name (a lower-case RFC 1123 subdomain)")
	ruleIssuerClusterIPGKE = newRule("issuer-cluster-ip-gke", "`kind.issuerClusterIP`",
		issuerClusterIPGKERule)

	// gke.
	ruleGKEProject = newRule("gke-project", "`gke.project`",
		"must be a Google Cloud project ID")
	ruleGKELocation = newRule("gke-location", "`gke.location`",
		"must be the region of a regional cluster, such as europe-west1")
	ruleGKECluster = newRule("gke-cluster", "`gke.cluster`",
		"must name the existing GKE cluster")
	ruleGKEZone = newRule("gke-zone", "`gke.zones[]`",
		"must be a zone of gke.location, such as europe-west1-b")
	ruleGKEZoneDistinct = newRule("gke-zone-distinct", "`gke.zones[]`",
		"a zone listed twice")
	ruleReplicasGKE = newRule("replicas-gke", "`kcp.*.replicas`",
		"below 2 on gke: a node-pool upgrade, a drain or a zone loss stops a server with one replica, and without the root shard no workspace resolves")
	ruleMachineType = newRule("machine-type", "`gke.nodePools.*.machineType`",
		"must name a machine type")
	rulePoolMin = newRule("pool-min", "`gke.nodePools.*.minPerZone`",
		"must be 0 or more")
	rulePoolMax = newRule("pool-max", "`gke.nodePools.*.maxPerZone`",
		"must be at least 1 and at least minPerZone")
	ruleDiskSize = newRule("disk-size", "`gke.nodePools.*.diskSizeGb`",
		"must be at least 10")
	ruleCron = newRule("cron", "`etcd.defragSchedule`, `hub.copySchedule`, `gke.snapshots.schedule`, `gke.snapshots.drillSchedule`",
		"must be a CronJob schedule: five cron fields such as \"0 * * * *\" or a descriptor such as @hourly, without a TZ= or CRON_TZ= prefix, naming a date that exists")
	ruleRetention = newRule("retention", "`gke.snapshots.retentionDays`",
		"must be between 1 and 3650 days")
	ruleGcloudTag = newRule("gcloud-tag", "`gke.snapshots.gcloudImageTag`",
		"must be a pinned google-cloud-cli tag such as "+DefaultGcloudImageTag)
	ruleDNSTTL = newRule("dns-ttl", "`gke.dns.ttl`",
		fmt.Sprintf("must be between 1 and %d seconds: kube-dns caches answers and a ClusterIP answer should stay short-lived", maxDNSTTL))
	ruleResponsePolicy = newRule("response-policy", "`gke.dns.existingResponsePolicy`",
		"must name a Cloud DNS response policy (or be left out to create one)")
	ruleGatewayClass = newRule("gateway-class", "`gke.gateway.className`",
		"must name a GKE GatewayClass (a lower-case RFC 1123 subdomain)")
	ruleGatewayCertificate = newRule("gateway-certificate", "`gke.gateway.certificateSecret`, `gke.gateway.certManagerClusterIssuer`",
		"must set exactly one of certificateSecret (a Secret name) and certManagerClusterIssuer (a ClusterIssuer name), each a lower-case RFC 1123 subdomain, for the HTTPS listeners")
)
