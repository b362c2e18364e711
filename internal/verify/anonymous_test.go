package verify_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

// The fake kcp answers as the design document's "Verify" section says kcp does:
// front-proxy /readyz 200, anonymous /api 401 at the front proxy and 403 for
// system:anonymous at a shard. Here they are asked of the owned Services directly.
const (
	svcReadyz   = "Service kcp-system/kcp-frontproxy GET /readyz"
	svcFrontAPI = "Service kcp-system/kcp-frontproxy GET /api"
	svcRootAPI  = "Service kcp-system/kcp-root GET /api"
	svcAlphaAPI = "Service kcp-system/kcp-alpha GET /api"
)

func TestAnonymousPassesWithKcpAnswersAtTheOwnedServices(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	results := f.run(t, verify.CheckAnonymous)
	requireAll(t, results, verify.StatusPass)
	if len(results) != 4 {
		t.Fatalf("want readyz, two shards and the front-proxy /api: %s", dump(results))
	}
	requireStatus(t, results, svcReadyz, verify.StatusPass, "200")
	requireStatus(t, results, svcRootAPI, verify.StatusPass, "403 for system:anonymous (reason Forbidden)")
	requireStatus(t, results, svcAlphaAPI, verify.StatusPass, "403 for system:anonymous")
	requireStatus(t, results, svcFrontAPI, verify.StatusPass, "401")
	want := []string{"kcp-system/kcp-alpha:6443", "kcp-system/kcp-frontproxy:6443", "kcp-system/kcp-root:6443"}
	if got := f.kcp.Dials(); !slices.Equal(got, want) {
		t.Errorf("dialled %v, want the owned Services' kcp port %v", got, want)
	}
}

func TestAnonymousFailsWhenReadyzIsNot200(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := verifytest.HealthyKcp(f.cfg)
	b.ReadyzStatus = http.StatusServiceUnavailable
	f.withKcp(t, b)
	results := f.run(t, verify.CheckAnonymous)
	requireFail(t, results, svcReadyz, "answered 503, want 200", "body: ok", "kubectl -n kcp-system logs deploy/frontproxy-front-proxy")
	requireOthersPass(t, results, svcReadyz)
}

func TestAnonymousFailsWhenAShardAnswers401(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := verifytest.HealthyKcp(f.cfg)
	b.ShardAPIStatus = http.StatusUnauthorized
	f.withKcp(t, b)
	results := f.run(t, verify.CheckAnonymous)
	requireFail(t, results, svcRootAPI, "answered 401, want 403", "kubectl -n kcp-system logs deploy/root-kcp")
	requireFail(t, results, svcAlphaAPI, "answered 401, want 403", "kubectl -n kcp-system logs deploy/alpha-shard-kcp")
	requireOthersPass(t, results, svcRootAPI, svcAlphaAPI)
}

func TestAnonymousFailsWhenThe403IsNotKcpsForSystemAnonymous(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ body, want string }{
		"not a Status": {"Forbidden by policy", "answered 403 but not with a Kubernetes Status"},
		"another user": {`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden: User \"system:serviceaccount:default:x\" cannot get path \"/api\"","reason":"Forbidden","code":403}`,
			"answered 403 but the Status does not name system:anonymous"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			b := verifytest.HealthyKcp(f.cfg)
			b.ShardAPIBody = tc.body
			f.withKcp(t, b)
			results := f.run(t, verify.CheckAnonymous)
			requireFail(t, results, svcRootAPI, tc.want)
			requireOthersPass(t, results, svcRootAPI, svcAlphaAPI)
		})
	}
}

func TestAnonymousFailsWhenTheFrontProxyLetsAnonymousIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := verifytest.HealthyKcp(f.cfg)
	b.FrontAPIStatus = http.StatusOK
	f.withKcp(t, b)
	results := f.run(t, verify.CheckAnonymous)
	requireFail(t, results, svcFrontAPI, "answered 200, want 401", "rejects unauthenticated requests")
	requireOthersPass(t, results, svcFrontAPI)
}

// The server certificate is verified against the CA in the serving certificate's
// Secret: a server from another CA is refused, and so is a missing Secret.
func TestAnonymousVerifiesTheServerWithTheServingCertificatesCA(t *testing.T) {
	t.Parallel()
	t.Run("another CA", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		other := verifytest.NewCA(t)
		for _, obj := range verifytest.ServingCertificateSecrets(t, f.cfg, other) {
			if _, err := f.cluster.Kube.CoreV1().Secrets("kcp-system").Update(context.Background(), obj.(*corev1.Secret), metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		results := f.run(t, verify.CheckAnonymous)
		requireFail(t, results, svcRootAPI, "request for https://kcp-root.example.com/api failed", "certificate signed by unknown authority")
		requireFail(t, results, svcReadyz, "certificate signed by unknown authority")
	})
	t.Run("no Secret", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		if err := f.cluster.Kube.CoreV1().Secrets("kcp-system").Delete(context.Background(), "alpha-server", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		results := f.run(t, verify.CheckAnonymous)
		requireFail(t, results, svcAlphaAPI, "serving certificate Secret kcp-system/alpha-server not found", "kubectl -n kcp-system get certificates")
		requireOthersPass(t, results, svcAlphaAPI)
	})
}

// A Service verify cannot reach fails with the dialer's reason.
func TestAnonymousFailsWithTheDialersReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.opts.Services = dialerFunc(func(context.Context, string, string, int) (net.Conn, error) {
		return nil, errors.New("Service kcp-system/kcp-root selects no Ready pod")
	})
	results := f.run(t, verify.CheckAnonymous)
	requireFail(t, results, svcReadyz, "selects no Ready pod", "kubectl -n kcp-system logs deploy/frontproxy-front-proxy")
}

type dialerFunc func(ctx context.Context, namespace, service string, port int) (net.Conn, error)

func (d dialerFunc) DialService(ctx context.Context, namespace, service string, port int) (net.Conn, error) {
	return d(ctx, namespace, service, port)
}
