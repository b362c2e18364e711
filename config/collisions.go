package config

import (
	"fmt"
	"strings"

	"github.com/railgrid/railgrid-kcp/naming"
)

// Who creates a generated object.
const (
	CreatedByProgram  = "program"  // declared by this program
	CreatedByOperator = "operator" // created by the kcp-operator from a RootShard, Shard or FrontProxy
	CreatedByHelm     = "helm"     // created by a Helm release the kind stack installs
)

// GeneratedObject is one object whose name a config decides, with the config key that
// decides it.
type GeneratedObject struct {
	Kind      string
	Namespace string // empty for cluster-scoped objects
	Name      string
	Key       string // the config key the name comes from
	CreatedBy string
}

func (o GeneratedObject) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// GeneratedObjects lists the Namespaces, Services, StatefulSets, edge routes and
// listeners, and the operator's Deployments and Services that a config produces, in the
// order the config names them. Two with the same kind, namespace and name collide.
func (c *Config) GeneratedObjects() []GeneratedObject {
	var out []GeneratedObject
	add := func(kind, namespace, name, key, by string) {
		out = append(out, GeneratedObject{Kind: kind, Namespace: namespace, Name: name, Key: key, CreatedBy: by})
	}
	for _, ns := range []string{naming.NamespaceEtcd, naming.NamespaceOperator, naming.NamespaceKcp} {
		add("Namespace", "", ns, "", CreatedByProgram)
	}
	if c.Platform == PlatformKind {
		add("Namespace", "", naming.NamespaceCertManager, "", CreatedByHelm)
		add("Namespace", "", naming.NamespaceEnvoyGateway, "", CreatedByHelm)
	}
	add("Namespace", "", c.Hub.Namespace, "hub.namespace", CreatedByProgram)

	route := "TLSRoute"
	if c.Platform == PlatformGKE {
		route = "HTTPRoute"
	}
	component := func(instance, key string, operatorNames ...string) {
		add("Service", naming.NamespaceKcp, naming.OwnedServiceName(instance), key, CreatedByProgram)
		add(route, naming.NamespaceKcp, naming.EdgeRouteName(instance), key, CreatedByProgram)
		if c.Platform == PlatformGKE {
			add("GatewayListener", naming.NamespaceKcp, naming.EdgeListenerName(instance), key, CreatedByProgram)
		}
		for _, name := range operatorNames {
			add("Service", naming.NamespaceKcp, name, key, CreatedByOperator)
			add("Deployment", naming.NamespaceKcp, name, key, CreatedByOperator)
		}
	}
	component(naming.FrontProxyName, "kcp.frontProxy", naming.FrontProxyDeployment(naming.FrontProxyName))
	component(naming.RootShardName, "kcp.rootShard", naming.RootShardDeployment(naming.RootShardName), naming.RootShardProxyDeployment(naming.RootShardName))
	etcd := func(shard, key string) {
		add("StatefulSet", naming.NamespaceEtcd, naming.EtcdName(shard), key, CreatedByProgram)
		add("Service", naming.NamespaceEtcd, naming.EtcdName(shard), key, CreatedByProgram)
		add("Service", naming.NamespaceEtcd, naming.EtcdHeadlessService(shard), key, CreatedByProgram)
	}
	etcd(naming.RootShardName, "kcp.rootShard")
	for i, s := range c.Kcp.Shards {
		key := fmt.Sprintf("kcp.shards[%d].name", i)
		component(s.Name, key, naming.ShardDeployment(s.Name))
		etcd(s.Name, key)
	}
	return out
}

// validateGeneratedNames refuses a config two of whose generated objects would have the
// same kind, namespace and name: the second declaration fails halfway through `up`, or
// two components silently share one object. Shards whose name is refused already are
// left out, as is a repeated shard name (shard-name-distinct says it).
func (c *Config) validateGeneratedNames(errs *Errors) {
	refused := map[string]bool{}
	names := map[string]bool{}
	for i, s := range c.Kcp.Shards {
		if !validShardName(s.Name) || names[s.Name] {
			refused[fmt.Sprintf("kcp.shards[%d].name", i)] = true
		}
		names[s.Name] = true
	}
	seen := map[string]GeneratedObject{}
	reported := map[string]bool{}
	for _, o := range c.GeneratedObjects() {
		if refused[o.Key] {
			continue
		}
		id := o.String()
		first, dup := seen[id]
		if !dup {
			seen[id] = o
			continue
		}
		if first.Key == o.Key || reported[o.Key] || o.Key == "" {
			continue
		}
		reported[o.Key] = true
		errs.addf(ruleNameCollision, o.Key, c.valueAt(o.Key), "gives %s, which %s already gives%s", id, describeKey(first.Key), createdBy(first))
	}
}

func describeKey(key string) string {
	if key == "" {
		return "the program"
	}
	return key
}

func createdBy(o GeneratedObject) string {
	switch o.CreatedBy {
	case CreatedByOperator:
		return " (the kcp-operator creates it)"
	case CreatedByHelm:
		return " (a Helm release of the kind stack creates it)"
	}
	return ""
}

// valueAt is the value of a key that names objects, for error messages.
func (c *Config) valueAt(key string) string {
	if key == "hub.namespace" {
		return c.Hub.Namespace
	}
	var i int
	if _, err := fmt.Sscanf(key, "kcp.shards[%d].name", &i); err == nil && i < len(c.Kcp.Shards) {
		return c.Kcp.Shards[i].Name
	}
	return strings.TrimPrefix(key, "kcp.")
}
