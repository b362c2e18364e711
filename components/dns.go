package components

import (
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// SplitHorizonDNSArgs lists the answers the cluster's DNS must give.
type SplitHorizonDNSArgs struct {
	Records []HostRecord
	// Backend is the platform's DNS: a CoreDNS hosts file on kind, a Cloud DNS response
	// policy on GKE.
	Backend DNSBackend
	// DependsOn: the owned Services whose ClusterIPs the answers point at, and the kcp
	// objects behind them, so an answer is published once its shard is Available.
	DependsOn []pulumi.Resource
}

// SplitHorizonDNS makes each shard hostname resolve, inside the cluster, to that shard's
// owned Service instead of the edge. The hub and in-cluster providers authenticate with
// client certificates and follow the public shard URLs; through a TLS-terminating edge
// those requests would fail with 401.
type SplitHorizonDNS struct {
	pulumi.ResourceState

	Hostnames pulumi.StringArrayOutput `pulumi:"hostnames"`
}

// NewSplitHorizonDNS declares the records through the platform's backend.
func NewSplitHorizonDNS(ctx *pulumi.Context, name string, args *SplitHorizonDNSArgs, opts ...pulumi.ResourceOption) (*SplitHorizonDNS, error) {
	if args == nil || args.Backend == nil || len(args.Records) == 0 {
		return nil, errors.New("SplitHorizonDNS: Records and Backend are required")
	}
	d := &SplitHorizonDNS{}
	if err := ctx.RegisterComponentResource("railgrid:kcp:SplitHorizonDNS", name, d, opts...); err != nil {
		return nil, err
	}
	if err := args.Backend.DeclareRecords(ctx, name, args.Records, args.DependsOn, pulumi.Parent(d)); err != nil {
		return nil, err
	}
	var hosts []string
	for _, r := range args.Records {
		hosts = append(hosts, r.Hostname)
	}
	d.Hostnames = pulumi.ToStringArray(hosts).ToStringArrayOutput()
	if err := ctx.RegisterResourceOutputs(d, pulumi.Map{"hostnames": d.Hostnames}); err != nil {
		return nil, err
	}
	return d, nil
}
