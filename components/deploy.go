package components

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/config"
)

// StackName is the name of the top-level component of every stack.
const StackName = "railgrid-kcp"

// Deploy composes the stack from a validated config and exports what operators and the
// hub need next. main.go, the tests and the tools all call it, so they run exactly what
// `pulumi up` runs.
func Deploy(ctx *pulumi.Context, cfg *config.Config) (*Stack, error) {
	st, err := NewStack(ctx, StackName, &StackArgs{Config: cfg},
		pulumi.Transformations([]pulumi.ResourceTransformation{withStableFieldManager}))
	if err != nil {
		return nil, err
	}
	shardHosts := pulumi.StringMap{}
	for _, s := range cfg.Kcp.AllShards() {
		shardHosts[s.Name] = pulumi.String(s.Hostname)
	}
	ctx.Export("platform", pulumi.String(string(cfg.Platform)))
	ctx.Export("kcpVersion", pulumi.String(cfg.Versions.Kcp))
	ctx.Export("frontProxyHostname", pulumi.String(cfg.Kcp.FrontProxy.Hostname))
	ctx.Export("shardHostnames", shardHosts)
	// Read back by the next up (stackconfig.ReadPreviousShards) to refuse a vanished or moved shard.
	endpoints := pulumi.Map{}
	for name, e := range cfg.Endpoints() {
		endpoints[name] = pulumi.StringMap{"hostname": pulumi.String(e.Hostname), "clusterIP": pulumi.String(e.ClusterIP)}
	}
	ctx.Export(config.PreviousShardsOutput, endpoints)
	ctx.Export("edgeAddress", st.Edge.Address)
	// What the hub needs next: kcp.external.existingSecret, and kcp's CA for its
	// provider CA bundle.
	ctx.Export("hubSecretNamespace", pulumi.String(cfg.Hub.Namespace))
	ctx.Export("hubSecretName", st.Hub.SecretName)
	ctx.Export("hubKubeconfigExpiresAt", st.Hub.ExpiresAt)
	ctx.Export("kcpRootServerCA", st.Hub.RootServerCA)
	ctx.Export("hubKubeconfigRemint", pulumi.String(fmt.Sprintf(
		"pulumi config set --path %s:hub.remintGeneration %d && pulumi up, then restart the hub (it does not reload its kubeconfig)",
		config.Project, cfg.Hub.RemintGeneration+1)))
	ctx.Export("snapshots", st.Snapshots)
	// Where each retired shard's kept etcd data is: namespace, claims and their volumes.
	ctx.Export("retiredShardVolumes", st.RetiredVolumes)
	return st, nil
}
