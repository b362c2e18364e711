//go:build linux

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/railgrid/railgrid-kcp/internal/pemcert"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Certificates over time: what a renewal does to the running stack, with cert-manager's
// own trigger instead of months of waiting.

// renewalCopySchedule is hub.copySchedule in the e2e stack (stackfile_test.go).
const renewalCopySchedule = "* * * * *"

// Bounds of the renewal step. The hub's copy: the copy's period (a minute), a
// minute for the CronJob controller to start the run, which it checks every 10
// seconds, and the pod. A serving certificate: the kubelet's sync of a Secret volume
// (its period, a minute, plus the cache's TTL, a minute), then kcp's reload of the
// files, which it watches.
const (
	hubCopyBound       = 3 * time.Minute
	servedRenewalBound = 4 * time.Minute
	// renewedAloneWatch is how long the step watches the operator after the hub's
	// certificate alone renewed.
	renewedAloneWatch   = 10 * time.Second
	renewalPollInterval = time.Second
)

// renewedCertificate is one Certificate the step renews and what it finds about it.
type renewedCertificate struct {
	// certificate names the Certificate and its Secret in kcp-system.
	certificate string
	// served is the Service that serves it (empty for a client certificate).
	served string
	// before is the Secret's certificate when the step starts.
	before *x509.Certificate
	// renewed is when the Secret held a new one, servedAt when the Service served it.
	renewed, servedAt time.Duration
	after             *x509.Certificate
}

// certificatesRenewWithoutAnUp: cert-manager renews the hub's client certificate, the
// root shard's and the front proxy's serving certificates (triggered as `cmctl renew`
// does). The operator re-writes its kubeconfig Secret, the stack's copy reaches the
// hub's Secret within hubCopyBound without an up, and the operator rolls each server
// whose serving certificate renewed (it labels a pod template with the revisions of
// the Secrets it mounts: pkg/reconciling/modifier/revision_labels.go), so that clients
// are served the renewed certificate. Then cmd/verify's checks (the hub's credential
// through the front proxy and at each shard, a provider pod following an endpoint-slice
// URL, the certificates) and a signed-in user work with what was renewed.
func certificatesRenewWithoutAnUp(t *testing.T, l *lifecycle) {
	ctx, c := l.ctx, l.c
	gen := l.remintGeneration(t)
	minted := naming.KubeconfigObjectName(gen)
	hubBefore, err := hubSecretCertificate(ctx, l.env)
	if err != nil {
		t.Fatal(err)
	}
	renewals := []*renewedCertificate{
		{certificate: "kubeconfig-cert-" + minted},
		{certificate: naming.ShardServerCertificate(naming.RootShardName), served: naming.OwnedServiceName(naming.RootShardName)},
		{certificate: naming.FrontProxyServerCertificate(naming.RootShardName, naming.FrontProxyName), served: naming.OwnedServiceName(naming.FrontProxyName)},
	}
	for _, r := range renewals {
		if r.before, err = tlsSecretCertificate(ctx, l.env, r.certificate); err != nil {
			t.Fatal(err)
		}
		if r.served != "" {
			served, err := servedCertificate(ctx, l.env, r.served)
			if err != nil {
				t.Fatal(err)
			}
			if served.SerialNumber.Cmp(r.before.SerialNumber) != 0 {
				t.Fatalf("%s serves serial %s before the renewal, not its Secret's %s", r.served, serial(served), serial(r.before))
			}
		}
	}
	pods, err := renewingServerPods(ctx, l.env)
	if err != nil {
		t.Fatal(err)
	}
	// The hub's certificate alone first: the operator re-writes its kubeconfig Secret at
	// its next reconcile of the Kubeconfig, which a renewal by itself need not start
	// (the Certificate is not owned by it). What it did is logged; the servers'
	// renewals, whose rollouts are events of the operator's objects, follow.
	if err := triggerRenewal(ctx, l.env, renewals[0].certificate); err != nil {
		t.Fatalf("triggering the renewal of Certificate %s: %v", renewals[0].certificate, err)
	}
	alone := time.Now()
	rewroteAlone := ""
	for time.Since(alone) < renewedAloneWatch && rewroteAlone == "" {
		time.Sleep(renewalPollInterval)
		if cred, err := readCredential(ctx, c, minted); err == nil && cred.Cert.SerialNumber.Cmp(hubBefore.SerialNumber) != 0 {
			rewroteAlone = fmt.Sprintf("re-wrote its kubeconfig Secret %s after it", time.Since(alone).Round(time.Second))
		}
	}
	if rewroteAlone == "" {
		rewroteAlone = fmt.Sprintf("had not re-written its kubeconfig Secret %s after it", renewedAloneWatch)
	}
	t.Logf("the hub's certificate renewed alone: the operator %s", rewroteAlone)
	start := time.Now()
	for _, r := range renewals[1:] {
		if err := triggerRenewal(ctx, l.env, r.certificate); err != nil {
			t.Fatalf("triggering the renewal of Certificate %s: %v", r.certificate, err)
		}
	}
	t.Logf("renewals triggered (the Issuing condition, as cmctl renew sets it) on %s; times below count from the servers' renewals",
		strings.Join(certificateNames(renewals), ", "))

	var operatorRewrote, hubCopied time.Duration
	var hubAfter *x509.Certificate
	// rolled is when none of the servers' pods of before is left: from then on every
	// connection reaches a pod that started with the renewed certificates.
	var rolled time.Duration
	deadline := start.Add(servedRenewalBound)
	for time.Now().Before(deadline) {
		if rolled == 0 {
			if now, err := renewingServerPods(ctx, l.env); err == nil && !anyPodOf(pods, now) {
				rolled = time.Since(start)
			}
		}
		done := rolled != 0
		for _, r := range renewals {
			if r.renewed == 0 {
				if cert, err := tlsSecretCertificate(ctx, l.env, r.certificate); err == nil && cert.SerialNumber.Cmp(r.before.SerialNumber) != 0 {
					r.renewed, r.after = time.Since(start), cert
				}
			}
			if r.served != "" && r.after != nil && r.servedAt == 0 && rolled != 0 {
				if served, err := servedCertificate(ctx, l.env, r.served); err == nil && served.SerialNumber.Cmp(r.after.SerialNumber) == 0 {
					r.servedAt = time.Since(start)
				}
			}
			done = done && r.renewed != 0 && (r.served == "" || r.servedAt != 0)
		}
		if operatorRewrote == 0 && renewals[0].after != nil {
			if cred, err := readCredential(ctx, c, minted); err == nil && cred.Cert.SerialNumber.Cmp(renewals[0].after.SerialNumber) == 0 {
				operatorRewrote = time.Since(start)
			}
		}
		if hubCopied == 0 && renewals[0].after != nil {
			if cert, err := hubSecretCertificate(ctx, l.env); err == nil && cert.SerialNumber.Cmp(renewals[0].after.SerialNumber) == 0 {
				hubCopied, hubAfter = time.Since(start), cert
			}
		}
		if done && hubCopied != 0 {
			break
		}
		time.Sleep(renewalPollInterval)
	}
	for _, r := range renewals {
		switch {
		case r.renewed == 0:
			t.Errorf("Certificate %s was not renewed within %s: its Secret still holds serial %s", r.certificate, servedRenewalBound, serial(r.before))
		case r.served != "" && rolled == 0:
			t.Errorf("the servers' pods %v are still there %s after the renewal: the operator did not roll them", slices.Sorted(maps.Keys(pods)), servedRenewalBound)
		case r.served != "" && r.servedAt == 0:
			t.Errorf("%s still serves serial %s %s after the renewal; its Secret holds serial %s", r.served, serial(r.before), servedRenewalBound, serial(r.after))
		case r.served != "":
			t.Logf("Certificate %s: renewed after %s (serial %s -> %s), served by %s once the servers had rolled, after %s", r.certificate,
				r.renewed.Round(time.Second), serial(r.before), serial(r.after), r.served, r.servedAt.Round(time.Second))
		default:
			t.Logf("Certificate %s: renewed after %s (serial %s -> %s)", r.certificate, r.renewed.Round(time.Second), serial(r.before), serial(r.after))
		}
	}
	if t.Failed() {
		return
	}
	if operatorRewrote == 0 {
		t.Fatalf("the operator did not re-write its kubeconfig Secret %s with the renewed certificate within %s", minted, servedRenewalBound)
	}
	t.Logf("the operator re-wrote %s/%s with serial %s after %s", naming.NamespaceKcp, minted, serial(renewals[0].after), operatorRewrote.Round(time.Second))
	switch {
	case hubCopied == 0:
		t.Fatalf("the hub's Secret still holds serial %s, not the renewed %s, %s after the renewal", serial(hubBefore), serial(renewals[0].after), servedRenewalBound)
	case hubCopied-operatorRewrote > hubCopyBound:
		t.Errorf("the hub's Secret got the renewed certificate %s after the operator's, beyond the %s bound", (hubCopied - operatorRewrote).Round(time.Second), hubCopyBound)
	}
	if hubAfter.SerialNumber.Cmp(hubBefore.SerialNumber) == 0 {
		t.Fatalf("the hub's Secret still holds the old serial %s", serial(hubBefore))
	}
	t.Logf("the hub's Secret held the renewed certificate (serial %s, the old %s gone) %s after the renewal, %s after the operator's Secret, with no up",
		serial(hubAfter), serial(hubBefore), hubCopied.Round(time.Second), (hubCopied - operatorRewrote).Round(time.Second))

	after, err := renewingServerPods(ctx, l.env)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the operator rolled the servers for their renewed certificates: pods %v replaced by %v, %s after the renewal",
		slices.Sorted(maps.Keys(pods)), slices.Sorted(maps.Keys(after)), rolled.Round(time.Second))
}

// everyoneWorksAfterTheRenewals: after the renewals, the hub's renewed credential
// through the front proxy and at each shard, a provider pod following an endpoint-slice
// URL, every certificate (the hub's copy the operator's current one), and alice, who
// signs in again with the hub's Dex (her token from the sign-in steps lives minutes).
func everyoneWorksAfterTheRenewals(t *testing.T, l *lifecycle) {
	if l.dex == nil {
		t.Fatal("the hub's Dex is not deployed: the sign-in steps did not run")
	}
	bin, err := l.verifyBin()
	if err != nil {
		t.Fatal(err)
	}
	runVerify(t, l.ctx, l.env, bin, nil, verify.CheckHubCredential, verify.CheckShards, verify.CheckProviderPath, verify.CheckCertificates)
	dex, err := l.dex.fromHost(issuerClusterIP(l.plan))
	if err != nil {
		t.Fatal(err)
	}
	token, err := dex.PasswordGrant(l.ctx, testenv.DexClient{ID: l.dex.clientID, Secret: l.dex.clientSecret}, alice.email, alice.password, "email", "groups")
	if err != nil {
		t.Fatalf("a token for %s from %s: %v", alice.email, dex.Issuer, err)
	}
	tokenFile := filepath.Join(t.TempDir(), "alice.token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	runVerify(t, l.ctx, l.env, bin, []string{"-oidc-token-file", tokenFile, "-oidc-workspace", "root:" + signinWorkspace}, verify.CheckOIDCUser)
}

// triggerRenewal sets the Certificate's Issuing condition, which makes cert-manager
// issue it again now: what `cmctl renew` does (cert-manager's cmd/ctl renew, "Marks
// cert-manager Certificate resources for manual renewal"), through the status
// subresource.
func triggerRenewal(ctx context.Context, e *env, name string) error {
	certs := e.c.dyn.Resource(certificateGVR).Namespace(naming.NamespaceKcp)
	crt, err := certs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conditions, _, _ := unstructured.NestedSlice(crt.Object, "status", "conditions")
	var kept []any
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] != "Issuing" {
			kept = append(kept, c)
		}
	}
	kept = append(kept, map[string]any{
		"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
		"message":            "Certificate re-issuance manually triggered",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		"observedGeneration": crt.GetGeneration(),
	})
	if err := unstructured.SetNestedSlice(crt.Object, kept, "status", "conditions"); err != nil {
		return err
	}
	_, err = certs.UpdateStatus(ctx, crt, metav1.UpdateOptions{})
	return err
}

// tlsSecretCertificate is the certificate in a TLS Secret of kcp-system.
func tlsSecretCertificate(ctx context.Context, e *env, name string) (*x509.Certificate, error) {
	s, err := e.c.kube.CoreV1().Secrets(naming.NamespaceKcp).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return pemcert.Leaf(s.Data[corev1.TLSCertKey])
}

// hubSecretCertificate is the client certificate of the kubeconfig in the hub's Secret.
func hubSecretCertificate(ctx context.Context, e *env) (*x509.Certificate, error) {
	hub := e.plan.cfg.Hub
	s, err := e.c.kube.CoreV1().Secrets(hub.Namespace).Get(ctx, hub.SecretName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	cred, err := parseCredential(hub.Namespace+"/"+hub.SecretName, &corev1.Secret{Data: map[string][]byte{naming.KubeconfigSecretKey: s.Data[hub.SecretKey]}})
	if err != nil {
		return nil, err
	}
	return cred.Cert, nil
}

// servedCertificate is the certificate a TLS client is served by one of the program's
// Services in front of kcp, verified against kcp's CA as the hub's kubeconfig carries
// it, under the name the operator's Service has in the certificate.
func servedCertificate(ctx context.Context, e *env, service string) (*x509.Certificate, error) {
	ca, err := verify.HubKubeconfigCA(ctx, e.c.kube, e.plan.cfg)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no CA certificate in the hub kubeconfig")
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := verify.ServiceDialFunc(&verify.PortForwardDialer{Kube: e.c.kube, Config: e.c.rest}, naming.NamespaceKcp, service, naming.KcpPort)(dctx, "tcp", "")
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: servedName(service), MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(dctx); err != nil {
		return nil, err
	}
	return tc.ConnectionState().PeerCertificates[0], nil
}

// servedName is a name the serving certificate behind one of the program's Services
// holds: the operator's Service's in-cluster name.
func servedName(service string) string {
	if service == naming.OwnedServiceName(naming.FrontProxyName) {
		return naming.OperatorServiceHost(naming.FrontProxyDeployment(naming.FrontProxyName))
	}
	return naming.OperatorServiceHost(naming.RootShardDeployment(naming.RootShardName))
}

// renewingServerPods are the root shard's and the front proxy's pods, by name: UID and
// restarts.
func renewingServerPods(ctx context.Context, e *env) (map[string]string, error) {
	out := map[string]string{}
	for _, selector := range []string{
		naming.LabelComponent + "=" + naming.ComponentRootShard + "," + naming.LabelInstance + "=" + naming.RootShardName,
		naming.LabelComponent + "=" + naming.ComponentFrontProxy + "," + naming.LabelInstance + "=" + naming.FrontProxyName,
	} {
		list, err := e.c.kube.CoreV1().Pods(naming.NamespaceKcp).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, err
		}
		if len(list.Items) == 0 {
			return nil, fmt.Errorf("no pod matches %s", selector)
		}
		for _, p := range list.Items {
			restarts := int32(0)
			for _, s := range p.Status.ContainerStatuses {
				restarts += s.RestartCount
			}
			out[p.Name] = fmt.Sprintf("%s/%d", p.UID, restarts)
		}
	}
	return out, nil
}

// anyPodOf says whether a pod of before is among now.
func anyPodOf(before, now map[string]string) bool {
	for name := range before {
		if _, ok := now[name]; ok {
			return true
		}
	}
	return false
}

func certificateNames(rs []*renewedCertificate) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.certificate)
	}
	return out
}

func serial(c *x509.Certificate) string {
	if c == nil || c.SerialNumber == nil {
		return "none"
	}
	return c.SerialNumber.Text(16)
}

// expiringCertificate is the Certificate verifyCertificatesFailsOnOneAboutToExpire has
// cert-manager issue for an hour, and its Secret.
const expiringCertificate = "railgrid-e2e-expiring"

// verifyCertificatesFailsOnOneAboutToExpire: a certificate cert-manager issues in
// kcp-system for an hour, from the root shard's serving CA, makes cmd/verify's
// certificates check fail with its default threshold, naming it and nothing else; once
// it is deleted the check passes.
func verifyCertificatesFailsOnOneAboutToExpire(t *testing.T, l *lifecycle) {
	ctx := l.ctx
	certs := l.c.dyn.Resource(certificateGVR).Namespace(naming.NamespaceKcp)
	serving, err := certs.Get(ctx, naming.ShardServerCertificate(naming.RootShardName), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	issuer, _, _ := unstructured.NestedMap(serving.Object, "spec", "issuerRef")
	crt := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{"name": expiringCertificate, "namespace": naming.NamespaceKcp},
		"spec": map[string]any{
			"secretName": expiringCertificate, "commonName": expiringCertificate, "dnsNames": []any{expiringCertificate + ".example"},
			"duration": "1h", "issuerRef": issuer,
		},
	}}
	if _, err := certs.Create(ctx, crt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	removed := false
	remove := func() {
		if removed {
			return
		}
		removed = true
		_ = certs.Delete(context.WithoutCancel(ctx), expiringCertificate, metav1.DeleteOptions{})
		_ = l.c.kube.CoreV1().Secrets(naming.NamespaceKcp).Delete(context.WithoutCancel(ctx), expiringCertificate, metav1.DeleteOptions{})
	}
	defer remove()
	var issued *x509.Certificate
	for deadline := time.Now().Add(time.Minute); issued == nil && time.Now().Before(deadline); time.Sleep(renewalPollInterval) {
		issued, _ = tlsSecretCertificate(ctx, l.env, expiringCertificate)
	}
	if issued == nil {
		t.Fatalf("cert-manager did not issue Certificate %s from %v within a minute", expiringCertificate, issuer)
	}
	bin, err := l.verifyBin()
	if err != nil {
		t.Fatal(err)
	}
	run := func() (verify.Report, error) {
		cmd := exec.CommandContext(ctx, bin, "-config", l.stack.cfgFile, "-kubeconfig", l.c.kubeconfig, "-json", "-checks", verify.CheckCertificates)
		out, runErr := cmd.Output()
		var report verify.Report
		if err := json.Unmarshal(out, &report); err != nil {
			t.Fatalf("cmd/verify (%v) printed no JSON report: %v\n%s", runErr, err, out)
		}
		return report, runErr
	}
	report, runErr := run()
	item := "Secret " + naming.NamespaceKcp + "/" + expiringCertificate + " " + corev1.TLSCertKey
	var failed []string
	for _, r := range report.Results {
		if r.Status == verify.StatusFail {
			failed = append(failed, r.Item+": "+r.Message)
		}
	}
	if runErr == nil || len(failed) != 1 || !strings.HasPrefix(failed[0], item+": ") ||
		!strings.Contains(failed[0], fmt.Sprintf("within the %s threshold", verify.DefaultMinCertificateValidity)) {
		t.Fatalf("with %s valid until %s, cmd/verify's certificates check (%v) failed on %q, want exactly that Secret", expiringCertificate,
			issued.NotAfter.UTC().Format(time.RFC3339), runErr, failed)
	}
	t.Logf("certificates, with a certificate that expires in an hour: %s", failed[0])
	remove()
	if report, runErr = run(); runErr != nil || !report.Passed {
		t.Fatalf("cmd/verify's certificates check without %s: %v %+v", expiringCertificate, runErr, report.Results)
	}
	t.Logf("certificates, once it is deleted: %d items passed", len(report.Results))
}

// previewIsCleanAfterTheRenewals: `pulumi preview --expect-no-changes` after the
// renewals: the hub's Secret, its copy and the kcp objects are as the program declares
// them, although every renewed certificate and the hub's Secret changed in the cluster.
func previewIsCleanAfterTheRenewals(t *testing.T, l *lifecycle) {
	pctx, cancel := context.WithTimeout(l.ctx, previewTimeout)
	defer cancel()
	res, log, err := l.stack.preview(pctx, optpreview.ExpectNoChanges(), optpreview.Diff())
	if changed := changedURNs(log); err != nil || len(changed) > 0 {
		t.Fatalf("the preview after the renewals is not empty (%v):%s%s\n%s", firstLine(fmt.Sprint(err)),
			indent(describe(changed)), indent(log.diagnostics()), changedLines(res.StdOut+stdoutOf(err)))
	}
	t.Logf("preview after the renewals: %s", changeCounts(res.ChangeSummary))
}
