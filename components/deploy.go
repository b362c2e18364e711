package components

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/config"
)

// KcpPlatformName is the name of the top-level component of every stack.
const KcpPlatformName = "railgrid-kcp"

// Deploy composes the stack from a validated config and exports what operators, the hub
// and users need next (st.Outputs). main.go, the tests and the tools all call it, so they
// run exactly what `pulumi up` runs.
func Deploy(ctx *pulumi.Context, cfg *config.Config) (*KcpPlatform, error) {
	st, err := NewKcpPlatform(ctx, KcpPlatformName, &KcpPlatformArgs{Config: cfg},
		pulumi.Transformations([]pulumi.ResourceTransformation{withStableFieldManager}))
	if err != nil {
		return nil, err
	}
	st.Outputs = stackOutputs(cfg, st)
	for name, value := range st.Outputs {
		ctx.Export(name, value)
	}
	return st, nil
}

// stackOutputs are the stack's outputs.
func stackOutputs(cfg *config.Config, st *KcpPlatform) pulumi.Map {
	shardHosts := pulumi.StringMap{}
	for _, s := range cfg.Kcp.AllShards() {
		shardHosts[s.Name] = pulumi.String(s.Hostname)
	}
	// Read back by the next up (stackconfig.ReadPreviousShards) to refuse a vanished or moved shard.
	endpoints := pulumi.Map{}
	for name, e := range cfg.Endpoints() {
		endpoints[name] = pulumi.StringMap{"hostname": pulumi.String(e.Hostname), "clusterIP": pulumi.String(e.ClusterIP)}
	}
	return pulumi.Map{
		"platform":                  pulumi.String(string(cfg.Platform)),
		"kcpVersion":                pulumi.String(cfg.Versions.Kcp),
		"frontProxyHostname":        pulumi.String(cfg.Kcp.FrontProxy.Hostname),
		"shardHostnames":            shardHosts,
		config.PreviousShardsOutput: endpoints,
		"edgeAddress":               st.Edge.Address,
		// What the hub needs next: kcp.external.existingSecret, and kcp's CA for its
		// provider CA bundle.
		"hubSecretNamespace":     pulumi.String(cfg.Hub.Namespace),
		"hubSecretName":          st.Hub.SecretName,
		"hubKubeconfigExpiresAt": st.Hub.ExpiresAt,
		"kcpRootServerCA":        st.Hub.RootServerCA,
		"hubKubeconfigRemint": pulumi.String(fmt.Sprintf(
			"pulumi config set --path %s:hub.remintGeneration %d && pulumi up, then restart the hub (it does not reload its kubeconfig)",
			config.Project, cfg.Hub.RemintGeneration+1)),
		// What users sign in with: a kubeconfig with no secret in it.
		"userKubeconfig": st.UserKubeconfig,
		"snapshots":      st.Snapshots,
		// Where each retired shard's kept etcd data is: namespace, claims and their volumes.
		"retiredShardVolumes": st.RetiredVolumes,
	}
}
