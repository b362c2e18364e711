package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Values fixed by the hub: it hard-codes every user's RBAC identity as railgrid:<email>.
const (
	FixedUsernameClaim  = "email"
	FixedGroupsClaim    = "groups"
	FixedUsernamePrefix = "railgrid:"
	FixedGroupsPrefix   = "railgrid:"
)

// Why a config may not set the shard base URL (the design document's first rule).
const shardBaseURLRule = "is not configurable: spec.shardBaseURL drives front-proxy routing and the cluster index, and " +
	"pointing it at a public name takes the whole platform down (every request arrives as an empty user); " +
	"only the virtual-workspace URL goes on the public shard hostname, and the program sets it from the hostname"

const oidcFixedRule = "is fixed by the hub, which hard-codes every user's RBAC identity as railgrid:<email>: " +
	"kcp must use usernameClaim email, groupsClaim groups and the railgrid: prefixes"

var (
	semverTag    = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)
	chartVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	gcloudTag    = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+-(stable|alpine|slim)$`)
	dnsLabel     = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	hostLabel    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	quantity     = regexp.MustCompile(`^[1-9][0-9]*(Mi|Gi|Ti)$`)
	gcpProject   = regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]$`)
	gcpRegion    = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+$`)
	cronField    = regexp.MustCompile(`^[0-9*/,\-]+$`)
)

// Limits; constants, so that the rules table (rules.go) that quotes them initializes in
// its own order.
const (
	maxShardName  = 30
	minLBTimeout  = 60 * time.Second
	minValidity   = time.Hour
	maxDNSTTL     = 300
	reservedCount = uint64(11) // network address, .1 (kubernetes API) ... .10 (cluster DNS)
)

// Validate checks every rule at once and returns all violations as Errors.
func (c *Config) Validate() error { return c.validate().orNil() }

func (c *Config) validate() Errors {
	var errs Errors
	c.validatePlatform(&errs)
	c.validateVersions(&errs)
	c.validateOperator(&errs)
	c.validateKcp(&errs)
	c.validateOIDC(&errs)
	c.validateEtcd(&errs)
	c.validateNetwork(&errs)
	c.validateLoadBalancer(&errs)
	c.validateHub(&errs)
	switch c.Platform {
	case PlatformKind:
		c.validateKind(&errs)
	case PlatformGKE:
		c.validateGKE(&errs)
	}
	c.validateGeneratedNames(&errs)
	return errs
}

func (c *Config) validatePlatform(errs *Errors) {
	switch c.Platform {
	case PlatformKind:
		if c.GKE != nil {
			errs.addf(ruleOtherPlatformSection, "gke", "(set)", "belongs to the gke platform; this stack's platform is kind")
		}
	case PlatformGKE:
		if c.Kind != nil {
			errs.addf(ruleOtherPlatformSection, "kind", "(set)", "belongs to the kind platform; this stack's platform is gke")
		}
	default:
		errs.addf(rulePlatform, "platform", string(c.Platform), "must be kind or gke")
	}
}

func (c *Config) validateVersions(errs *Errors) {
	v := c.Versions
	pinned := func(key, value string, pattern *regexp.Regexp, example string) {
		if !pattern.MatchString(value) {
			errs.addf(rulePinnedVersion, key, value, "must be a pinned release such as %s (not empty, not latest, not a floating tag)", example)
		}
	}
	pinned("versions.kcp", v.Kcp, semverTag, DefaultKcpVersion+"; every kcp image (root shard, its proxy, shards, front proxy) uses it")
	pinned("versions.operatorChart", v.OperatorChart, chartVersion, DefaultOperatorChartVersion)
	pinned("versions.operatorImage", v.OperatorImage, semverTag, DefaultOperatorImageTag)
	pinned("versions.etcd", v.Etcd, semverTag, DefaultEtcdVersion)
	pinned("versions.certManager", v.CertManager, semverTag, DefaultCertManagerVersion)
	pinned("versions.envoyGateway", v.EnvoyGateway, semverTag, DefaultEnvoyGatewayVersion)
	if want, known := KnownOperatorPairs[v.OperatorChart]; chartVersion.MatchString(v.OperatorChart) && semverTag.MatchString(v.OperatorImage) && (!known || want != v.OperatorImage) {
		errs.addf(ruleOperatorPair, "versions.operatorImage", v.OperatorImage, "%s", fmt.Sprintf(
			"is not a known pair with kcp-operator chart %s (known pairs: %s); the chart's CRDs must match the operator, so they move together",
			v.OperatorChart, knownPairs()))
	}
}

func knownPairs() string {
	pairs := make([]string, 0, len(KnownOperatorPairs))
	for chart, image := range KnownOperatorPairs {
		pairs = append(pairs, "chart "+chart+" with image "+image)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ", ")
}

func (c *Config) validateOperator(errs *Errors) {
	o := c.Operator
	if c.given["operator.chartPath"] {
		if c.given["operator.chartRepository"] {
			errs.addf(ruleChartSource, "operator.chartPath", o.ChartPath, "and operator.chartRepository are both set; set one (chartPath installs from a local directory and would ignore the repository)")
		}
		if strings.TrimSpace(o.ChartPath) == "" {
			errs.addf(ruleChartSource, "operator.chartPath", o.ChartPath, "must be a local chart directory; leave it out to install from operator.chartRepository")
		}
		return
	}
	u, err := url.Parse(o.ChartRepository)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		errs.add(ruleChartRepository, "operator.chartRepository", o.ChartRepository)
	}
}

func (c *Config) validateKcp(errs *Errors) {
	k := c.Kcp
	hostKeys := map[string]string{}
	checkEndpoint := func(key string, e Endpoint) {
		if e.ShardBaseURL != nil {
			errs.add(ruleShardBaseURL, key+".shardBaseURL", *e.ShardBaseURL)
		}
		switch other, dup := hostKeys[e.Hostname]; {
		case isIPAddress(e.Hostname):
			errs.add(ruleHostnameIP, key+".hostname", e.Hostname)
		case !isDNSName(e.Hostname):
			errs.addf(ruleHostname, key+".hostname", e.Hostname, "must be a valid DNS name with at least two labels (lower case letters, digits, hyphens)")
		case dup:
			errs.addf(ruleHostnameDistinct, key+".hostname", e.Hostname, "must be distinct; %s.hostname has the same name", other)
		default:
			hostKeys[e.Hostname] = key
		}
		if e.Replicas < 1 {
			errs.add(ruleReplicas, key+".replicas", strconv.Itoa(e.Replicas))
		}
	}
	checkEndpoint("kcp.frontProxy", k.FrontProxy)
	checkEndpoint("kcp.rootShard", k.RootShard)
	names := map[string]bool{}
	for i, s := range k.Shards {
		key := fmt.Sprintf("kcp.shards[%d]", i)
		switch {
		case !validShardName(s.Name) && s.Name != RootShardName:
			errs.add(ruleShardName, key+".name", s.Name)
		case s.Name == RootShardName:
			errs.addf(ruleShardNameRoot, key+".name", s.Name, "is reserved for the root shard (kcp.rootShard)")
		case names[s.Name]:
			errs.addf(ruleShardNameDistinct, key+".name", s.Name, "must be distinct; another shard has the same name")
		}
		names[s.Name] = true
		checkEndpoint(key, s.Endpoint)
	}
	retired := map[string]bool{}
	for i, name := range k.RetiredShards {
		key := fmt.Sprintf("kcp.retiredShards[%d]", i)
		switch {
		case name == RootShardName:
			errs.add(ruleRetiredRoot, key, name)
		case !validShardName(name):
			errs.add(ruleRetiredShardName, key, name)
		case retired[name]:
			errs.addf(ruleRetiredShardName, key, name, "is listed twice; list each retired shard once")
		case names[name]:
			errs.addf(ruleRetiredActive, key, name, "is also in kcp.shards: a shard is either running or retired; to bring it back on its kept volumes, remove it from kcp.retiredShards")
		}
		retired[name] = true
	}
	if k.RequestTimeout != nil {
		errs.add(ruleRequestTimeout, "kcp.requestTimeout", *k.RequestTimeout)
	}
}

func (c *Config) validateOIDC(errs *Errors) {
	o := c.OIDC
	if u, err := url.Parse(o.IssuerURL); err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		errs.add(ruleIssuerURL, "oidc.issuerURL", o.IssuerURL)
	}
	if strings.TrimSpace(o.ClientID) == "" {
		errs.add(ruleClientID, "oidc.clientID", o.ClientID)
	}
	fixed := []struct {
		key   string
		value *string
		want  string
	}{
		{"oidc.usernameClaim", o.UsernameClaim, FixedUsernameClaim},
		{"oidc.groupsClaim", o.GroupsClaim, FixedGroupsClaim},
		{"oidc.usernamePrefix", o.UsernamePrefix, FixedUsernamePrefix},
		{"oidc.groupsPrefix", o.GroupsPrefix, FixedGroupsPrefix},
	}
	for _, f := range fixed {
		if f.value != nil && *f.value != f.want {
			errs.add(ruleOIDCFixed, f.key, *f.value)
		}
	}
	if o.CASecret != nil {
		if !isDNSName(o.CASecret.Name) && !dnsLabel.MatchString(o.CASecret.Name) {
			errs.add(ruleCASecretName, "oidc.caSecret.name", o.CASecret.Name)
		}
		if strings.TrimSpace(o.CASecret.Key) == "" || strings.Contains(o.CASecret.Key, "/") {
			errs.add(ruleCASecretKey, "oidc.caSecret.key", o.CASecret.Key)
		}
	}
}

func (c *Config) validateEtcd(errs *Errors) {
	e := c.Etcd
	if !validMembers(e.Members) {
		errs.add(ruleEtcdMembers, "etcd.members", strconv.Itoa(e.Members))
	}
	if !quantity.MatchString(e.VolumeSize) {
		errs.add(ruleEtcdVolumeSize, "etcd.volumeSize", e.VolumeSize)
	}
	if !dnsLabel.MatchString(e.StorageClass) && !isDNSName(e.StorageClass) {
		errs.add(ruleStorageClass, "etcd.storageClass", e.StorageClass)
	}
}

func (c *Config) validateNetwork(errs *Errors) {
	prefix, err := netip.ParsePrefix(c.Network.ServiceCIDR)
	if err != nil || !prefix.Addr().Is4() || prefix.Masked() != prefix || prefix.Bits() > 28 {
		errs.add(ruleServiceCIDR, "network.serviceCIDR", c.Network.ServiceCIDR)
		return
	}
	*errs = append(*errs, c.ServiceIPErrors(prefix, "network.serviceCIDR")...)
}

// ServiceIPErrors checks the fixed ClusterIPs of the owned Services against a Service
// range: valid, distinct, inside the range, past the addresses the cluster reserves and
// inside the static band that the dynamic allocator leaves to fixed addresses. The gke
// platform calls it again with the range the cluster lookup returns.
func (c *Config) ServiceIPErrors(serviceRange netip.Prefix, rangeSource string) Errors {
	var errs Errors
	size := uint64(1) << (32 - serviceRange.Bits())
	band := min(max(16, size/16), 256)
	first := ipToUint(serviceRange.Addr())
	seen := map[netip.Addr]string{}
	check := func(key, value string) {
		ip, err := netip.ParseAddr(value)
		switch {
		case err != nil || !ip.Is4():
			errs.add(ruleClusterIPAddress, key, value)
			return
		case !serviceRange.Contains(ip):
			errs.addf(ruleClusterIPRange, key, value, "must be inside the Service range %s (%s)", serviceRange, rangeSource)
			return
		}
		offset := ipToUint(ip) - first
		switch {
		case offset < reservedCount:
			errs.addf(ruleClusterIPReserved, key, value, "is one of the first %d addresses of %s, which the cluster reserves (network address, kubernetes API, cluster DNS)", reservedCount, serviceRange)
		case offset >= band:
			errs.addf(ruleClusterIPBand, key, value, "must be in the static band of %s (its first %d addresses), which the dynamic allocator leaves to fixed addresses", serviceRange, band)
		}
		if other, dup := seen[ip]; dup {
			errs.addf(ruleClusterIPDistinct, key, value, "must be distinct; %s has the same address", other)
		}
		seen[ip] = key
	}
	check("kcp.frontProxy.clusterIP", c.Kcp.FrontProxy.ClusterIP)
	check("kcp.rootShard.clusterIP", c.Kcp.RootShard.ClusterIP)
	for i, s := range c.Kcp.Shards {
		check(fmt.Sprintf("kcp.shards[%d].clusterIP", i), s.ClusterIP)
	}
	return errs
}

func ipToUint(a netip.Addr) uint64 {
	b := a.As4()
	return uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
}

func (c *Config) validateLoadBalancer(errs *Errors) {
	if d, err := time.ParseDuration(c.LoadBalancer.Timeout); err != nil || d < minLBTimeout {
		errs.add(ruleLBTimeout, "loadBalancer.timeout", c.LoadBalancer.Timeout)
	}
}

func (c *Config) validateHub(errs *Errors) {
	h := c.Hub
	if !dnsLabel.MatchString(h.Namespace) || len(h.Namespace) > 63 || h.Namespace == "default" || strings.HasPrefix(h.Namespace, "kube-") {
		errs.add(ruleHubNamespace, "hub.namespace", h.Namespace)
	}
	if !dnsLabel.MatchString(h.SecretName) && !isDNSName(h.SecretName) {
		errs.add(ruleHubSecretName, "hub.secretName", h.SecretName)
	}
	if h.SecretKey != HubSecretKey {
		errs.add(ruleHubSecretKey, "hub.secretKey", h.SecretKey)
	}
	if d, err := time.ParseDuration(h.KubeconfigValidity); err != nil || d < minValidity {
		errs.add(ruleHubValidity, "hub.kubeconfigValidity", h.KubeconfigValidity)
	}
	if h.RemintGeneration < 0 {
		errs.add(ruleRemintGeneration, "hub.remintGeneration", strconv.Itoa(h.RemintGeneration))
	}
}

func (c *Config) validateKind(errs *Errors) {
	k := c.Kind
	if strings.TrimSpace(k.Context) == "" {
		errs.add(ruleKindContext, "kind.context", k.Context)
	}
	if k.Kubeconfig != "" {
		if info, err := os.Stat(k.Kubeconfig); err != nil || info.IsDir() {
			errs.add(ruleKindKubeconfig, "kind.kubeconfig", k.Kubeconfig)
		}
	}
	if k.GatewayNodePort < 30000 || k.GatewayNodePort > 32767 {
		errs.add(ruleKindNodePort, "kind.gatewayNodePort", strconv.Itoa(k.GatewayNodePort))
	}
	switch members := c.Etcd.Members; {
	case k.NodeZones < 1:
		errs.add(ruleKindNodeZones, "kind.nodeZones", strconv.Itoa(k.NodeZones))
	case members > k.NodeZones && validMembers(members):
		errs.addf(ruleKindSchedulable, "etcd.members", strconv.Itoa(members),
			"must be at most kind.nodeZones (%d): each etcd member needs a node of its own, and 3 or 5 members spread over as many zones, so %d of %d members would stay Pending; kind/cluster.yaml creates one node (set kind.nodeZones only for a cluster with more nodes in distinct topology.kubernetes.io/zone zones)",
			k.NodeZones, members-k.NodeZones, members)
	}
}

func (c *Config) validateGKE(errs *Errors) {
	g := c.GKE
	if !gcpProject.MatchString(g.Project) {
		errs.add(ruleGKEProject, "gke.project", g.Project)
	}
	if !gcpRegion.MatchString(g.Location) {
		errs.add(ruleGKELocation, "gke.location", g.Location)
	}
	if !dnsLabel.MatchString(g.Cluster) {
		errs.add(ruleGKECluster, "gke.cluster", g.Cluster)
	}
	zones := map[string]bool{}
	for i, z := range g.Zones {
		key := fmt.Sprintf("gke.zones[%d]", i)
		if !strings.HasPrefix(z, g.Location+"-") || len(z) != len(g.Location)+2 {
			errs.addf(ruleGKEZone, key, z, "must be a zone of %s, such as %s-b", g.Location, g.Location)
		}
		if zones[z] {
			errs.addf(ruleGKEZoneDistinct, key, z, "must be distinct")
		}
		zones[z] = true
	}
	if c.Etcd.Members >= 3 && len(zones) < c.Etcd.Members {
		errs.addf(ruleGKEZonesForMembers, "gke.zones", strings.Join(g.Zones, ","),
			"must list at least %d distinct zones: etcd.members is %d and members are spread one per zone (minDomains %d)",
			c.Etcd.Members, c.Etcd.Members, c.Etcd.Members)
	}
	checkPool := func(key string, p NodePool) {
		if strings.TrimSpace(p.MachineType) == "" {
			errs.add(ruleMachineType, key+".machineType", p.MachineType)
		}
		if p.MinPerZone < 0 {
			errs.add(rulePoolMin, key+".minPerZone", strconv.Itoa(p.MinPerZone))
		}
		if p.MaxPerZone < 1 || p.MaxPerZone < p.MinPerZone {
			errs.add(rulePoolMax, key+".maxPerZone", strconv.Itoa(p.MaxPerZone))
		}
		if p.DiskSizeGb < 10 {
			errs.add(ruleDiskSize, key+".diskSizeGb", strconv.Itoa(p.DiskSizeGb))
		}
	}
	checkPool("gke.nodePools.kcp", g.NodePools.Kcp)
	checkPool("gke.nodePools.etcd", g.NodePools.Etcd)
	checkCron := func(key, value string) {
		fields := strings.Fields(value)
		ok := len(fields) == 5
		for _, f := range fields {
			ok = ok && cronField.MatchString(f)
		}
		if !ok {
			errs.add(ruleCron, key, value)
		}
	}
	checkCron("gke.snapshots.schedule", g.Snapshots.Schedule)
	checkCron("gke.snapshots.drillSchedule", g.Snapshots.DrillSchedule)
	if g.Snapshots.RetentionDays < 1 || g.Snapshots.RetentionDays > 3650 {
		errs.add(ruleRetention, "gke.snapshots.retentionDays", strconv.Itoa(g.Snapshots.RetentionDays))
	}
	if !gcloudTag.MatchString(g.Snapshots.GcloudImage) {
		errs.add(ruleGcloudTag, "gke.snapshots.gcloudImageTag", g.Snapshots.GcloudImage)
	}
	if g.DNS.TTL < 1 || g.DNS.TTL > maxDNSTTL {
		errs.add(ruleDNSTTL, "gke.dns.ttl", strconv.Itoa(g.DNS.TTL))
	}
	if g.DNS.ExistingResponsePolicy != "" && !dnsLabel.MatchString(g.DNS.ExistingResponsePolicy) {
		errs.add(ruleResponsePolicy, "gke.dns.existingResponsePolicy", g.DNS.ExistingResponsePolicy)
	}
	if strings.TrimSpace(g.Gateway.ClassName) == "" {
		errs.add(ruleGatewayClass, "gke.gateway.className", g.Gateway.ClassName)
	}
	if (g.Gateway.CertificateSecret == "") == (g.Gateway.CertManagerClusterIssuer == "") {
		errs.add(ruleGatewayCertificate, "gke.gateway", fmt.Sprintf("certificateSecret=%q certManagerClusterIssuer=%q", g.Gateway.CertificateSecret, g.Gateway.CertManagerClusterIssuer))
	}
}

// validMembers reports whether n is an etcd member count the program runs.
func validMembers(n int) bool { return slices.Contains([]int{1, 3, 5}, n) }

// validShardName reports whether name may name a shard: a DNS label of at most
// maxShardName characters other than the root shard's name.
func validShardName(name string) bool {
	return dnsLabel.MatchString(name) && len(name) <= maxShardName && name != RootShardName
}

// isIPAddress reports whether s is an IP address, which Gateway API refuses as a
// hostname ("IPs are not allowed": gateway-api apis/v1 shared_types.go, type Hostname).
func isIPAddress(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// isDNSName reports whether s is a lower-case DNS name with at least two labels.
func isDNSName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	if len(labels) < 2 || strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return false // a top-level domain is never all digits
	}
	for _, l := range labels {
		if len(l) > 63 || !hostLabel.MatchString(l) {
			return false
		}
	}
	return true
}
