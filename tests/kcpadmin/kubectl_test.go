package kcpadmin_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

const envSkipKubectl = "RAILGRID_SKIP_KCPADMIN_KUBECTL"

// Real kubectl, given only KUBECONFIG, authenticates through the forward with the
// kubeconfig kcpadmin writes, also when the front proxy's handshake lists only a client
// CA that issued nothing of this installation: kubectl presents its certificate whatever
// the list says (client-go's GetClientCertificate), where a Go client that holds it in
// tls.Config.Certificates sends none (TestWhichAdvertisedClientCAsMakeGoSendTheClientCertificate).
func TestKubectlAuthenticatesWithTheKubeconfigWhateverClientCAsTheFrontProxyLists(t *testing.T) {
	testenv.SkipIfShortOrDisabled(t, envSkipKubectl, "runs kubectl through a forward to a fake front proxy")
	var exe testenv.Executables
	kubectl := exe.Find("kubectl", "")
	exe.Require(t, "the kcpadmin kubectl test", `Put it on PATH: eval "$(hack/build-tools.sh env kube)"`, envSkipKubectl)
	t.Parallel()

	for _, c := range []struct {
		name       string
		advertised func(*kcpCerts) []*pki.CA
	}{
		{"root-client-ca and the requestheader CA", func(p *kcpCerts) []*pki.CA { return []*pki.CA{p.clientCA, p.requestHeaderCA} }},
		{"a client CA that issued nothing here", func(p *kcpCerts) []*pki.CA { return []*pki.CA{p.otherClientCA} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, c.advertised)
			s := h.run(t, h.options(t))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, kubectl, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
			cmd.Env = append(os.Environ(), "KUBECONFIG="+s.KubeconfigPath, "HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != naming.KubeconfigUsername {
				t.Fatalf("kubectl auth whoami: %v\n%s", err, out)
			}
			if n := h.proxy.lastPresented(t); n != 2 {
				t.Errorf("kubectl presented %d certificates, want the operator's chain of 2", n)
			}
		})
	}
}
