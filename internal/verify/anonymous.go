package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// anonymousProbe is one request without credentials, sent to an owned Service, and the
// answer the design document's "Verify" section gives for it.
type anonymousProbe struct {
	target     kcpService
	path       string
	wantStatus int
	// wantAnonymous: the answer must be a Status that names system:anonymous.
	wantAnonymous bool
	why           string
}

func anonymousProbes(o *Options) []anonymousProbe {
	front := frontProxyService(o.Config)
	probes := []anonymousProbe{{
		target: front, path: "/readyz", wantStatus: http.StatusOK,
		why: "the front proxy's readiness endpoint",
	}}
	for _, s := range shardServices(o.Config) {
		probes = append(probes, anonymousProbe{
			target: s, path: "/api", wantStatus: http.StatusForbidden, wantAnonymous: true,
			why: "a healthy shard authenticates an anonymous request as system:anonymous and refuses it",
		})
	}
	return append(probes, anonymousProbe{
		target: front, path: "/api", wantStatus: http.StatusUnauthorized,
		why: "the front proxy rejects unauthenticated requests",
	})
}

// checkAnonymous asks each owned Service directly (not through the ingress) the
// anonymous questions of the design document's "Verify" section, retrying until every
// answer is right or the check times out. No client certificate is sent. The server
// certificate is verified against the CA in the component's serving certificate Secret,
// under the public hostname, which that certificate carries for the in-cluster path.
func checkAnonymous(ctx context.Context, o *Options) []Result {
	probes := anonymousProbes(o)
	return poll(ctx, o.Interval, func(ctx context.Context) []Result {
		out := make([]Result, 0, len(probes))
		for _, p := range probes {
			out = append(out, runAnonymousProbe(ctx, o, p))
		}
		return out
	})
}

func runAnonymousProbe(ctx context.Context, o *Options, p anonymousProbe) Result {
	item := fmt.Sprintf("Service %s GET %s", p.target.id(), p.path)
	roots, err := servingCA(ctx, o.Kube, p.target)
	if err != nil {
		return fail(CheckAnonymous, item, "%v", err)
	}
	u := "https://" + p.target.hostname + p.path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fail(CheckAnonymous, item, "bad request: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.target.httpClient(o, roots).Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fail(CheckAnonymous, item, "request for %s failed: %v; look at %s", u, err, p.target.logs())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	excerpt := describeBody(body)
	if resp.StatusCode != p.wantStatus {
		return fail(CheckAnonymous, item, "answered %d, want %d (%s); %s; look at %s", resp.StatusCode, p.wantStatus, p.why, excerpt, p.target.logs())
	}
	if !p.wantAnonymous {
		return pass(CheckAnonymous, item, "%d", resp.StatusCode)
	}
	// A 403 alone is not enough: it says something refused the request, not that kcp's
	// authorizer did so for an anonymous user. kcp, like kube-apiserver, answers with a
	// Status whose message names the user ("forbidden: User \"system:anonymous\" cannot
	// get path \"/api\""), the answer the design shows; its format has not changed in
	// Kubernetes' history, so requiring it costs a healthy shard nothing and catches a
	// 403 from anything else (a proxy, a policy, another identity).
	var status metav1.Status
	if json.Unmarshal(body, &status) != nil || status.Kind != "Status" {
		return fail(CheckAnonymous, item, "answered 403 but not with a Kubernetes Status, so not kcp's authorizer (%s); %s; look at %s", p.why, excerpt, p.target.logs())
	}
	if !strings.Contains(status.Message, "system:anonymous") {
		return fail(CheckAnonymous, item, "answered 403 but the Status does not name system:anonymous (%s); %s; look at %s", p.why, excerpt, p.target.logs())
	}
	return pass(CheckAnonymous, item, "%d for system:anonymous (reason %s)", resp.StatusCode, orDefault(string(status.Reason), "none"))
}
