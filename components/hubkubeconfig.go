package components

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"gopkg.in/yaml.v3"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	batchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/naming"
)

// AnnotationRemint records the re-mint generation on the Kubeconfig object.
const AnnotationRemint = "railgrid.io/remint-generation"

// HubKubeconfigArgs describes the hub's credential.
type HubKubeconfigArgs struct {
	// FrontProxy is what the credential reaches kcp through.
	FrontProxy *FrontProxy
	// Validity is how long the client certificate is valid (spec.validity).
	Validity string
	// RemintGeneration is raised to mint a new credential: it names the Kubeconfig
	// object (naming.KubeconfigObjectName) and goes into the certificate's subject.
	RemintGeneration int
	// HubNamespace, SecretName and SecretKey are where the hub reads the kubeconfig.
	HubNamespace *corev1.Namespace
	SecretName   string
	SecretKey    string
	// Copy is how the kubeconfig reaches the hub's Secret, at each up and after each
	// renewal.
	Copy HubCopyArgs
}

// HubKubeconfig is the Kubeconfig object the operator mints the hub's admin credential
// from, the hub's Secret, and what copies the credential into it (hubkubeconfigcopy.go).
type HubKubeconfig struct {
	pulumi.ResourceState

	Kubeconfig *apiextensions.CustomResource
	HubSecret  *corev1.Secret
	// CopyJob is the copy `pulumi up` waits for; CopyCronJob repeats it.
	CopyJob     *batchv1.Job
	CopyCronJob *batchv1.CronJob

	// ExpiresAt is when the client certificate expires (RFC 3339); re-mint before then.
	ExpiresAt pulumi.StringOutput `pulumi:"expiresAt"`
	// RootServerCA is kcp's root-server-ca certificate (PEM), as the kubeconfig carries it.
	RootServerCA pulumi.StringOutput `pulumi:"rootServerCA"`
	SecretName   pulumi.StringOutput `pulumi:"secretName"`
}

// NewHubKubeconfig declares the Kubeconfig object (waited on until Available), the hub's
// Secret <hub namespace>/<secret>, and the copy of the operator's kubeconfig into it
// under admin.kubeconfig, made once as a Job the up waits for and again on schedule.
// Pulumi declares the hub's Secret without its data, which the copy owns, so a renewal
// leaves nothing for a preview to change; the read of the operator's Secret, for the
// outputs, stays a Pulumi secret all the way.
func NewHubKubeconfig(ctx *pulumi.Context, name string, args *HubKubeconfigArgs, opts ...pulumi.ResourceOption) (*HubKubeconfig, error) {
	if args == nil || args.FrontProxy == nil || args.Validity == "" || args.HubNamespace == nil || args.SecretName == "" || args.SecretKey == "" ||
		args.Copy.Schedule == "" || args.Copy.Image == "" {
		return nil, errors.New("HubKubeconfig: FrontProxy, Validity, HubNamespace, SecretName, SecretKey and Copy are required")
	}
	h := &HubKubeconfig{}
	if err := ctx.RegisterComponentResource("railgrid:kcp:HubKubeconfig", name, h, opts...); err != nil {
		return nil, err
	}
	generation := strconv.Itoa(args.RemintGeneration)
	objectName := naming.KubeconfigObjectName(args.RemintGeneration)
	// A re-mint renames the object (naming.KubeconfigObjectName), which replaces it: the new
	// object is created and waited on until Available, the copy of the new generation
	// fills the hub Secret from its Secret, and only then is the previous generation's
	// object deleted, so the hub Secret never points at a credential that is not there
	// yet.
	kubeconfig, err := newKcpObject(ctx, name, kcpapi.KindKubeconfig, objectName, kubeconfigSpec(args, objectName),
		map[string]string{AnnotationRemint: generation},
		pulumi.Parent(h),
		pulumi.DependsOn([]pulumi.Resource{args.FrontProxy.Object}))
	if err != nil {
		return nil, err
	}
	encoded := readMintedKubeconfig(ctx, name, objectName, kubeconfig, pulumi.Parent(h))
	hubNamespace := args.HubNamespace.Metadata.Name().Elem()
	hubSecret, err := corev1.NewSecret(ctx, name+"-hub-secret", &corev1.SecretArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:      pulumi.String(args.SecretName),
			Namespace: hubNamespace,
			Annotations: pulumi.StringMap{
				AnnotationRemint: pulumi.String(generation),
				// Not naming.FieldManager, which applied the data before the copy did: a
				// stack made by an earlier version of this program keeps the data under
				// that manager, and an apply without data by the same manager would
				// delete it before the copy has run. A manager of its own leaves it.
				naming.AnnotationPatchFieldManager: pulumi.String(naming.HubSecretFieldManager),
			},
		},
		Type: pulumi.String("Opaque"),
	}, pulumi.Parent(h), pulumi.DependsOn([]pulumi.Resource{kubeconfig}), pulumi.AdditionalSecretOutputs([]string{"data", "stringData"}))
	if err != nil {
		return nil, err
	}
	copied, err := declareHubCopy(ctx, name, args.Copy, hubCopyTarget{
		minted: objectName, hubNamespace: hubNamespace, secretName: args.SecretName, secretKey: args.SecretKey,
		remintGeneration: args.RemintGeneration,
	}, hubSecret.Metadata.Uid().Elem(), pulumi.Parent(h), pulumi.DependsOn([]pulumi.Resource{kubeconfig, hubSecret}))
	if err != nil {
		return nil, err
	}
	h.Kubeconfig, h.HubSecret, h.CopyJob, h.CopyCronJob = kubeconfig, hubSecret, copied.job, copied.cronJob
	h.ExpiresAt = kubeconfigDetail(encoded, func(d kubeconfigDetails) string { return d.ExpiresAt })
	h.RootServerCA = kubeconfigDetail(encoded, func(d kubeconfigDetails) string { return d.CAPEM })
	h.SecretName = hubSecret.Metadata.Name().Elem()
	if err := ctx.RegisterResourceOutputs(h, pulumi.Map{
		"expiresAt":    h.ExpiresAt,
		"rootServerCA": h.RootServerCA,
		"secretName":   h.SecretName,
	}); err != nil {
		return nil, err
	}
	return h, nil
}

// kubeconfigSpec is the hub's credential: kcp-admin in system:kcp:admin through the
// front proxy, written by the operator into the Secret objectName.
func kubeconfigSpec(args *HubKubeconfigArgs, objectName string) kcpapi.KubeconfigSpec {
	return kcpapi.KubeconfigSpec{
		Username:  naming.KubeconfigUsername,
		Groups:    []string{naming.KubeconfigAdminGroup},
		Validity:  args.Validity,
		SecretRef: kcpapi.LocalObjectReference{Name: objectName},
		Target:    kcpapi.KubeconfigTarget{FrontProxyRef: &kcpapi.LocalObjectReference{Name: args.FrontProxy.Name}},
		// The generation in the subject tells credentials apart; kcp authenticates on CN
		// and O only, so access is unchanged.
		CertificateTemplate: &kcpapi.CertificateTemplate{Spec: kcpapi.CertificateSpecTemplate{
			Subject: &kcpapi.X509Subject{OrganizationalUnits: []string{"railgrid-kcp-mint-" + strconv.Itoa(args.RemintGeneration)}},
		}},
	}
}

// readMintedKubeconfig reads the kubeconfig (base64) the operator wrote into the Secret
// objectName for the Kubeconfig object.
//
// The read is declared inside an apply on the Kubeconfig object's ID: in the preview
// of a fresh stack the ID is unknown, so the read is neither made nor registered
// (a skipped read registered outside an apply leaves dependents with an empty URN).
// During `up` it runs only after the object is Available, which the operator reports
// once the Secret is written. Secret all the way: the read keeps data secret, and the
// Kubernetes SDK wraps every Secret's data in a Pulumi secret.
func readMintedKubeconfig(ctx *pulumi.Context, name, objectName string, kubeconfig *apiextensions.CustomResource, parent pulumi.ResourceOption) pulumi.StringOutput {
	return kubeconfig.ID().ApplyT(func(pulumi.ID) (pulumi.StringOutput, error) {
		minted, err := readSecret(ctx, name+"-minted", naming.NamespaceKcp, objectName,
			parent, pulumi.AdditionalSecretOutputs([]string{"data", "stringData"}))
		if err != nil {
			return pulumi.StringOutput{}, err
		}
		return minted.Data.MapIndex(pulumi.String(naming.KubeconfigSecretKey)), nil
	}).(pulumi.StringOutput)
}

// kubeconfigDetail picks one detail out of the encoded kubeconfig. Neither the expiry
// nor a CA certificate is sensitive, so the detail is not secret; the kubeconfig stays
// secret.
func kubeconfigDetail(encoded pulumi.StringOutput, pick func(kubeconfigDetails) string) pulumi.StringOutput {
	picked := encoded.ApplyT(func(b64 string) (string, error) {
		d, err := parseKubeconfig(b64)
		return pick(d), err
	}).(pulumi.StringOutput)
	return pulumi.Unsecret(picked).(pulumi.StringOutput)
}

// kubeconfigDetails is what the stack exports about the credential.
type kubeconfigDetails struct {
	ExpiresAt string
	CAPEM     string
}

// parseKubeconfig reads the client certificate's expiry and the CA out of a base64
// kubeconfig, as the operator writes it (one cluster, one user).
func parseKubeconfig(b64 string) (kubeconfigDetails, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return kubeconfigDetails{}, fmt.Errorf("hub kubeconfig is not base64: %w", err)
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				CAData string `yaml:"certificate-authority-data"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			User struct {
				CertData string `yaml:"client-certificate-data"`
			} `yaml:"user"`
		} `yaml:"users"`
	}
	if err := yaml.Unmarshal(raw, &kc); err != nil {
		return kubeconfigDetails{}, fmt.Errorf("hub kubeconfig is not YAML: %w", err)
	}
	if len(kc.Clusters) == 0 || len(kc.Users) == 0 {
		return kubeconfigDetails{}, errors.New("hub kubeconfig has no cluster or no user")
	}
	caPEM, err := base64.StdEncoding.DecodeString(kc.Clusters[0].Cluster.CAData)
	if err != nil {
		return kubeconfigDetails{}, fmt.Errorf("hub kubeconfig CA: %w", err)
	}
	certPEM, err := base64.StdEncoding.DecodeString(kc.Users[0].User.CertData)
	if err != nil {
		return kubeconfigDetails{}, fmt.Errorf("hub kubeconfig client certificate: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return kubeconfigDetails{}, errors.New("hub kubeconfig client certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return kubeconfigDetails{}, fmt.Errorf("hub kubeconfig client certificate: %w", err)
	}
	return kubeconfigDetails{ExpiresAt: cert.NotAfter.UTC().Format(time.RFC3339), CAPEM: string(caPEM)}, nil
}
