package config

import (
	"fmt"
	"net/netip"
	"time"
)

// The Service range and the fixed ClusterIPs (the rules service-cidr and cluster-ip-*),
// and the edge's timeout (lb-timeout).

// fixedClusterIPKeys are the keys of the fixed ClusterIPs: the owned Services' and, on
// kind, the issuer's Service's.
const fixedClusterIPKeys = "`kcp.*.clusterIP`, `kind.issuerClusterIP`"

const (
	// reservedCount: the network address, .1 (the kubernetes API) ... .10 (cluster DNS).
	reservedCount = uint64(11)
	minLBTimeout  = 60 * time.Second
)

func (c *Config) validateNetwork(errs *Errors) {
	prefix, err := netip.ParsePrefix(c.Network.ServiceCIDR)
	if err != nil || !prefix.Addr().Is4() || prefix.Masked() != prefix || prefix.Bits() > 28 {
		errs.add(ruleServiceCIDR, "network.serviceCIDR", c.Network.ServiceCIDR)
		return
	}
	*errs = append(*errs, c.ServiceIPErrors(prefix, "network.serviceCIDR")...)
}

// ServiceIPErrors checks the fixed ClusterIPs of the owned Services, and on kind the
// issuer's (kind.issuerClusterIP), against a Service range: valid, distinct, inside the
// range, past the addresses the cluster reserves and inside the static band that the
// dynamic allocator leaves to fixed addresses. The gke platform calls it again with the
// range the cluster lookup returns.
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
	if c.HasIssuerClusterIP() {
		check(issuerClusterIPKey, c.Kind.IssuerClusterIP)
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
