package components

import (
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// KcpEdgeArgs lists what the edge routes, and through which Gateway.
type KcpEdgeArgs struct {
	// Routes are the public hostnames, each to its owned Service.
	Routes []EdgeRoute
	// Gateway is the platform's: Envoy Gateway with TLS passthrough on kind, the GKE
	// Gateway with re-encryption on GKE. Both get the long timeouts.
	Gateway EdgeGateway
}

// KcpEdge exposes the front proxy and each shard hostname through the cluster's ingress
// with TLS, and with timeouts long enough for watches and edge tunnels.
type KcpEdge struct {
	pulumi.ResourceState

	Address pulumi.StringOutput `pulumi:"address"`
}

// NewKcpEdge declares the routes through the platform's Gateway.
func NewKcpEdge(ctx *pulumi.Context, name string, args *KcpEdgeArgs, opts ...pulumi.ResourceOption) (*KcpEdge, error) {
	if args == nil || args.Gateway == nil || len(args.Routes) == 0 {
		return nil, errors.New("KcpEdge: Routes and Gateway are required")
	}
	e := &KcpEdge{}
	if err := ctx.RegisterComponentResource("railgrid:kcp:KcpEdge", name, e, opts...); err != nil {
		return nil, err
	}
	address, err := args.Gateway.DeclareRoutes(ctx, name, args.Routes, pulumi.Parent(e))
	if err != nil {
		return nil, err
	}
	e.Address = address
	if err := ctx.RegisterResourceOutputs(e, pulumi.Map{"address": e.Address}); err != nil {
		return nil, err
	}
	return e, nil
}
