package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Inside the kind cluster each shard hostname resolves to its owned Service: CoreDNS
// reads a hosts file from a ConfigMap of ours (deleted on destroy). kubeadm's Corefile
// ConfigMap is not written at all: CoreDNS reads a Corefile of ours (kubeadm's plus the
// hosts stanza), to which a patch of kubeadm's Deployment points kubeadm's config-volume
// (the one field it forces; nothing can be mounted inside that read-only volume). The
// patch and the Corefile are retained on destroy, since CoreDNS's pods mount that Corefile.
func TestKindSplitHorizonIsACoreDNSHostsFileOfOurOwn(t *testing.T) {
	rec, cfg := runStack(t, "kind"), shippedConfig(t, "kind")
	hosts := object(t, rec, "ConfigMap", naming.SplitHorizonHostsConfigMap)
	require.False(t, hosts.RetainOnDelete, "destroy removes the answers")
	lines := strings.Fields(strings.ReplaceAll(getString(t, inputs(hosts), "data.hosts"), "\n", " | "))
	var want []string
	for _, s := range cfg.Kcp.AllShards() {
		want = append(want, s.ClusterIP, s.Hostname, "|")
	}
	// And the OIDC issuer's hostname, with its Service's ClusterIP (kind.issuerClusterIP).
	want = append(want, cfg.Kind.IssuerClusterIP, cfg.IssuerHostname(), "|")
	require.Equal(t, want, lines)
	require.NotContains(t, lines, cfg.Kcp.FrontProxy.Hostname, "only shard hostnames and the issuer's are split")

	for _, res := range rec.Resources {
		require.NotEqual(t, "kubernetes:core/v1:ConfigMapPatch", res.Type, "kubeadm's ConfigMap is not patched: %s", res.URN)
	}
	corefileMap := object(t, rec, "ConfigMap", naming.SplitHorizonCorefileConfigMap)
	require.True(t, corefileMap.RetainOnDelete, "CoreDNS's pods mount it: destroy keeps it")
	require.Equal(t, naming.NamespaceKubeSystem, getString(t, inputs(corefileMap), "metadata.namespace"))
	corefile := getString(t, inputs(corefileMap), "data.Corefile")
	require.Contains(t, corefile, "hosts /etc/railgrid-kcp/hosts {\n        fallthrough\n    }")
	require.True(t, strings.HasPrefix(corefile, ".:53 {\n    # railgrid-kcp split horizon: BEGIN"), corefile)
	require.Contains(t, corefile, "forward . /etc/resolv.conf", "the rest of kubeadm's Corefile is kept")

	deploy, ok := rec.Find("kubernetes:apps/v1:DeploymentPatch", "railgrid-kcp-dns-coredns-volume")
	require.True(t, ok)
	require.True(t, deploy.RetainOnDelete)
	require.True(t, rec.DependsOnTransitively(deploy.URN, corefileMap.URN), "the pods mount the Corefile once it exists")
	require.Equal(t, "true", getString(t, inputs(deploy), "metadata.annotations.pulumi\\.com/patchForce"),
		"the config-volume's ConfigMap name is kubeadm's field: the patch must force it")
	// The provider diffs lists by position; without this every run shows a change.
	require.ElementsMatch(t, []string{"spec.template.spec.containers", "spec.template.spec.volumes"}, deploy.IgnoreChanges)
	provider, ok := rec.Find("pulumi:providers:kubernetes", "railgrid-kcp-kind-k8s")
	require.True(t, ok)
	require.Equal(t, "true", fmt.Sprint(inputs(provider)["enableSecretMutable"]), "a re-mint updates the hub Secret in place")
	require.Nil(t, inputs(provider)["enablePatchForce"], "no forced apply on every object")
	require.Equal(t, true, get(t, inputs(deploy), "spec.template.spec.volumes[0].configMap.optional"))
	require.Equal(t, naming.SplitHorizonHostsConfigMap, getString(t, inputs(deploy), "spec.template.spec.volumes[0].configMap.name"))
	mounts := get(t, inputs(deploy), "spec.template.spec.containers[0].volumeMounts").([]any)
	require.Len(t, mounts, 1, "only the hosts directory is mounted; nothing inside kubeadm's read-only /etc/coredns")
	require.Equal(t, "/etc/railgrid-kcp", getString(t, inputs(deploy), "spec.template.spec.containers[0].volumeMounts[0].mountPath"))
	require.Equal(t, naming.CoreDNSConfigVolume, getString(t, inputs(deploy), "spec.template.spec.volumes[1].name"))
	require.Equal(t, naming.SplitHorizonCorefileConfigMap, getString(t, inputs(deploy), "spec.template.spec.volumes[1].configMap.name"))
	require.Nil(t, getOptional(get(t, inputs(deploy), "spec.template.spec.volumes[1]"), "configMap", "optional"), "a missing Corefile must keep the pod from starting, not start CoreDNS on an empty file")
	// The answers wait for their shards; the Corefile, its read of kubeadm's Corefile and
	// the mount do not, so a preview of an added shard knows they stay as they are.
	alpha := object(t, rec, "Shard", cfg.Kcp.Shards[0].Name)
	require.True(t, rec.DependsOnTransitively(hosts.URN, alpha.URN), "the hosts file answers once the shard is Available")
	live, ok := rec.Find("kubernetes:core/v1:ConfigMap", "railgrid-kcp-dns-corefile-live")
	require.True(t, ok, "the read of kubeadm's Corefile")
	for _, r := range []mockstack.Resource{live, corefileMap, deploy} {
		require.False(t, rec.DependsOnTransitively(r.URN, alpha.URN), "%s waits for a shard", r.URN)
	}
	sum := sha256.Sum256([]byte(corefile))
	require.Equal(t, hex.EncodeToString(sum[:]), getString(t, inputs(deploy), "spec.template.metadata.annotations.railgrid\\.io/corefile-sha256"),
		"a changed Corefile rolls CoreDNS at once")
}

// kind exposes every hostname through Envoy Gateway with TLS passthrough (client
// certificates reach kcp) and traffic policies whose timeouts do not cut a watch.
func TestKindEdgePassesTLSThroughWithLongTimeouts(t *testing.T) {
	rec, cfg := runStack(t, "kind"), shippedConfig(t, "kind")
	timeout := fmt.Sprintf("%ds", int(cfg.LoadBalancerTimeout().Seconds()))
	gateway := inputs(object(t, rec, "Gateway", naming.EdgeGatewayName))
	require.Equal(t, "TLS", getString(t, gateway, "spec.listeners[0].protocol"))
	require.Equal(t, "Passthrough", getString(t, gateway, "spec.listeners[0].tls.mode"))
	// The up waits until Envoy Gateway has programmed the Gateway (tests/e2e proves it
	// against the real control plane).
	require.Equal(t, "condition=Programmed", getString(t, gateway, "metadata.annotations.pulumi\\.com/waitFor"))
	hosts := map[string]string{"frontproxy": cfg.Kcp.FrontProxy.Hostname, "root": cfg.Kcp.RootShard.Hostname, "alpha": cfg.Kcp.Shards[0].Hostname}
	for name, host := range hosts {
		route := inputs(object(t, rec, "TLSRoute", "kcp-"+name))
		require.Equal(t, []string{host}, stringList(t, route, "spec.hostnames"))
		require.Equal(t, naming.OwnedServiceName(name), getString(t, route, "spec.rules[0].backendRefs[0].name"))
		require.Equal(t, 6443, number(t, route, "spec.rules[0].backendRefs[0].port"))
	}
	client := inputs(object(t, rec, "ClientTrafficPolicy", naming.EdgeGatewayName))
	require.Equal(t, "Gateway", getString(t, client, "spec.targetRefs[0].kind"))
	require.Equal(t, timeout, getString(t, client, "spec.timeout.tcp.idleTimeout"))
	backend := inputs(object(t, rec, "BackendTrafficPolicy", naming.EdgeGatewayName))
	require.Len(t, get(t, backend, "spec.targetRefs").([]any), 3, "every route")
	require.Equal(t, timeout, getString(t, backend, "spec.timeout.http.requestTimeout"))
	proxy := inputs(object(t, rec, "EnvoyProxy", naming.EdgeGatewayName))
	require.Equal(t, "NodePort", getString(t, proxy, "spec.provider.kubernetes.envoyService.type"))
	// Cluster, not Envoy Gateway's default Local: with Local the Gateway's address waits
	// on an EndpointSlice change that Envoy Gateway v1.9 does not watch, and the up could
	// wait for Programmed for ever (components/edge_kind.go).
	require.Equal(t, "Cluster", getString(t, proxy, "spec.provider.kubernetes.envoyService.externalTrafficPolicy"))
	require.Equal(t, cfg.Kind.GatewayNodePort, number(t, proxy, "spec.provider.kubernetes.envoyService.patch.value.spec.ports[0].nodePort"))
}

// The kind stack installs pinned cert-manager and Envoy Gateway unless told they exist;
// the Issuer waits for cert-manager.
func TestKindInstallsPinnedAddOnsUnlessPresent(t *testing.T) {
	rec, cfg := runStack(t, "kind"), shippedConfig(t, "kind")
	certManager := gcpResource(t, rec, "kubernetes:helm.sh/v3:Release", "railgrid-kcp-kind-cert-manager")
	require.Equal(t, cfg.Versions.CertManager, getString(t, inputs(certManager), "version"))
	envoy := gcpResource(t, rec, "kubernetes:helm.sh/v3:Release", "railgrid-kcp-kind-envoy-gateway")
	require.Equal(t, cfg.Versions.EnvoyGateway, getString(t, inputs(envoy), "version"))
	issuer := object(t, rec, "Issuer", naming.SelfSignedIssuer)
	require.True(t, rec.DependsOnTransitively(issuer.URN, certManager.URN))
	require.Equal(t, map[string]any{"selfSigned": map[string]any{}}, get(t, inputs(issuer), "spec"))
	// Independent prerequisites do not wait for each other.
	operator := find(t, rec, "kubernetes:helm.sh/v3:Release", "railgrid-kcp-operator-release")
	for _, pair := range [][2]string{{operator.URN, certManager.URN}, {certManager.URN, envoy.URN}, {envoy.URN, operator.URN}} {
		require.False(t, rec.DependsOnTransitively(pair[0], pair[1]))
		require.False(t, rec.DependsOnTransitively(pair[1], pair[0]))
	}

	values := stackValues(t, "kind")
	setIn(values, "kind", "certManagerPresent", true)
	setIn(values, "kind", "envoyGatewayPresent", true)
	rec2, err := runValues(t, "kind", values, mockstack.Options{})
	require.NoError(t, err)
	releases := rec2.ByType("kubernetes:helm.sh/v3:Release")
	require.Len(t, releases, 1, "only the operator")
	require.Equal(t, "railgrid-kcp-operator-release", releases[0].Name)
}
