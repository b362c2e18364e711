package verify

import (
	"context"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/providerprobe"
	"github.com/railgrid/railgrid-kcp/naming"
)

// hubIdentityChecks are the probe's hub-identity checks for cfg: the front proxy and
// every shard.
func hubIdentityChecks(cfg *config.Config) []string {
	out := []string{providerprobe.CheckFrontProxy}
	for _, s := range cfg.Kcp.AllShards() {
		name := naming.KcpShardName(s.Name)
		if s.Name == naming.RootShardName {
			name = naming.KcpRootShard
		}
		out = append(out, providerprobe.ShardCheck(name))
	}
	return out
}

// checkHubCredentialFromPod is hub-credential's pod mode: the probe, mounting the hub
// Secret as the hub does, asks kcp who the credential is through the front proxy (by
// the name the kubeconfig carries, through the cluster's DNS) and at each shard's
// public URL. It asks again until every answer is right or the check's time is up.
func checkHubCredentialFromPod(ctx context.Context, o *Options) []Result {
	if o.ProviderImage == "" {
		return []Result{{Check: CheckHubCredential, Item: "hub credential from a pod", Status: StatusSkip, Message: "skipped: " + noProviderImage}}
	}
	return poll(ctx, o.Interval, func(ctx context.Context) []Result {
		lines, logs, err := runProviderProbe(ctx, o, []string{providerprobe.StepHubIdentity})
		if lines == nil && err != nil && logs == "" {
			return []Result{fail(CheckHubCredential, "hub credential from a pod", "%v", err)}
		}
		return probeResults(CheckHubCredential, providerprobe.StepHubIdentity, hubIdentityChecks(o.Config), lines, logs, err,
			func(l providerprobe.Line) string { return "SelfSubjectReview from a pod at " + l.URL })
	})
}

// checkHubCredentialBothWays is hub-credential: through the port-forward from here,
// then from a Pod.
func checkHubCredentialBothWays(ctx context.Context, o *Options) []Result {
	results := checkHubCredential(ctx, o)
	return append(results, checkHubCredentialFromPod(ctx, o)...)
}
