package verify

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/railgrid/railgrid-kcp/internal/errtext"
	"github.com/railgrid/railgrid-kcp/internal/pemcert"
	"github.com/railgrid/railgrid-kcp/naming"
)

// CheckCertificates makes the expiry of every certificate the platform depends on
// visible, and fails on one within MinCertificateValidity of it: each kcp server's
// serving and client certificates and the CAs they chain to (every TLS Secret in
// kcp-system, each CA once), the OIDC issuer's CA, and the hub's credential, which must
// also be the operator's current certificate: the hub's Secret is the stack's copy of
// it (components/hubkubeconfigcopy.go), made again on hub.copySchedule.
const CheckCertificates = "certificates"

// caKey is where cert-manager writes the issuing CA in a TLS Secret.
const caKey = "ca.crt"

// DefaultMinCertificateValidity is below the week before expiry at which cert-manager
// renews kcp's certificates (the operator's renewBefore, DefaultCertificateRenewal in
// sdk/apis/operator/v1alpha1/common.go; 30 days for its CAs): a certificate this close
// to its end was not renewed.
const DefaultMinCertificateValidity = 72 * time.Hour

func checkCertificates(ctx context.Context, o *Options) []Result {
	var results []Result
	secrets, err := o.Kube.CoreV1().Secrets(naming.NamespaceKcp).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []Result{fail(CheckCertificates, "Secrets in "+naming.NamespaceKcp, "cannot list: %v", err)}
	}
	sort.Slice(secrets.Items, func(i, j int) bool { return secrets.Items[i].Name < secrets.Items[j].Name })
	seenCA := map[[32]byte]bool{}
	tlsSecrets := 0
	for _, s := range secrets.Items {
		if s.Type != corev1.SecretTypeTLS {
			continue
		}
		tlsSecrets++
		item := fmt.Sprintf("Secret %s/%s", s.Namespace, s.Name)
		leaf, err := pemcert.Leaf(s.Data[corev1.TLSCertKey])
		if err != nil {
			results = append(results, fail(CheckCertificates, item+" "+corev1.TLSCertKey, "%v", err))
			continue
		}
		results = append(results, o.expiry(item+" "+corev1.TLSCertKey, leaf))
		for _, ca := range certificates(s.Data[caKey]) {
			if fp := sha256.Sum256(ca.Raw); !seenCA[fp] {
				seenCA[fp] = true
				results = append(results, o.expiry(item+" "+caKey, ca))
			}
		}
	}
	if tlsSecrets == 0 {
		results = append(results, fail(CheckCertificates, "Secrets in "+naming.NamespaceKcp, "no TLS Secret: the operator has issued no certificate"))
	}
	results = append(results, o.issuerCA(ctx)...)
	return append(results, o.hubCopy(ctx)...)
}

// expiry is one certificate's validity against the clock and the threshold.
func (o *Options) expiry(item string, c *x509.Certificate) Result {
	now := o.Now()
	left := c.NotAfter.Sub(now)
	subject := "CN=" + c.Subject.CommonName
	until := c.NotAfter.UTC().Format(time.RFC3339)
	switch {
	case now.Before(c.NotBefore):
		return fail(CheckCertificates, item, "%s is not valid before %s", subject, c.NotBefore.UTC().Format(time.RFC3339))
	case left <= 0:
		return fail(CheckCertificates, item, "%s expired at %s", subject, until)
	case left < o.MinCertificateValidity:
		return fail(CheckCertificates, item, "%s expires at %s, in %s, within the %s threshold: it was not renewed", subject, until,
			left.Round(time.Minute), o.MinCertificateValidity)
	}
	return pass(CheckCertificates, item, "%s valid until %s (%d days left)", subject, until, int(math.Floor(left.Hours()/24)))
}

// issuerCA checks the OIDC issuer's CA kcp reads, when the config gives one.
func (o *Options) issuerCA(ctx context.Context) []Result {
	name, key := naming.OIDCIssuerCASecret, naming.OIDCIssuerCAKey
	switch {
	case o.Config.HasIssuerCACertificates():
	case o.Config.OIDC.CASecret != nil:
		name, key = o.Config.OIDC.CASecret.Name, o.Config.OIDC.CASecret.Key
	default:
		return nil // the kcp image's trust store: nothing of the stack's to expire
	}
	item := fmt.Sprintf("Secret %s/%s %s (the OIDC issuer's CA)", naming.NamespaceKcp, name, key)
	s, err := o.Kube.CoreV1().Secrets(naming.NamespaceKcp).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return []Result{fail(CheckCertificates, item, "cannot read: %v", err)}
	}
	cas := certificates(s.Data[key])
	if len(cas) == 0 {
		return []Result{fail(CheckCertificates, item, "holds no certificate")}
	}
	var out []Result
	for _, ca := range cas {
		out = append(out, o.expiry(item, ca))
	}
	return out
}

// hubCopy checks that the hub's Secret holds the operator's current client certificate,
// and that it is not close to its end.
func (o *Options) hubCopy(ctx context.Context) []Result {
	hub := o.Config.Hub
	item := fmt.Sprintf("Secret %s/%s key %s (the hub's credential)", hub.Namespace, hub.SecretName, hub.SecretKey)
	data, failed := readHubKubeconfig(ctx, o, CheckCertificates)
	if failed != nil {
		return []Result{*failed}
	}
	copied, err := clientCertificate(data)
	if err != nil {
		return []Result{fail(CheckCertificates, item, "%v", err)}
	}
	result := o.expiry(item, copied)
	minted := naming.KubeconfigObjectName(hub.RemintGeneration)
	mintedItem := fmt.Sprintf("Secret %s/%s key %s", naming.NamespaceKcp, minted, naming.KubeconfigSecretKey)
	s, err := o.Kube.CoreV1().Secrets(naming.NamespaceKcp).Get(ctx, minted, metav1.GetOptions{})
	if err != nil {
		return []Result{result, fail(CheckCertificates, mintedItem, "cannot read the operator's kubeconfig: %v", err)}
	}
	current, err := clientCertificate(s.Data[naming.KubeconfigSecretKey])
	if err != nil {
		return []Result{result, fail(CheckCertificates, mintedItem, "%v", err)}
	}
	if copied.SerialNumber.Cmp(current.SerialNumber) != 0 {
		expired := ""
		if result.Status == StatusFail {
			expired = result.Message + "; it "
		}
		stale := fmt.Sprintf("%sholds serial %s (until %s), not the operator's current certificate, serial %s (until %s) in %s, written %s",
			expired, copied.SerialNumber.Text(16), copied.NotAfter.UTC().Format(time.RFC3339), current.SerialNumber.Text(16),
			current.NotAfter.UTC().Format(time.RFC3339), mintedItem, dataWritten(s, current).UTC().Format(time.RFC3339))
		// Within two of the copy's periods of the operator's write, the copy has not had
		// its turn yet: a warning. Later, it is not running.
		grace := 2*hub.CopyPeriod(o.Now()) + copyRunTime
		if result.Status != StatusFail && o.Now().Sub(dataWritten(s, current)) < grace {
			return []Result{warn(CheckCertificates, item, "%s: the copy (CronJob %s/%s, hub.copySchedule %q) puts it there at its next run",
				stale, naming.NamespaceKcp, naming.HubCopy, hub.CopySchedule)}
		}
		return []Result{fail(CheckCertificates, item,
			"%s: the copy (CronJob %s/%s, hub.copySchedule %q) has not put it there in %s; see its Jobs' logs (kubectl -n %s logs job/<name>), and pulumi up runs it once",
			stale, naming.NamespaceKcp, naming.HubCopy, hub.CopySchedule, grace, naming.NamespaceKcp)}
	}
	if result.Status == StatusPass {
		result.Message += "; the operator's current certificate (serial " + copied.SerialNumber.Text(16) + ")"
	}
	return []Result{result}
}

// copyRunTime is what one run of the copy may take (its Jobs' activeDeadlineSeconds).
const copyRunTime = 5 * time.Minute

// dataWritten is when the operator last wrote its kubeconfig Secret's data (the newest
// time of a manager that owns it), or the certificate's notBefore when no manager says.
func dataWritten(s *corev1.Secret, c *x509.Certificate) time.Time {
	var at time.Time
	for _, f := range s.ManagedFields {
		if f.Time != nil && f.FieldsV1 != nil && strings.Contains(string(f.FieldsV1.Raw), `"f:data"`) && f.Time.After(at) {
			at = f.Time.Time
		}
	}
	if at.IsZero() {
		return c.NotBefore
	}
	return at
}

// clientCertificate is the client certificate of a kubeconfig's current user.
func clientCertificate(kubeconfig []byte) (*x509.Certificate, error) {
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("is not a valid kubeconfig: %s", errtext.FirstLine(err.Error()))
	}
	_, kctx := currentContext(kc)
	if kctx == nil || kc.AuthInfos[kctx.AuthInfo] == nil {
		return nil, fmt.Errorf("has no user in its current context")
	}
	return pemcert.Leaf(kc.AuthInfos[kctx.AuthInfo].ClientCertificateData)
}

// certificates are every CERTIFICATE block of PEM data that parses.
func certificates(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" || strings.TrimSpace(string(block.Bytes)) == "" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}
