package config

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
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

	"github.com/robfig/cron/v3"
	"golang.org/x/mod/semver"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/railgrid/railgrid-kcp/naming"
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

// Why a CA file cannot go with an oci:// chart repository. The Kubernetes provider pulls
// an OCI chart with a registry client of its own, made without TLS options, so Helm's
// repository CA file would be silently ignored for it.
const ociCARule = "the Kubernetes provider pulls OCI charts with a registry client of its own that takes no CA file, so the file would be silently ignored; " +
	"an oci:// mirror behind a private CA needs that CA in the trust store of the machine that runs pulumi (SSL_CERT_FILE or SSL_CERT_DIR, which Go reads)"

const oidcFixedRule = "is fixed by the hub, which hard-codes every user's RBAC identity as railgrid:<email>: " +
	"kcp must use usernameClaim email, groupsClaim groups and the railgrid: prefixes"

// Names and tags that are not Kubernetes values, so no Kubernetes parser applies: Google
// Cloud's names (a GKE cluster and a Cloud DNS response policy are RFC 1035 labels), and
// google-cloud-cli tags, whose -stable, -alpine or -slim suffix is an image variant that a
// semantic-version parser would take for a pre-release.
var (
	gcloudTag  = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+-(stable|alpine|slim)$`)
	gcpName    = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	gcpProject = regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]$`)
	gcpRegion  = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+$`)
)

// Limits; constants, so that the rules table (rules.go) that quotes them initializes in
// its own order.
const (
	// maxShardName leaves room for what this program and the operator add to a shard's
	// name (kcp-, etcd-, -shard-kcp, -headless, the etcd StatefulSet's revision hash)
	// within the 63 characters of a DNS label.
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
	c.validateKcpResources(&errs)
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
	pinned := func(key, value string, isPinned func(string) bool, example string) {
		if !isPinned(value) {
			errs.addf(rulePinnedVersion, key, value, "must be a pinned release such as %s (not empty, not latest, not a floating tag such as v1.2, no +build suffix)", example)
		}
	}
	pinned("versions.kcp", v.Kcp, pinnedTag, DefaultKcpVersion+"; every kcp image (root shard, its proxy, shards, front proxy) uses it")
	pinned("versions.operatorChart", v.OperatorChart, pinnedChartVersion, DefaultOperatorChartVersion+", without a leading v")
	pinned("versions.operatorImage", v.OperatorImage, pinnedTag, DefaultOperatorImageTag)
	pinned("versions.etcd", v.Etcd, pinnedTag, DefaultEtcdVersion)
	pinned("versions.certManager", v.CertManager, pinnedTag, DefaultCertManagerVersion)
	pinned("versions.envoyGateway", v.EnvoyGateway, pinnedTag, DefaultEnvoyGatewayVersion)
	if want, known := KnownOperatorPairs[v.OperatorChart]; pinnedChartVersion(v.OperatorChart) && pinnedTag(v.OperatorImage) && (!known || want != v.OperatorImage) {
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
		if c.given["operator.chartCAFile"] {
			errs.addf(ruleChartSource, "operator.chartCAFile", o.ChartCAFile, "is set with operator.chartPath: a local chart directory is not downloaded, so it needs no CA; remove one")
		}
		if strings.TrimSpace(o.ChartPath) == "" {
			errs.addf(ruleChartSource, "operator.chartPath", o.ChartPath, "must be a local chart directory; leave it out to install from operator.chartRepository")
		}
		return
	}
	c.validateChartSource(errs, "operator.chartRepository", "operator.chartCAFile", o.ChartSource())
}

// validateChartSource checks where a chart comes from: the repository (repositoryKey)
// and, when the config sets it, the CA file of an https repository (caFileKey).
func (c *Config) validateChartSource(errs *Errors, repositoryKey, caFileKey string, s ChartSource) {
	problem, shown := chartRepositoryProblem(s.Repository)
	if problem != "" {
		errs.addf(ruleChartRepository, repositoryKey, shown, "%s: %s", ruleChartRepository.Refuses, problem)
	}
	if !c.given[caFileKey] {
		return
	}
	switch {
	case s.IsOCI():
		errs.addf(ruleChartCAFile, caFileKey, s.CAFile, "is set with the oci:// repository %s: %s", shown, ociCARule)
	case s.CAFile == "":
		errs.addf(ruleChartCAFile, caFileKey, s.CAFile, "is empty: name a file of PEM certificates, or leave the key out to trust the system's CAs")
	default:
		if problem := caFileProblem(s.CAFile); problem != "" {
			errs.addf(ruleChartCAFile, caFileKey, s.CAFile, "must name a readable file of PEM certificates, each a valid X.509 certificate (a relative path is read from the directory the program runs in): %s", problem)
		}
	}
}

// chartRepositoryProblem says why repository cannot be a chart's source, or "" if it
// can; shown is the repository as an error may show it (a password is masked).
func chartRepositoryProblem(repository string) (problem, shown string) {
	u, err := url.Parse(repository)
	if urlErr := (*url.Error)(nil); errors.As(err, &urlErr) {
		// url.Error repeats the whole URL, password included: keep only its reason.
		return urlErr.Err.Error(), maskPassword(repository)
	}
	shown = repository
	if _, hasPassword := u.User.Password(); hasPassword {
		shown = u.Redacted()
	}
	switch {
	// Spelled exactly: Go's URL parser takes a scheme in capitals, but Helm tells an OCI
	// chart by the prefix oci:// in lower case.
	case !strings.HasPrefix(repository, "https://") && !strings.HasPrefix(repository, OCIScheme):
		return "it does not start with https:// or oci:// (in lower case)", shown
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return "it has no host", shown
	case u.User != nil:
		return "it has a user name", shown
	case u.RawQuery != "" || u.ForceQuery:
		return "it has a query", shown
	case u.Fragment != "" || strings.Contains(repository, "#"):
		return "it has a fragment", shown
	}
	return "", shown
}

// maskPassword masks the password of a URL that does not parse, as url.URL.Redacted
// does for one that does: scheme://user:xxxxx@rest.
func maskPassword(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	authority, _, _ := strings.Cut(rest, "/")
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return raw
	}
	user, _, hasPassword := strings.Cut(authority[:at], ":")
	if !hasPassword {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// caFileProblem says why path does not name a file of PEM certificates that Helm can
// trust, or "" if it does. Helm builds its trust pool with x509.CertPool.AppendCertsFromPEM,
// which silently skips a certificate it cannot parse, so each is parsed here.
func caFileProblem(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	certificates := 0
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Sprintf("its certificate %d does not parse as X.509: %v", certificates+1, err)
		}
		certificates++
	}
	if certificates == 0 {
		return "it holds no PEM certificate (no -----BEGIN CERTIFICATE----- block)"
	}
	return ""
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
		case hostnameProblem(e.Hostname) != "":
			errs.addf(ruleHostname, key+".hostname", e.Hostname, "%s: %s", ruleHostname.Refuses, hostnameProblem(e.Hostname))
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
		case s.Name != naming.RootShardName && shardNameProblem(s.Name) != "":
			errs.addf(ruleShardName, key+".name", s.Name, "%s: %s", ruleShardName.Refuses, shardNameProblem(s.Name))
		case s.Name == naming.RootShardName:
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
		case name == naming.RootShardName:
			errs.add(ruleRetiredRoot, key, name)
		case shardNameProblem(name) != "":
			errs.addf(ruleRetiredShardName, key, name, "%s: %s", ruleRetiredShardName.Refuses, shardNameProblem(name))
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
		kubeName(errs, ruleCASecretName, "oidc.caSecret.name", o.CASecret.Name, validation.IsDNS1123Subdomain)
		kubeName(errs, ruleCASecretKey, "oidc.caSecret.key", o.CASecret.Key, validation.IsConfigMapKey)
	}
}

func (c *Config) validateKcpResources(errs *Errors) {
	r := c.Kcp.Resources
	parsed := map[string]resource.Quantity{}
	for _, f := range []struct{ key, value string }{
		{"kcp.resources.cpu", r.CPU}, {"kcp.resources.memory", r.Memory}, {"kcp.resources.memoryLimit", r.MemoryLimit},
	} {
		switch q, err := resource.ParseQuantity(f.value); {
		case err != nil:
			errs.addf(ruleKcpResources, f.key, f.value, "%s: %v", ruleKcpResources.Refuses, err)
		case q.Sign() <= 0:
			errs.addf(ruleKcpResources, f.key, f.value, "%s: must be greater than zero", ruleKcpResources.Refuses)
		default:
			parsed[f.key] = q
		}
	}
	mem, okMem := parsed["kcp.resources.memory"]
	limit, okLimit := parsed["kcp.resources.memoryLimit"]
	if okMem && okLimit && mem.Cmp(limit) > 0 {
		errs.addf(ruleKcpResources, "kcp.resources.memory", r.Memory, "%s: above kcp.resources.memoryLimit %s", ruleKcpResources.Refuses, r.MemoryLimit)
	}
}

func (c *Config) validateEtcd(errs *Errors) {
	e := c.Etcd
	if !validMembers(e.Members) {
		errs.add(ruleEtcdMembers, "etcd.members", strconv.Itoa(e.Members))
	}
	// What the API server asks of a PersistentVolumeClaim's storage request: a quantity
	// greater than zero (storage is not one of the resources that must be whole numbers).
	switch size, err := resource.ParseQuantity(e.VolumeSize); {
	case err != nil:
		errs.addf(ruleEtcdVolumeSize, "etcd.volumeSize", e.VolumeSize, "%s: %v", ruleEtcdVolumeSize.Refuses, err)
	case size.Sign() <= 0:
		errs.addf(ruleEtcdVolumeSize, "etcd.volumeSize", e.VolumeSize, "%s: must be greater than zero", ruleEtcdVolumeSize.Refuses)
	}
	kubeName(errs, ruleStorageClass, "etcd.storageClass", e.StorageClass, validation.IsDNS1123Subdomain)
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
	if kubeName(errs, ruleHubNamespace, "hub.namespace", h.Namespace, validation.IsDNS1123Label) &&
		(h.Namespace == "default" || strings.HasPrefix(h.Namespace, "kube-")) {
		errs.add(ruleHubNamespace, "hub.namespace", h.Namespace)
	}
	kubeName(errs, ruleHubSecretName, "hub.secretName", h.SecretName, validation.IsDNS1123Subdomain)
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
	c.validateAddOnChart(errs, "kind.certManagerChart", k.CertManagerChart, "kind.certManagerPresent", k.CertManagerPresent)
	c.validateAddOnChart(errs, "kind.envoyGatewayChart", k.EnvoyGatewayChart, "kind.envoyGatewayPresent", k.EnvoyGatewayPresent)
	switch members := c.Etcd.Members; {
	case k.NodeZones < 1:
		errs.add(ruleKindNodeZones, "kind.nodeZones", strconv.Itoa(k.NodeZones))
	case members > k.NodeZones && validMembers(members):
		errs.addf(ruleKindSchedulable, "etcd.members", strconv.Itoa(members),
			"must be at most kind.nodeZones (%d): each etcd member needs a node of its own, and 3 or 5 members spread over as many zones, so %d of %d members would stay Pending; kind/cluster.yaml creates one node (set kind.nodeZones only for a cluster with more nodes in distinct topology.kubernetes.io/zone zones)",
			k.NodeZones, members-k.NodeZones, members)
	}
}

// validateAddOnChart checks the chart source of an add-on the kind stack installs, key,
// unless the config says the cluster has it (presentKey): then a chart source set would
// be ignored, and is refused.
func (c *Config) validateAddOnChart(errs *Errors, key string, s ChartSource, presentKey string, present bool) {
	if present {
		for _, f := range []struct{ key, value string }{{key + ".repository", s.Repository}, {key + ".caFile", s.CAFile}} {
			if c.given[f.key] {
				errs.addf(ruleChartSource, f.key, f.value, "is set while %s is true: the stack does not install that chart, so its source would be ignored; remove one", presentKey)
			}
		}
		return
	}
	c.validateChartSource(errs, key+".repository", key+".caFile", s)
}

func (c *Config) validateGKE(errs *Errors) {
	g := c.GKE
	if !gcpProject.MatchString(g.Project) {
		errs.add(ruleGKEProject, "gke.project", g.Project)
	}
	if !gcpRegion.MatchString(g.Location) {
		errs.add(ruleGKELocation, "gke.location", g.Location)
	}
	if !gcpName.MatchString(g.Cluster) {
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
	// A CronJob's schedule is parsed by cron.ParseStandard, in the API server's validation
	// and in the CronJob controller: five fields (names such as MON or JAN, ranges, steps
	// and ? included) or a descriptor such as @hourly, @daily or @every 6h, all of which
	// the controller runs. As the API server does for a new CronJob, a TZ= or CRON_TZ=
	// prefix is refused: spec.timeZone sets the zone. A schedule that parses but names no
	// date (0 0 30 2 *) is refused too: the API server takes it, but the controller never
	// starts a Job for it, and the snapshots would silently stop.
	checkCron := func(key, value string) {
		switch schedule, err := cron.ParseStandard(value); {
		case err != nil:
			errs.addf(ruleCron, key, value, "%s: %v", ruleCron.Refuses, err)
		case strings.Contains(value, "TZ"):
			errs.addf(ruleCron, key, value, "%s: a time zone in the schedule is refused by the API server (a CronJob sets it in spec.timeZone)", ruleCron.Refuses)
		case schedule.Next(time.Now()).IsZero():
			errs.addf(ruleCron, key, value, "%s: it names no date that exists, so the CronJob would never run", ruleCron.Refuses)
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
	if g.DNS.ExistingResponsePolicy != "" && !gcpName.MatchString(g.DNS.ExistingResponsePolicy) {
		errs.add(ruleResponsePolicy, "gke.dns.existingResponsePolicy", g.DNS.ExistingResponsePolicy)
	}
	kubeName(errs, ruleGatewayClass, "gke.gateway.className", g.Gateway.ClassName, validation.IsDNS1123Subdomain)
	switch gw := g.Gateway; {
	case (gw.CertificateSecret == "") == (gw.CertManagerClusterIssuer == ""):
		errs.add(ruleGatewayCertificate, "gke.gateway", fmt.Sprintf("certificateSecret=%q certManagerClusterIssuer=%q", gw.CertificateSecret, gw.CertManagerClusterIssuer))
	case gw.CertificateSecret != "":
		kubeName(errs, ruleGatewayCertificate, "gke.gateway.certificateSecret", gw.CertificateSecret, validation.IsDNS1123Subdomain)
	default:
		kubeName(errs, ruleGatewayCertificate, "gke.gateway.certManagerClusterIssuer", gw.CertManagerClusterIssuer, validation.IsDNS1123Subdomain)
	}
}

// validMembers reports whether n is an etcd member count the program runs.
func validMembers(n int) bool { return slices.Contains([]int{1, 3, 5}, n) }

// kubeName refuses value at key for rule unless validate, one of Kubernetes's own name
// checks (k8s.io/apimachinery/pkg/util/validation), takes it, with the reasons the API
// server would give. It reports whether value passed.
func kubeName(errs *Errors, rule *Rule, key, value string, validate func(string) []string) bool {
	reasons := validate(value)
	if len(reasons) > 0 {
		errs.addf(rule, key, value, "%s: %s", rule.Refuses, strings.Join(reasons, "; "))
	}
	return len(reasons) == 0
}

// pinnedTag reports whether v is a pinned image or chart version: a full semantic
// version, pre-releases included (v0.34.0-rc.1 is as fixed as v0.34.0). semver also
// takes the shorthands v1 and v1.2, which float over releases, and +build metadata,
// which an image tag cannot carry; Canonical rewrites both, so a version equal to its
// canonical form is neither.
func pinnedTag(v string) bool { return semver.IsValid(v) && semver.Canonical(v) == v }

// pinnedChartVersion reports whether v is a pinned kcp-operator chart version: the
// chart's versions have no leading v (its repository index lists 0.7.10), and
// KnownOperatorPairs is keyed by that spelling.
func pinnedChartVersion(v string) bool { return !strings.HasPrefix(v, "v") && pinnedTag("v"+v) }

// validShardName reports whether name may name a shard other than the root shard.
func validShardName(name string) bool {
	return shardNameProblem(name) == "" && name != naming.RootShardName
}

// shardNameProblem says why name cannot name a shard, or "" if it can. A shard's name
// starts the name of the Service the operator creates for it (<name>-shard-kcp), and a
// Service name is a DNS-1035 label, which starts with a letter.
func shardNameProblem(name string) string {
	if reasons := validation.IsDNS1035Label(name); len(reasons) > 0 {
		return strings.Join(reasons, "; ")
	}
	if len(name) > maxShardName {
		return fmt.Sprintf("it has %d characters", len(name))
	}
	return ""
}

// isIPAddress reports whether s is an IP address, which Gateway API refuses as a
// hostname ("IPs are not allowed": gateway-api apis/v1 shared_types.go, type Hostname).
func isIPAddress(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// hostnameProblem says why s cannot be a kcp component's hostname, or "" if it can. A
// Gateway API hostname (a listener's and a route's) is a DNS-1123 subdomain; no wildcard,
// as each hostname names one component. Three rules that the subdomain check does not
// make are kept: a label has at most 63 characters (RFC 1035), the top-level
// label is not all digits (RFC 3696, so that a name never reads as an address), and
// there are two labels at least, as no public certificate authority issues a
// certificate for a single-label name.
func hostnameProblem(s string) string {
	if reasons := validation.IsDNS1123Subdomain(s); len(reasons) > 0 {
		return strings.Join(reasons, "; ")
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if reasons := validation.IsDNS1123Label(l); len(reasons) > 0 {
			return fmt.Sprintf("its label %q %s", l, strings.Join(reasons, "; "))
		}
	}
	if len(labels) < 2 {
		return "it has a single label"
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "its top-level label is all digits"
	}
	return ""
}
