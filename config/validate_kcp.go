package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/railgrid/railgrid-kcp/naming"
)

// kcp's servers and shards: the rules shard-base-url, hostname, hostname-ip,
// hostname-distinct, replicas, shard-name, shard-name-root, shard-name-distinct,
// retired-shard-name, retired-root, retired-active, request-timeout and kcp-resources.

// Why a config may not set the shard base URL (the design document's first rule).
const shardBaseURLRule = "is not configurable: spec.shardBaseURL drives front-proxy routing and the cluster index, and " +
	"pointing it at a public name takes the whole platform down (every request arrives as an empty user); " +
	"only the virtual-workspace URL goes on the public shard hostname, and the program sets it from the hostname"

// maxShardName leaves room for what this program and the operator add to a shard's
// name (kcp-, etcd-, -shard-kcp, -headless, the etcd StatefulSet's revision hash)
// within the 63 characters of a DNS label.
const maxShardName = 30

// keyedReplicas is one kcp server's replica count and the key that sets it.
type keyedReplicas struct {
	key      string
	replicas int
}

// replicas lists every kcp server's replicas, in the config's order. The root shard's
// proxy runs as many replicas as the root shard.
func (k Kcp) replicas() []keyedReplicas {
	out := []keyedReplicas{{"kcp.frontProxy.replicas", k.FrontProxy.Replicas}, {"kcp.rootShard.replicas", k.RootShard.Replicas}}
	for i, s := range k.Shards {
		out = append(out, keyedReplicas{fmt.Sprintf("kcp.shards[%d].replicas", i), s.Replicas})
	}
	return out
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
