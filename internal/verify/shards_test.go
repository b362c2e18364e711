package verify_test

import (
	"slices"
	"testing"

	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

// The design document ("Shards and the front proxy"): set the virtual-workspace URL on
// the public hostname, never the base URL. The fake front proxy lists the Shards the
// behaviour says kcp registered, to the hub's credential only.
const (
	rootShardItem  = "kcp Shard root"
	alphaShardItem = "kcp Shard alpha"
)

func TestShardsPassWhenEveryShardIsRegisteredWithItsURLs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	results := f.run(t, verify.CheckShards)
	requireAll(t, results, verify.StatusPass)
	if len(results) != 2 {
		t.Fatalf("want root and alpha: %s", dump(results))
	}
	requireStatus(t, results, rootShardItem, verify.StatusPass,
		"baseURL https://root-kcp.kcp-system.svc.cluster.local:6443", "virtualWorkspaceURL https://kcp-root.example.com", "kcp lists alpha, root")
	requireStatus(t, results, alphaShardItem, verify.StatusPass,
		"virtual workspaces on the public hostname kcp-alpha.example.com, base URL in-cluster",
		"baseURL https://alpha-shard-kcp.kcp-system.svc.cluster.local:6443")
	if got := f.kcp.Dials(); !slices.Equal(got, []string{"kcp-system/kcp-frontproxy:6443"}) {
		t.Errorf("dialled %v, want only the front proxy's owned Service", got)
	}
}

func TestShardsFailWhenAShardIsNotRegistered(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := verifytest.HealthyKcp(f.cfg)
	b.Shards = b.Shards[:1] // root only
	f.withKcp(t, b)
	results := f.run(t, verify.CheckShards)
	requireFail(t, results, alphaShardItem, "not registered in kcp's root workspace (registered: root)", "kubectl -n kcp-system logs deploy/alpha-shard-kcp")
	requireOthersPass(t, results, alphaShardItem)
}

func TestShardsFailWhenTheVirtualWorkspaceURLIsNotOnThePublicHostname(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := verifytest.HealthyKcp(f.cfg)
	b.Shards[1].VirtualWorkspaceURL = b.Shards[1].BaseURL // kcp's default without the flag
	f.withKcp(t, b)
	results := f.run(t, verify.CheckShards)
	requireFail(t, results, alphaShardItem,
		`spec.virtualWorkspaceURL "https://alpha-shard-kcp.kcp-system.svc.cluster.local:6443" is not on the public hostname kcp-alpha.example.com`,
		"--shard-virtual-workspace-url=https://kcp-alpha.example.com")
	requireOthersPass(t, results, alphaShardItem)
}

func TestShardsFailWhenABaseURLIsOnThePublicHostname(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := verifytest.HealthyKcp(f.cfg)
	b.Shards[0].BaseURL = "https://kcp-root.example.com:443"
	b.Shards[1].BaseURL = "https://kcp-alpha.example.com"
	f.withKcp(t, b)
	results := f.run(t, verify.CheckShards)
	requireFail(t, results, rootShardItem, `spec.baseURL "https://kcp-root.example.com:443" is on the public hostname kcp-root.example.com`, "leave the shard's spec.shardBaseURL unset")
	requireFail(t, results, alphaShardItem, `spec.baseURL "https://kcp-alpha.example.com" is on the public hostname`)
}

// Only the hub's credential may list the shards: one from another CA fails the check.
func TestShardsFailWhenTheHubCredentialIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kubeconfig, _, _ := hubCredential(t, f.cluster.CA, verifytest.NewCA(t), "kcp-admin", "system:kcp:admin")
	setHubSecret(t, f, verifytest.HubSecret(f.cfg, kubeconfig))
	requireFail(t, f.run(t, verify.CheckShards), "Shards in kcp's root workspace",
		"cannot list them with the hub's credential: kcp answered 401 Unauthorized", "kubectl -n kcp-system logs deploy/frontproxy-front-proxy")
}

// VerifyShards works on any list: the root shard's virtual-workspace URL is reported,
// not required on the public hostname.
func TestVerifyShardsReportsTheRootsVirtualWorkspaceURL(t *testing.T) {
	t.Parallel()
	cfg := verifytest.Config(t)
	shards := verifytest.HealthyKcp(cfg).Shards
	shards[0].VirtualWorkspaceURL = ""
	results := verify.VerifyShards(cfg, shards)
	requireStatus(t, results, rootShardItem, verify.StatusPass, `virtualWorkspaceURL ""`)
	requireStatus(t, results, alphaShardItem, verify.StatusPass)

	shards[1].VirtualWorkspaceURL = ""
	requireFail(t, verify.VerifyShards(cfg, shards), alphaShardItem, `spec.virtualWorkspaceURL "" is not on the public hostname`)
}
