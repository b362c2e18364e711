package config

import (
	"fmt"
	"net/netip"
	"net/url"
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
	semverTag     = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)
	chartVersion  = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	gcloudTag     = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+-(stable|alpine|slim)$`)
	dnsLabel      = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	hostLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	quantity      = regexp.MustCompile(`^[1-9][0-9]*(Mi|Gi|Ti)$`)
	gcpProject    = regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]$`)
	gcpRegion     = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+$`)
	cronField     = regexp.MustCompile(`^[0-9*/,\-]+$`)
	maxShardName  = 30
	minLBTimeout  = 60 * time.Second
	minValidity   = time.Hour
	maxDNSTTL     = 300
	reservedCount = uint64(11) // network address, .1 (kubernetes API) ... .10 (cluster DNS)
)

// Validate checks every rule at once and returns all violations as Errors.
func (c *Config) Validate() error {
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
	return errs.orNil()
}

func (c *Config) validatePlatform(errs *Errors) {
	switch c.Platform {
	case PlatformKind:
		if c.GKE != nil {
			errs.add("gke", "(set)", "belongs to the gke platform; this stack's platform is kind")
		}
	case PlatformGKE:
		if c.Kind != nil {
			errs.add("kind", "(set)", "belongs to the kind platform; this stack's platform is gke")
		}
	default:
		errs.add("platform", string(c.Platform), "must be kind or gke")
	}
}

func (c *Config) validateVersions(errs *Errors) {
	v := c.Versions
	pinned := func(key, value string, pattern *regexp.Regexp, example string) {
		if !pattern.MatchString(value) {
			errs.add(key, value, "must be a pinned release such as "+example+" (not empty, not latest, not a floating tag)")
		}
	}
	pinned("versions.kcp", v.Kcp, semverTag, DefaultKcpVersion+"; every kcp image (root shard, its proxy, shards, front proxy) uses it")
	pinned("versions.operatorChart", v.OperatorChart, chartVersion, DefaultOperatorChartVersion)
	pinned("versions.operatorImage", v.OperatorImage, semverTag, DefaultOperatorImageTag)
	pinned("versions.etcd", v.Etcd, semverTag, DefaultEtcdVersion)
	pinned("versions.certManager", v.CertManager, semverTag, DefaultCertManagerVersion)
	pinned("versions.envoyGateway", v.EnvoyGateway, semverTag, DefaultEnvoyGatewayVersion)
	if want, known := KnownOperatorPairs[v.OperatorChart]; chartVersion.MatchString(v.OperatorChart) && semverTag.MatchString(v.OperatorImage) && (!known || want != v.OperatorImage) {
		errs.add("versions.operatorImage", v.OperatorImage, fmt.Sprintf(
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
	if c.Operator.ChartPath != "" {
		return
	}
	u, err := url.Parse(c.Operator.ChartRepository)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		errs.add("operator.chartRepository", c.Operator.ChartRepository, "must be an https:// Helm repository URL")
	}
}

func (c *Config) validateKcp(errs *Errors) {
	k := c.Kcp
	hostKeys := map[string]string{}
	checkEndpoint := func(key string, e Endpoint) {
		if e.ShardBaseURL != nil {
			errs.add(key+".shardBaseURL", *e.ShardBaseURL, shardBaseURLRule)
		}
		if !isDNSName(e.Hostname) {
			errs.add(key+".hostname", e.Hostname, "must be a valid DNS name with at least two labels (lower case letters, digits, hyphens)")
		} else if other, dup := hostKeys[e.Hostname]; dup {
			errs.add(key+".hostname", e.Hostname, "must be distinct; "+other+".hostname has the same name")
		} else {
			hostKeys[e.Hostname] = key
		}
		if e.Replicas < 1 {
			errs.add(key+".replicas", strconv.Itoa(e.Replicas), "must be at least 1")
		}
	}
	checkEndpoint("kcp.frontProxy", k.FrontProxy)
	checkEndpoint("kcp.rootShard", k.RootShard)
	names := map[string]bool{}
	for i, s := range k.Shards {
		key := fmt.Sprintf("kcp.shards[%d]", i)
		switch {
		case !dnsLabel.MatchString(s.Name) || len(s.Name) > maxShardName:
			errs.add(key+".name", s.Name, fmt.Sprintf("must be a DNS label of at most %d characters (it names the shard, its etcd and its Services)", maxShardName))
		case s.Name == RootShardName:
			errs.add(key+".name", s.Name, "is reserved for the root shard (kcp.rootShard)")
		case names[s.Name]:
			errs.add(key+".name", s.Name, "must be distinct; another shard has the same name")
		}
		names[s.Name] = true
		checkEndpoint(key, s.Endpoint)
	}
	if d, err := time.ParseDuration(k.RequestTimeout); err != nil || d < minLBTimeout {
		errs.add("kcp.requestTimeout", k.RequestTimeout, "must be a duration of at least 60s: streaming verbs are cut when it ends")
	}
}

func (c *Config) validateOIDC(errs *Errors) {
	o := c.OIDC
	if u, err := url.Parse(o.IssuerURL); err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		errs.add("oidc.issuerURL", o.IssuerURL, "must be the hub's https:// issuer URL (idp.issuerURL), without query or fragment")
	}
	if strings.TrimSpace(o.ClientID) == "" {
		errs.add("oidc.clientID", o.ClientID, "must be set to the hub's client ID (idp.clientID)")
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
			errs.add(f.key, *f.value, oidcFixedRule)
		}
	}
	if o.CASecret != nil {
		if !isDNSName(o.CASecret.Name) && !dnsLabel.MatchString(o.CASecret.Name) {
			errs.add("oidc.caSecret.name", o.CASecret.Name, "must name a Secret in kcp-system")
		}
		if strings.TrimSpace(o.CASecret.Key) == "" || strings.Contains(o.CASecret.Key, "/") {
			errs.add("oidc.caSecret.key", o.CASecret.Key, "must be a Secret key (a file name)")
		}
	}
}

func (c *Config) validateEtcd(errs *Errors) {
	e := c.Etcd
	if !slices.Contains([]int{1, 3, 5}, e.Members) {
		errs.add("etcd.members", strconv.Itoa(e.Members), "must be 1, 3 or 5: etcd needs an odd member count for quorum (1 for a small cluster, 3 per shard in production)")
	}
	if !quantity.MatchString(e.VolumeSize) {
		errs.add("etcd.volumeSize", e.VolumeSize, "must be a size such as 20Gi (Mi, Gi or Ti)")
	}
	if !dnsLabel.MatchString(e.StorageClass) && !isDNSName(e.StorageClass) {
		errs.add("etcd.storageClass", e.StorageClass, "must name a StorageClass")
	}
}

func (c *Config) validateNetwork(errs *Errors) {
	prefix, err := netip.ParsePrefix(c.Network.ServiceCIDR)
	if err != nil || !prefix.Addr().Is4() || prefix.Masked() != prefix || prefix.Bits() > 28 {
		errs.add("network.serviceCIDR", c.Network.ServiceCIDR, "must be the cluster's IPv4 Service range in CIDR form, such as 10.96.0.0/16")
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
			errs.add(key, value, "must be an IPv4 address")
			return
		case !serviceRange.Contains(ip):
			errs.add(key, value, fmt.Sprintf("must be inside the Service range %s (%s)", serviceRange, rangeSource))
			return
		}
		offset := ipToUint(ip) - first
		switch {
		case offset < reservedCount:
			errs.add(key, value, fmt.Sprintf("is one of the first %d addresses of %s, which the cluster reserves (network address, kubernetes API, cluster DNS)", reservedCount, serviceRange))
		case offset >= band:
			errs.add(key, value, fmt.Sprintf("must be in the static band of %s (its first %d addresses), which the dynamic allocator leaves to fixed addresses", serviceRange, band))
		}
		if other, dup := seen[ip]; dup {
			errs.add(key, value, "must be distinct; "+other+" has the same address")
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
		errs.add("loadBalancer.timeout", c.LoadBalancer.Timeout, "must be a duration of at least 60s: watches and edge tunnels are long-lived and a short timeout closes them (default 1h)")
	}
}

func (c *Config) validateHub(errs *Errors) {
	h := c.Hub
	if !dnsLabel.MatchString(h.Namespace) {
		errs.add("hub.namespace", h.Namespace, "must be a namespace name")
	}
	if !dnsLabel.MatchString(h.SecretName) && !isDNSName(h.SecretName) {
		errs.add("hub.secretName", h.SecretName, "must be a Secret name (the hub's kcp.external.existingSecret)")
	}
	if h.SecretKey != HubSecretKey {
		errs.add("hub.secretKey", h.SecretKey, "must be "+HubSecretKey+": the hub chart mounts that key as /kcp-kubeconfig/"+HubSecretKey)
	}
	if d, err := time.ParseDuration(h.KubeconfigValidity); err != nil || d < minValidity {
		errs.add("hub.kubeconfigValidity", h.KubeconfigValidity, "must be a duration of at least 1h, such as 8766h")
	}
	if h.RemintGeneration < 0 {
		errs.add("hub.remintGeneration", strconv.Itoa(h.RemintGeneration), "must be 0 or more; raise it to mint a new credential")
	}
}

func (c *Config) validateKind(errs *Errors) {
	k := c.Kind
	if strings.TrimSpace(k.Context) == "" {
		errs.add("kind.context", k.Context, "must name the kind cluster's kubeconfig context")
	}
	if k.GatewayNodePort < 30000 || k.GatewayNodePort > 32767 {
		errs.add("kind.gatewayNodePort", strconv.Itoa(k.GatewayNodePort), "must be a NodePort between 30000 and 32767")
	}
}

func (c *Config) validateGKE(errs *Errors) {
	g := c.GKE
	if !gcpProject.MatchString(g.Project) {
		errs.add("gke.project", g.Project, "must be a Google Cloud project ID")
	}
	if !gcpRegion.MatchString(g.Location) {
		errs.add("gke.location", g.Location, "must be the region of a regional cluster, such as europe-west1")
	}
	if !dnsLabel.MatchString(g.Cluster) {
		errs.add("gke.cluster", g.Cluster, "must name the existing GKE cluster")
	}
	zones := map[string]bool{}
	for i, z := range g.Zones {
		key := fmt.Sprintf("gke.zones[%d]", i)
		if !strings.HasPrefix(z, g.Location+"-") || len(z) != len(g.Location)+2 {
			errs.add(key, z, "must be a zone of "+g.Location+", such as "+g.Location+"-b")
		}
		if zones[z] {
			errs.add(key, z, "must be distinct")
		}
		zones[z] = true
	}
	if c.Etcd.Members >= 3 && len(zones) < c.Etcd.Members {
		errs.add("gke.zones", strings.Join(g.Zones, ","), fmt.Sprintf(
			"must list at least %d distinct zones: etcd.members is %d and members are spread one per zone (minDomains %d)",
			c.Etcd.Members, c.Etcd.Members, c.Etcd.Members))
	}
	checkPool := func(key string, p NodePool) {
		if strings.TrimSpace(p.MachineType) == "" {
			errs.add(key+".machineType", p.MachineType, "must name a machine type")
		}
		if p.MinPerZone < 0 {
			errs.add(key+".minPerZone", strconv.Itoa(p.MinPerZone), "must be 0 or more")
		}
		if p.MaxPerZone < 1 || p.MaxPerZone < p.MinPerZone {
			errs.add(key+".maxPerZone", strconv.Itoa(p.MaxPerZone), "must be at least 1 and at least minPerZone")
		}
		if p.DiskSizeGb < 10 {
			errs.add(key+".diskSizeGb", strconv.Itoa(p.DiskSizeGb), "must be at least 10")
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
			errs.add(key, value, "must be a five-field cron schedule such as \"0 * * * *\"")
		}
	}
	checkCron("gke.snapshots.schedule", g.Snapshots.Schedule)
	checkCron("gke.snapshots.drillSchedule", g.Snapshots.DrillSchedule)
	if g.Snapshots.RetentionDays < 1 || g.Snapshots.RetentionDays > 3650 {
		errs.add("gke.snapshots.retentionDays", strconv.Itoa(g.Snapshots.RetentionDays), "must be between 1 and 3650 days")
	}
	if !gcloudTag.MatchString(g.Snapshots.GcloudImage) {
		errs.add("gke.snapshots.gcloudImageTag", g.Snapshots.GcloudImage, "must be a pinned google-cloud-cli tag such as "+DefaultGcloudImageTag)
	}
	if g.DNS.TTL < 1 || g.DNS.TTL > maxDNSTTL {
		errs.add("gke.dns.ttl", strconv.Itoa(g.DNS.TTL), fmt.Sprintf("must be between 1 and %d seconds: kube-dns caches answers and a ClusterIP answer should stay short-lived", maxDNSTTL))
	}
	if g.DNS.ExistingResponsePolicy != "" && !dnsLabel.MatchString(g.DNS.ExistingResponsePolicy) {
		errs.add("gke.dns.existingResponsePolicy", g.DNS.ExistingResponsePolicy, "must name a Cloud DNS response policy")
	}
	if strings.TrimSpace(g.Gateway.ClassName) == "" {
		errs.add("gke.gateway.className", g.Gateway.ClassName, "must name a GKE GatewayClass")
	}
	if (g.Gateway.CertificateSecret == "") == (g.Gateway.CertManagerClusterIssuer == "") {
		errs.add("gke.gateway", fmt.Sprintf("certificateSecret=%q certManagerClusterIssuer=%q", g.Gateway.CertificateSecret, g.Gateway.CertManagerClusterIssuer),
			"must set exactly one of certificateSecret and certManagerClusterIssuer for the HTTPS listeners")
	}
}

// isDNSName reports whether s is a lower-case DNS name with at least two labels.
func isDNSName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if len(l) > 63 || !hostLabel.MatchString(l) {
			return false
		}
	}
	return true
}
