package components

import (
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// KcpOperatorArgs describes the kcp-operator installation.
type KcpOperatorArgs struct {
	// ChartVersion and ImageTag pin the chart and the operator image it runs.
	ChartVersion string
	ImageTag     string
	// ChartSource is where the chart comes from (an https repository with its optional
	// CA file, or an oci:// one); ChartPath, when set, is a local copy of the chart to
	// install instead (tests).
	ChartSource       config.ChartSource
	ChartPath         string
	OperatorNamespace *corev1.Namespace
	KcpNamespace      *corev1.Namespace
	// CertManager is what must be ready before the Issuer (the platform's cert-manager).
	CertManager []pulumi.Resource
	// ReleaseHooks repairs a release left pending by an interrupted Helm operation.
	ReleaseHooks pulumi.ResourceOption
}

// KcpOperator is the kcp-operator Helm release and the self-signed Issuer the operator
// builds kcp's CAs from.
type KcpOperator struct {
	pulumi.ResourceState

	Release      *HelmRelease
	Issuer       *apiextensions.CustomResource
	KcpNamespace *corev1.Namespace

	Status pulumi.StringOutput `pulumi:"releaseStatus"`
}

// NewKcpOperator installs the operator chart and declares the Issuer.
//
// The chart ships its CRDs as templates: uninstalling the release would delete the CRDs
// and with them every RootShard, Shard, FrontProxy and Kubeconfig. The release is
// therefore retained on delete, so neither `pulumi destroy` nor a rename removes it.
func NewKcpOperator(ctx *pulumi.Context, name string, args *KcpOperatorArgs, opts ...pulumi.ResourceOption) (*KcpOperator, error) {
	if args == nil || args.ChartVersion == "" || args.ImageTag == "" || args.OperatorNamespace == nil || args.KcpNamespace == nil || args.ReleaseHooks == nil {
		return nil, errors.New("KcpOperator: ChartVersion, ImageTag, both namespaces and ReleaseHooks are required")
	}
	o := &KcpOperator{KcpNamespace: args.KcpNamespace}
	if err := ctx.RegisterComponentResource("railgrid:kcp:KcpOperator", name, o, opts...); err != nil {
		return nil, err
	}
	chart := &HelmReleaseArgs{
		Name:      pulumi.String(naming.OperatorReleaseName),
		Namespace: args.OperatorNamespace.Metadata.Name().Elem(),
		Version:   pulumi.String(args.ChartVersion),
		Values: pulumi.Map{
			"image": pulumi.Map{"repository": pulumi.String(config.OperatorImageRepository), "tag": pulumi.String(args.ImageTag)},
			"crds":  pulumi.Map{"create": pulumi.Bool(true)},
		},
		Timeout: 600,
	}
	if args.ChartPath != "" {
		chart.Chart = pulumi.String(args.ChartPath)
	} else {
		chart.setChart(config.OperatorChartName, args.ChartSource)
	}
	release, err := NewHelmRelease(ctx, name+"-release", chart, pulumi.Parent(o), pulumi.RetainOnDelete(true), args.ReleaseHooks)
	if err != nil {
		return nil, err
	}

	// A self-signed Issuer: the operator only uses it to issue kcp's root CA.
	issuerDeps := append([]pulumi.Resource{args.KcpNamespace}, args.CertManager...)
	issuer, err := newUntyped(ctx, name+"-issuer",
		objectMeta{APIVersion: "cert-manager.io/v1", Kind: "Issuer", Name: naming.SelfSignedIssuer, Namespace: naming.NamespaceKcp},
		struct {
			SelfSigned struct{} `json:"selfSigned"`
		}{}, pulumi.Parent(o), pulumi.DependsOn(issuerDeps))
	if err != nil {
		return nil, err
	}
	o.Release, o.Issuer = release, issuer
	o.Status = release.HelmStatus()
	if err := ctx.RegisterResourceOutputs(o, pulumi.Map{"releaseStatus": o.Status}); err != nil {
		return nil, err
	}
	return o, nil
}
