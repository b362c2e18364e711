package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The gke platform: the rules gke-*, machine-type, pool-min, pool-max, disk-size, cron,
// retention, gcloud-tag, dns-ttl, response-policy, gateway-class and gateway-certificate.

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

const maxDNSTTL = 300

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
	// Every kcp server runs at least two replicas, spread over zones with a disruption
	// budget of one: a single replica is what every node-pool upgrade takes down.
	for _, r := range c.Kcp.replicas() {
		if r.replicas == 1 {
			errs.add(ruleReplicasGKE, r.key, strconv.Itoa(r.replicas))
		}
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
	checkCronSchedule(errs, "gke.snapshots.schedule", g.Snapshots.Schedule)
	checkCronSchedule(errs, "gke.snapshots.drillSchedule", g.Snapshots.DrillSchedule)
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

// ValidGcloudImageTag says whether tag is a pinned google-cloud-cli tag, as
// gke.snapshots.gcloudImageTag must be (cmd/etcdrestore checks its flag with it).
func ValidGcloudImageTag(tag string) bool { return gcloudTag.MatchString(tag) }
