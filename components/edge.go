package components

import (
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// KcpEdgeArgs lists what the edge routes.
type KcpEdgeArgs struct {
	Backends []ExposedBackend
	// Backend is the platform's ingress: Envoy Gateway with TLS passthrough on kind, the
	// GKE Gateway with re-encryption on GKE. Both get the long timeouts.
	Backend EdgeBackend
}

// KcpEdge exposes the front proxy and each shard hostname through the cluster's ingress
// with TLS, and with timeouts long enough for watches and edge tunnels.
type KcpEdge struct {
	pulumi.ResourceState

	Address pulumi.StringOutput `pulumi:"address"`
}

// NewKcpEdge declares the routes through the platform's backend.
func NewKcpEdge(ctx *pulumi.Context, name string, args *KcpEdgeArgs, opts ...pulumi.ResourceOption) (*KcpEdge, error) {
	if args == nil || args.Backend == nil || len(args.Backends) == 0 {
		return nil, errors.New("KcpEdge: Backends and Backend are required")
	}
	e := &KcpEdge{}
	if err := ctx.RegisterComponentResource("railgrid:kcp:KcpEdge", name, e, opts...); err != nil {
		return nil, err
	}
	address, err := args.Backend.DeclareRoutes(ctx, name, args.Backends, pulumi.Parent(e))
	if err != nil {
		return nil, err
	}
	e.Address = address
	if err := ctx.RegisterResourceOutputs(e, pulumi.Map{"address": e.Address}); err != nil {
		return nil, err
	}
	return e, nil
}
