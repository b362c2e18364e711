package e2e

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/naming"
)

// remint raises hub.remintGeneration to gen and checks, against the real operator and
// cert-manager, that the hub now holds a credential issued by this re-mint: a serial no
// earlier credential had, not valid before the re-mint started (in whole seconds, the
// resolution of a certificate's notBefore), the generation's OU, in the hub Secret,
// which was updated in place and no longer holds any earlier credential; and that the
// engine did it by replacing the Kubeconfig object and updating the hub Secret.
func remint(t *testing.T, ctx context.Context, e *env, gen int, creds *[]credential) {
	s := e.stack
	before := append([]credential(nil), (*creds)...)
	holders := dataHolders(t, ctx, e.c)
	p := s.render()
	hubBefore, err := e.c.kube.CoreV1().Secrets(p.cfg.Hub.Namespace).Get(ctx, p.cfg.Hub.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the hub Secret before the re-mint: %v", err)
	}
	s.setConfigPath(ctx, "hub.remintGeneration", fmt.Sprint(gen))
	uctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	start := time.Now().Truncate(time.Second)
	res, log, err := s.up(uctx, nil)
	if err != nil {
		t.Fatalf("up after raising hub.remintGeneration to %d failed: %v\n%s", gen, err, indent(log.diagnostics()))
	}
	t.Logf("re-mint %d: %s in %s", gen, changeCounts(summaryOf(res.Summary)), time.Since(start).Round(time.Second))

	// What the engine did.
	p2 := s.render()
	kcURN, hubURN := p2.urnOf("Kubeconfig", naming.KubeconfigObjectName(gen)), p2.urnOf("Secret", p2.cfg.Hub.SecretName)
	ops := log.opsByURN()
	if got := ops[kcURN]; !slices.Contains(got, "create-replacement") || !slices.Contains(got, "delete-replaced") {
		t.Errorf("the re-mint did %v on the Kubeconfig, want it replaced (create-replacement, delete-replaced)", got)
	}
	if got := ops[hubURN]; !slices.Equal(got, []string{"update"}) {
		t.Errorf("the re-mint did %v on the hub Secret, want one update in place", got)
	}
	for urn, o := range changedURNs(log) {
		if urn != kcURN && urn != hubURN && !drift.has(urn) && !strings.Contains(urn, "-hub-minted") {
			t.Errorf("the re-mint also did %v on %s", o, shortURN(urn))
		}
	}

	// What the hub got.
	cred, err := readCredential(ctx, e.c, naming.KubeconfigObjectName(gen))
	if err != nil {
		t.Fatalf("the operator's kubeconfig Secret of generation %d: %v", gen, err)
	}
	for _, old := range before {
		if cred.Cert.SerialNumber.Cmp(old.Cert.SerialNumber) == 0 {
			t.Errorf("the re-mint handed over the credential of %s again (serial %x)", old.Secret, old.Cert.SerialNumber)
		}
	}
	if cred.Cert.NotBefore.Before(start) {
		t.Errorf("the new credential is valid from %s, before the re-mint started at %s: it was not issued by this re-mint",
			cred.Cert.NotBefore.UTC().Format(time.RFC3339), start.UTC().Format(time.RFC3339))
	}
	if ou := fmt.Sprintf("railgrid-kcp-mint-%d", gen); !slices.Contains(cred.Cert.Subject.OrganizationalUnit, ou) {
		t.Errorf("the new credential's subject has OU %v, want %s", cred.Cert.Subject.OrganizationalUnit, ou)
	}
	checkHubSecret(t, ctx, e, p2, cred)
	hub, err := e.c.kube.CoreV1().Secrets(p2.cfg.Hub.Namespace).Get(ctx, p2.cfg.Hub.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hub.UID != hubBefore.UID {
		t.Errorf("the hub Secret was recreated (uid %s, was %s); it must be updated in place", hub.UID, hubBefore.UID)
	}
	for _, old := range before {
		if bytes.Equal(hub.Data[p2.cfg.Hub.SecretKey], old.Kubeconfig) || deepContains(hub.Data[p2.cfg.Hub.SecretKey], []byte(old.Marker), 3) {
			t.Errorf("the hub Secret still holds the credential of %s", old.Secret)
		}
	}
	*creds = append(*creds, cred)
	t.Logf("re-mint %d: serial %x, not before %s (re-mint started %s), OU %v",
		gen, cred.Cert.SerialNumber, cred.Cert.NotBefore.UTC().Format(time.RFC3339), start.UTC().Format(time.RFC3339), cred.Cert.Subject.OrganizationalUnit)

	// The previous generation's Kubeconfig object is gone; its Certificate and Secrets
	// stay in kcp-system (the operator neither owns nor deletes them), which
	// docs/operations.md says: the old certificate stays valid until it expires.
	prev := naming.KubeconfigObjectName(gen - 1)
	if _, err := e.c.dyn.Resource(kubeconfigGVR).Namespace(naming.NamespaceKcp).Get(ctx, prev, metav1.GetOptions{}); err == nil {
		t.Errorf("the previous generation's Kubeconfig %s is still there", prev)
	}
	left, err := certificateSecrets(ctx, e.c)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(left, func(l string) bool { return strings.Contains(l, "kubeconfig-cert-"+prev+",") }) {
		t.Errorf("the previous generation's Certificate kubeconfig-cert-%s is gone, but docs/operations.md says it stays: %v", prev, left)
	}
	t.Logf("left in %s after re-mint %d:%s", naming.NamespaceKcp, gen, indent(left))

	checkSameObjects(t, holders, dataHolders(t, ctx, e.c))
	checkNoPlaintext(t, ctx, e, *creds)
	checkHubCredentialWorks(t, ctx, e, fmt.Sprintf("re-mint %d", gen))
	checkNoChanges(t, ctx, s, fmt.Sprintf("post-remint-%d", gen))
}
