// Package providerprobe runs cmd/provider-probe against real kcp: a root shard and an
// alpha shard (each with embedded etcd and the CacheAPIs feature gate, each advertising
// its virtual workspaces at its public name) and a front proxy, started with the
// arguments the kcp-operator gives them, and certificates of the test's own CAs in the
// operator's shape (root-server-ca, root-client-ca, the request-header CA).
//
// Everything runs in a network namespace the test makes, which has a loopback interface
// and a veth pair whose two ends are both inside it (kcp needs a default route to pick
// the address it advertises), so nothing can leave the machine. Each server listens on
// its own loopback address, and the namespace's /etc/hosts (which `ip netns exec` puts
// over the machine's) maps the public shard names and the in-cluster Service names to
// those addresses, as split-horizon DNS maps them to the Services' ClusterIPs in a
// cluster.
// The probe knows none of this: it follows the names as a pod does. The shards follow
// their own public names the same way (a shard serves a cached resource by calling the
// URL of its ClusterCachedResourceEndpointSlice). The negative cases run the probe with
// the system's roots, with a client certificate of another CA, and with the shard names
// resolved to an edge that terminates TLS (a helper in the same namespace).
//
// It needs root (ip netns), kcp and kcp-front-proxy on PATH (eval "$(hack/build-tools.sh
// env kcp)"), and is slow: it runs only with RAILGRID_PROVIDERPROBE_REALKCP=1, and
// `go test -short` skips it. The servers' logs are kept in the test's directory
// (-providerprobe.keep-logs DIR keeps them after the test).
package providerprobe
