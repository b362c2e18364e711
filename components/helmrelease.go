package components

import (
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/utilities"

	"github.com/railgrid/railgrid-kcp/config"
)

// helmReleaseType is the Kubernetes provider's Helm release resource.
const helmReleaseType = "kubernetes:helm.sh/v3:Release"

// HelmRelease is the Kubernetes provider's Helm release (kubernetes:helm.sh/v3:Release),
// declared here with the fields this program sets. The SDK's helm/v3 package declares the
// same resource, but it also holds the v3 Chart component, which imports every API group
// of the Kubernetes SDK: generated Go that the program never uses and would spend most of
// its compile time on. The inputs the engine receives are the SDK's: the same type token,
// property names, `compat` flag and provider version.
type HelmRelease struct {
	pulumi.CustomResourceState

	// Status is the release's status object; its "status" is Helm's (deployed, failed, ...).
	Status pulumi.MapOutput `pulumi:"status"`
}

// HelmReleaseArgs are the release's inputs, named as the provider's schema names them.
type HelmReleaseArgs struct {
	Name      pulumi.StringInput // the Helm release name
	Namespace pulumi.StringInput
	// Chart is a chart name in Repo, or a path to a chart directory when Repo is unset.
	Chart   pulumi.StringInput
	Version pulumi.StringInput
	// Repo is the chart repository (repositoryOpts.repo); nil for a chart path or an OCI
	// chart reference.
	Repo pulumi.StringInput
	// CAFile is the CA file of Repo's https server (repositoryOpts.caFile); nil for none.
	CAFile          pulumi.StringInput
	Values          pulumi.Map
	CreateNamespace bool
	// Timeout is Helm's wait timeout in seconds; 0 leaves the provider's default.
	Timeout int
}

// setChart sets where the release's chart comes from: chart name in source's repository.
// From an https repository the chart is its name, and the repository and its CA file
// go to repositoryOpts; from an oci:// one the chart is its reference,
// <repository>/<name>, with no repositoryOpts (the provider pulls it with a registry
// client that takes none; the config refuses a CA file with it).
func (a *HelmReleaseArgs) setChart(name string, source config.ChartSource) {
	if source.IsOCI() {
		a.Chart = pulumi.String(source.OCIReference(name))
		return
	}
	a.Chart, a.Repo = pulumi.String(name), pulumi.String(source.Repository)
	if source.CAFile != "" {
		a.CAFile = pulumi.String(source.CAFile)
	}
}

// NewHelmRelease declares a Helm release, as the SDK's helmv3.NewRelease does.
func NewHelmRelease(ctx *pulumi.Context, name string, args *HelmReleaseArgs, opts ...pulumi.ResourceOption) (*HelmRelease, error) {
	if args == nil || args.Chart == nil {
		return nil, errors.New("HelmRelease: Chart is required")
	}
	if args.CAFile != nil && args.Repo == nil {
		return nil, errors.New("HelmRelease: CAFile is the CA of Repo's server and needs Repo")
	}
	props := pulumi.Map{
		"chart": args.Chart,
		// The Go SDK sends compat "true", a constant of the provider's schema: the state of
		// existing stacks holds it, so leaving it out would show every release as changed.
		"compat": pulumi.String("true"),
	}
	if args.Name != nil {
		props["name"] = args.Name
	}
	if args.Namespace != nil {
		props["namespace"] = args.Namespace
	}
	if args.Version != nil {
		props["version"] = args.Version
	}
	if args.Repo != nil {
		// caFile only when set: an existing stack's releases have none, not an empty one.
		repositoryOpts := pulumi.Map{"repo": args.Repo}
		if args.CAFile != nil {
			repositoryOpts["caFile"] = args.CAFile
		}
		props["repositoryOpts"] = repositoryOpts
	}
	if args.Values != nil {
		props["values"] = args.Values
	}
	if args.CreateNamespace {
		props["createNamespace"] = pulumi.Bool(true)
	}
	if args.Timeout != 0 {
		props["timeout"] = pulumi.Int(args.Timeout)
	}
	var release HelmRelease
	// PkgResourceDefaultOpts pins the provider plugin version, as the SDK's constructor does.
	if err := ctx.RegisterResource(helmReleaseType, name, props, &release, utilities.PkgResourceDefaultOpts(opts)...); err != nil {
		return nil, err
	}
	return &release, nil
}

// HelmStatus is Helm's status of the release (deployed, failed, ...); empty until known.
func (r *HelmRelease) HelmStatus() pulumi.StringOutput {
	return r.Status.ApplyT(func(status map[string]interface{}) string {
		s, _ := status["status"].(string)
		return s
	}).(pulumi.StringOutput)
}
