package components

import (
	"encoding/base64"
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// OIDCIssuerCAArgs is the issuer's CA chain and where kcp reads it.
type OIDCIssuerCAArgs struct {
	// PEM is the CA chain exactly as the config gives it (oidc.caCertificates), checked
	// by the config: CERTIFICATE blocks, each a CA, each valid.
	PEM string
	// KcpNamespace is kcp-system, where the kcp servers mount the Secret.
	KcpNamespace *corev1.Namespace
}

// OIDCIssuerCA is the Secret the program owns with the issuer's CA chain, which every kcp
// server's spec.auth.oidc.caFileRef names (kcpAuth), so that no one has to make it by
// hand. The chain is public; the Kubernetes SDK still keeps a Secret's data secret in
// the state.
type OIDCIssuerCA struct {
	pulumi.ResourceState

	Secret *corev1.Secret
}

// NewOIDCIssuerCA declares the Secret naming.OIDCIssuerCASecret in kcp-system, with the
// chain under naming.OIDCIssuerCAKey. A changed chain updates it in place (both
// platforms' providers let Secrets change in place).
func NewOIDCIssuerCA(ctx *pulumi.Context, name string, args *OIDCIssuerCAArgs, opts ...pulumi.ResourceOption) (*OIDCIssuerCA, error) {
	if args == nil || args.PEM == "" || args.KcpNamespace == nil {
		return nil, errors.New("OIDCIssuerCA: PEM and KcpNamespace are required")
	}
	ca := &OIDCIssuerCA{}
	if err := ctx.RegisterComponentResource("railgrid:kcp:OIDCIssuerCA", name, ca, opts...); err != nil {
		return nil, err
	}
	secret, err := corev1.NewSecret(ctx, name+"-secret", &corev1.SecretArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:      pulumi.String(naming.OIDCIssuerCASecret),
			Namespace: args.KcpNamespace.Metadata.Name().Elem(),
			Labels:    pulumi.StringMap{"app.kubernetes.io/part-of": pulumi.String(config.Project)},
		},
		Type: pulumi.String("Opaque"),
		// data, not stringData: the API server returns data, so the state holds what the
		// cluster holds, byte for byte.
		Data: pulumi.StringMap{naming.OIDCIssuerCAKey: pulumi.String(base64.StdEncoding.EncodeToString([]byte(args.PEM)))},
	}, pulumi.Parent(ca))
	if err != nil {
		return nil, err
	}
	ca.Secret = secret
	if err := ctx.RegisterResourceOutputs(ca, pulumi.Map{"secretName": secret.Metadata.Name().Elem()}); err != nil {
		return nil, err
	}
	return ca, nil
}
