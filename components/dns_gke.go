package components

import (
	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp/dns"
	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp/projects"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// cloudDNSResponsePolicy is the GKE split horizon. kube-dns forwards every name outside
// cluster.local to the VPC resolver, where a response policy bound to the cluster's
// network answers each shard hostname with an A record of the owned Service ClusterIP.
// Only one response policy can be bound to a network, so the config may name an
// existing one to add the rules to.
type cloudDNSResponsePolicy struct {
	project string
	dns     config.GKEResponsePolicy
	cluster gkeCluster
}

func (c cloudDNSResponsePolicy) DeclareRecords(ctx *pulumi.Context, name string, records []HostRecord, answersAfter []pulumi.Resource, opts ...pulumi.ResourceOption) error {
	// The component's provider map holds only the Kubernetes provider; GCP resources
	// resolve their provider by package and take the default gcp provider.
	gcpOpts := append(append([]pulumi.ResourceOption{}, opts...), pulumi.DependsOn(answersAfter))
	api, err := projects.NewService(ctx, name+"-dns-api", &projects.ServiceArgs{
		Project:          pulumi.String(c.project),
		Service:          pulumi.String("dns.googleapis.com"),
		DisableOnDestroy: pulumi.Bool(false),
	}, gcpOpts...)
	if err != nil {
		return err
	}
	policyName := pulumi.String(c.dns.ExistingResponsePolicy).ToStringOutput()
	if c.dns.ExistingResponsePolicy == "" {
		policy, err := dns.NewResponsePolicy(ctx, name+"-policy", &dns.ResponsePolicyArgs{
			Project:            pulumi.String(c.project),
			ResponsePolicyName: pulumi.String(naming.ResponsePolicyName),
			Description:        pulumi.String("railgrid-kcp split horizon: kcp shard hostnames answer with their in-cluster Service"),
			Networks:           dns.ResponsePolicyNetworkArray{&dns.ResponsePolicyNetworkArgs{NetworkUrl: pulumi.String(c.cluster.NetworkURL)}},
			GkeClusters:        dns.ResponsePolicyGkeClusterArray{&dns.ResponsePolicyGkeClusterArgs{GkeClusterName: pulumi.String(c.cluster.ID)}},
		}, append(gcpOpts, pulumi.DependsOn([]pulumi.Resource{api}))...)
		if err != nil {
			return err
		}
		policyName = policy.ResponsePolicyName
	}
	for _, r := range records {
		fqdn := r.Hostname + "."
		if _, err := dns.NewResponsePolicyRule(ctx, name+"-rule-"+r.Shard, &dns.ResponsePolicyRuleArgs{
			Project:        pulumi.String(c.project),
			ResponsePolicy: policyName,
			RuleName:       pulumi.String("kcp-" + r.Shard),
			DnsName:        pulumi.String(fqdn),
			LocalData: &dns.ResponsePolicyRuleLocalDataArgs{LocalDatas: dns.ResponsePolicyRuleLocalDataLocalDataArray{
				&dns.ResponsePolicyRuleLocalDataLocalDataArgs{
					Name:    pulumi.String(fqdn),
					Type:    pulumi.String("A"),
					Ttl:     pulumi.Int(c.dns.TTL),
					Rrdatas: pulumi.StringArray{pulumi.String(r.ClusterIP)},
				},
			}},
		}, append(gcpOpts, pulumi.DependsOn([]pulumi.Resource{api}))...); err != nil {
			return err
		}
	}
	return nil
}
