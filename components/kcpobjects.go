package components

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// kcpObjectTimeoutSeconds bounds every wait for a kcp object's Available condition:
// the operator needs cert-manager to issue every certificate and the pods to roll out.
const kcpObjectTimeoutSeconds = "1800"

// newKcpObject declares one operator.kcp.io object in kcp-system from a typed spec. It
// carries pulumi.com/waitFor so that the provider reports it created only when the
// operator marks it Available, and dependents start after that.
func newKcpObject(ctx *pulumi.Context, name, kind, objectName string, spec any, annotations map[string]string, opts ...pulumi.ResourceOption) (*apiextensions.CustomResource, error) {
	all := map[string]string{
		AnnotationWaitFor:        WaitForAvailable,
		AnnotationTimeoutSeconds: kcpObjectTimeoutSeconds,
	}
	for k, v := range annotations {
		all[k] = v
	}
	return newUntyped(ctx, name, objectMeta{APIVersion: kcpapi.APIVersion, Kind: kind, Name: objectName, Namespace: naming.NamespaceKcp, Annotations: all}, spec, opts...)
}

// withOption appends opt to opts unless it is nil.
func withOption(opts []pulumi.ResourceOption, opt pulumi.ResourceOption) []pulumi.ResourceOption {
	if opt == nil {
		return opts
	}
	return append(opts, opt)
}

// kcpImage is the one pinned kcp image every kcp object uses.
func kcpImage(cfg *config.Config) *kcpapi.ImageSpec {
	return &kcpapi.ImageSpec{Repository: config.KcpImageRepository, Tag: cfg.Versions.Kcp}
}

// kcpResources size every kcp server's container (config.KcpResources: no CPU limit).
func kcpResources(cfg *config.Config) *kcpapi.ResourceRequirements {
	r := cfg.Kcp.Resources
	return &kcpapi.ResourceRequirements{
		Requests: map[string]string{"cpu": r.CPU, "memory": r.Memory},
		Limits:   map[string]string{"memory": r.MemoryLimit},
	}
}

// kcpAuth is the authentication every shard and the front proxy share: service-account
// tokens and the hub's OIDC issuer with the claims and prefixes the hub relies on.
func kcpAuth(cfg *config.Config) *kcpapi.AuthSpec {
	oidc := &kcpapi.OIDCConfiguration{
		IssuerURL:      cfg.OIDC.IssuerURL,
		ClientID:       cfg.OIDC.ClientID,
		GroupsClaim:    config.FixedGroupsClaim,
		UsernameClaim:  config.FixedUsernameClaim,
		GroupsPrefix:   config.FixedGroupsPrefix,
		UsernamePrefix: config.FixedUsernamePrefix,
	}
	// kcp reads the issuer's CA only from --oidc-ca-file, which the operator sets from
	// caFileRef (not from caBundleSecretRef), on every component that validates tokens.
	if ca := cfg.OIDC.CASecret; ca != nil {
		oidc.CAFileRef = &kcpapi.SecretKeyRef{Name: ca.Name, Key: ca.Key}
	}
	return &kcpapi.AuthSpec{
		ServiceAccount: &kcpapi.ServiceAccountAuthentication{Enabled: true},
		OIDC:           oidc,
	}
}

// shardExtraArgs are the kcp flags every shard gets, each defined in kcp's source
// (kcp-dev/kcp v0.32.0-162, dac74f5; tests/e2e runs them through the real binaries):
//   - --feature-gates (pkg/server/options/options.go, kcpfeatures.NewFlagValue):
//     CacheAPIs (pkg/features/kcp_features.go) for the cached-resource APIs the
//     infrastructure provider publishes its templates through (design document);
//     WorkspaceMounts (same file) because the Railgrid hub mounts workspaces through the
//     front proxy: its own external-kcp recipe enables both gates (KCP_FEATURE_GATES);
//   - --shard-virtual-workspace-url (pkg/server/options/options.go): what
//     APIExportEndpointSlices advertise, on the public hostname; never the base URL.
//
// No request timeout: kcp drops --request-timeout and --min-request-timeout from its
// flag set (disallowedFlags in pkg/server/options/flags.go), so the long timeout the
// design asks for is set at the edge (loadBalancer.timeout).
func shardExtraArgs(hostname string) []string {
	return []string{
		"--feature-gates=CacheAPIs=true,WorkspaceMounts=true",
		"--shard-virtual-workspace-url=" + ShardVirtualWorkspaceURL(hostname),
	}
}

// serverCertificate adds the public hostname to a component's serving certificate: the
// in-cluster path (split horizon) presents this certificate under that name too.
func serverCertificate(hostname string) map[string]kcpapi.CertificateTemplate {
	return map[string]kcpapi.CertificateTemplate{
		"server": {Spec: kcpapi.CertificateSpecTemplate{DNSNames: []string{hostname}}},
	}
}

// newOwnedService declares the Service this program owns in front of a kcp component's
// pods, selected by the operator's labels, so that a fixed ClusterIP (which the DNS
// answers point at) and appProtocol HTTPS (for Gateway re-encryption) stick.
func newOwnedService(ctx *pulumi.Context, name, component, instance, clusterIP string, opts ...pulumi.ResourceOption) (*corev1.Service, error) {
	port := func(portName string, number int) *corev1.ServicePortArgs {
		return &corev1.ServicePortArgs{
			Name:        pulumi.String(portName),
			Port:        pulumi.Int(number),
			TargetPort:  pulumi.Int(naming.KcpPort),
			AppProtocol: pulumi.String("HTTPS"),
		}
	}
	return corev1.NewService(ctx, name, &corev1.ServiceArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:      pulumi.String(naming.OwnedServiceName(instance)),
			Namespace: pulumi.String(naming.NamespaceKcp),
			Labels:    pulumi.StringMap{"app.kubernetes.io/part-of": pulumi.String(config.Project), LabelInstance: pulumi.String(instance)},
		},
		Spec: &corev1.ServiceSpecArgs{
			Type:      pulumi.String("ClusterIP"),
			ClusterIP: pulumi.String(clusterIP),
			Selector: pulumi.StringMap{
				LabelComponent: pulumi.String(component),
				LabelInstance:  pulumi.String(instance),
			},
			Ports: corev1.ServicePortArray{port("https", PublicHTTPSPort), port("https-kcp", naming.KcpPort)},
		},
	}, opts...)
}
