// railgrid-kcp deploys kcp outside the Railgrid hub: the kcp-operator, a root shard and
// additional shards each on their own etcd, a front proxy, split-horizon DNS, the edge,
// and the hub's kubeconfig. See README.md.
package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/components"
	"github.com/railgrid/railgrid-kcp/config/stackconfig"
)

func main() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		cfg, err := stackconfig.Load(ctx)
		if err != nil {
			return err
		}
		_, err = components.Deploy(ctx, cfg)
		return err
	})
}
