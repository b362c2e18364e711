package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The kind platform: the rules kind-context, kind-kubeconfig, kind-node-port,
// kind-node-zones, kind-schedulable and issuer-cluster-ip-*, and the add-ons' chart
// sources (validate_charts.go). The issuer's ClusterIP is checked with the owned
// Services' (validate_network.go).

const issuerClusterIPKey = "kind.issuerClusterIP"

const issuerClusterIPGKERule = "is a kind setting, refused on the gke stack: on GKE the issuer is public, and kcp's pods reach it by its public name as any client does; " +
	"the split horizon answers only kcp's shard hostnames there"

// HasIssuerClusterIP says whether the kind stack gives the issuer's Service a fixed
// ClusterIP (kind.issuerClusterIP), which the split horizon answers the issuer's
// hostname with.
func (c *Config) HasIssuerClusterIP() bool {
	return c.Platform == PlatformKind && c.Kind != nil && (c.given[issuerClusterIPKey] || c.Kind.IssuerClusterIP != "")
}

// IssuerHostname is the host of oidc.issuerURL, without a port.
func (c *Config) IssuerHostname() string {
	u, err := url.Parse(c.OIDC.IssuerURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
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
	if c.HasIssuerClusterIP() {
		c.validateIssuerHostname(errs)
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

// validateIssuerHostname checks that the issuer's host can take the split-horizon answer
// kind.issuerClusterIP asks for: a DNS name of its own. An issuer URL that does not
// parse is issuer-url's to refuse.
func (c *Config) validateIssuerHostname(errs *Errors) {
	if _, err := url.Parse(c.OIDC.IssuerURL); err != nil {
		return
	}
	host := c.IssuerHostname()
	refuse := func(problem string) {
		errs.addf(ruleIssuerClusterIPHost, issuerClusterIPKey, c.Kind.IssuerClusterIP, "is set, but the issuer's host %q (oidc.issuerURL) %s", host, problem)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		refuse("is an IP address, which needs no DNS answer; remove kind.issuerClusterIP")
		return
	}
	if reasons := validation.IsDNS1123Subdomain(host); len(reasons) > 0 {
		refuse("is not a DNS name the split horizon can answer (a lower-case RFC 1123 subdomain): " + strings.Join(reasons, "; "))
		return
	}
	hostnames := map[string]string{"kcp.frontProxy.hostname": c.Kcp.FrontProxy.Hostname, "kcp.rootShard.hostname": c.Kcp.RootShard.Hostname}
	for i, s := range c.Kcp.Shards {
		hostnames[fmt.Sprintf("kcp.shards[%d].hostname", i)] = s.Hostname
	}
	for _, key := range sortedKeys(hostnames) {
		if hostnames[key] == host {
			refuse(fmt.Sprintf("is %s too: the issuer needs a name of its own, which the split horizon answers with the issuer's Service", key))
			return
		}
	}
}
