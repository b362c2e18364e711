package tests

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/components"
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/config/stackconfig"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
	"github.com/railgrid/railgrid-kcp/naming"
)

// A retired shard (kcp.retiredShards) declares nothing: no etcd, no Shard, no Service,
// no route, no DNS answer. Its kept claims are only read, one per etcd member, in the
// etcd namespace.
func TestRetiredShardDeclaresNothingAndReadsItsKeptClaims(t *testing.T) {
	for _, stack := range stacks {
		values := stackValues(t, stack)
		setIn(values, "kcp", "retiredShards", []any{"beta"})
		rec, err := runValues(t, stack, values, mockstack.Options{})
		require.NoError(t, err)
		members := shippedConfig(t, stack).Etcd.Members
		var reads []string
		for _, res := range rec.Resources {
			if res.Read && res.Type == "kubernetes:core/v1:PersistentVolumeClaim" {
				reads = append(reads, res.ReadID)
				continue
			}
			require.False(t, !res.Read && strings.Contains(mockstack.MetadataName(res), "beta"),
				"%s: the retired shard still declares %s", stack, res)
		}
		var want []string
		for i := 0; i < members; i++ {
			want = append(want, naming.NamespaceEtcd+"/"+naming.EtcdClaimName("beta", i))
		}
		require.ElementsMatch(t, want, reads, stack)
	}
}

// Without retired shards the stack reads no claim (existing stacks' plans do not change).
func TestNoRetiredShardReadsNothing(t *testing.T) {
	for _, stack := range stacks {
		for _, res := range runStack(t, stack).Resources {
			require.NotEqual(t, "kubernetes:core/v1:PersistentVolumeClaim", res.Type, "%s: %s", stack, res)
		}
	}
}

// claimMocks binds every read claim to a volume named after it, as a provisioner would.
type claimMocks struct{}

func (claimMocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	out := args.Inputs.Copy()
	if args.TypeToken == "kubernetes:core/v1:PersistentVolumeClaim" && args.ReadRPC != nil {
		out["spec"] = resource.NewPropertyValue(map[string]any{"volumeName": "pv-of-" + strings.ReplaceAll(args.ID, "/", "-")})
	}
	return args.ID, out, nil
}

func (claimMocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

// The output of RetiredShardVolumes (the stack output retiredShardVolumes) names, per
// retired shard, the namespace and each kept claim with the volume bound to it.
func TestRetiredShardVolumesSayWhereTheDataIs(t *testing.T) {
	got := make(chan map[string]any, 1)
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		r, err := components.NewRetiredShardVolumes(ctx, "retired", &components.RetiredShardVolumesArgs{Shards: []string{"beta", "gamma"}, Members: 3})
		if err != nil {
			return err
		}
		r.Volumes.ApplyT(func(m map[string]any) error { got <- m; return nil })
		return nil
	}, pulumi.WithMocks("railgrid-kcp", "test", claimMocks{}))
	require.NoError(t, err)
	var volumes map[string]any
	select {
	case volumes = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the volumes output never resolved")
	}
	require.Len(t, volumes, 2)
	for _, shard := range []string{"beta", "gamma"} {
		entry := volumes[shard].(map[string]any)
		require.Equal(t, naming.NamespaceEtcd, entry["namespace"])
		claims := entry["claims"].(map[string]string)
		require.Len(t, claims, 3)
		for i := 0; i < 3; i++ {
			claim := naming.EtcdClaimName(shard, i)
			require.Equal(t, "pv-of-"+naming.NamespaceEtcd+"-"+claim, claims[claim])
		}
	}
	require.Equal(t, "data-etcd-beta-0", naming.EtcdClaimName("beta", 0), "the claim template data of StatefulSet etcd-beta, member 0")
}

// An added shard's DNS answer and edge route wait for its Shard (the design's order:
// the Shard Available before its route and DNS answer); its Shard waits for its etcd and
// the root shard.
func TestAddedShardIsPublishedOnlyOnceItsShardIsAvailable(t *testing.T) {
	values := stackValues(t, "kind")
	addShard(values, "beta", "beta.kcp.localhost", "10.96.0.103")
	rec, err := runValues(t, "kind", values, mockstack.Options{})
	require.NoError(t, err)
	urn := func(kind, name string) string { return object(t, rec, kind, name).URN }
	shard := urn("Shard", "beta")
	require.True(t, rec.DependsOnTransitively(shard, urn("StatefulSet", "etcd-beta")))
	require.True(t, rec.DependsOnTransitively(shard, urn("RootShard", "root")))
	require.True(t, rec.DependsOnTransitively(urn("ConfigMap", naming.SplitHorizonHostsConfigMap), shard), "the DNS answer waits for the Shard")
	require.True(t, rec.DependsOnTransitively(urn("TLSRoute", "kcp-beta"), shard), "the route waits for the Shard")
}

// The previous state is read from the stack's own outputs (organization/project/stack)
// with the engine's readStackOutputs call, declaring no resource (a read of the stack
// itself would always show as changed on refresh), and compared with the config: a
// shard that ran and is listed in kcp.retiredShards, or still in kcp.shards at the same
// place, passes.
func TestPreviousStateIsReadFromTheStacksOwnOutputs(t *testing.T) {
	retired := stackValues(t, "kind")
	setIn(retired, "kcp", "retiredShards", []any{"beta"})
	running := stackValues(t, "kind")
	addShard(running, "beta", "beta.kcp.localhost", "10.96.0.103")
	for name, values := range map[string]map[string]any{"retired": retired, "still running": running, "never ran": stackValues(t, "kind")} {
		rec, err := runValues(t, "kind", values, mockstack.Options{Previous: ranWithBeta})
		if name == "never ran" {
			require.Error(t, err, "beta ran and vanished without being retired")
			continue
		}
		require.NoError(t, err, name)
		require.Empty(t, rec.ByType("pulumi:pulumi:StackReference"), name)
		var reads []string
		for _, inv := range rec.Invokes {
			if inv.Token == stackconfig.ReadStackOutputsToken {
				reads = append(reads, inv.Args["name"].StringValue())
			}
		}
		require.Len(t, reads, 1, name)
		require.True(t, strings.HasSuffix(reads[0], "/railgrid-kcp/kind"), "%s: the stack reads itself, not %q", name, reads[0])
	}
	// A stack that never ran an up has no previous state: nothing is refused for it.
	_, err := runValues(t, "kind", stackValues(t, "kind"), mockstack.Options{})
	require.NoError(t, err)
}

// What the next up reads back is what this up runs: every shard, the root shard
// included, with its hostname and ClusterIP.
func TestEndpointsRecordEveryShard(t *testing.T) {
	cfg := shippedConfig(t, "kind")
	got := cfg.Endpoints()
	require.Len(t, got, 1+len(cfg.Kcp.Shards))
	require.Equal(t, cfg.Kcp.RootShard.ClusterIP, got["root"].ClusterIP)
	require.Equal(t, cfg.Kcp.RootShard.Hostname, got["root"].Hostname)
	for _, s := range cfg.Kcp.Shards {
		require.Equal(t, s.Hostname, got[s.Name].Hostname)
		require.Equal(t, s.ClusterIP, got[s.Name].ClusterIP)
	}
	require.NoError(t, cfg.CheckAgainstPrevious(got), "the config's own endpoints pass")
}

// A rename acknowledged in kcp.retiredShards reads as a retire plus an add: the offline
// plan's changes delete every object of the old name, create every object of the new
// one (a new, empty etcd), and read the old name's kept claims.
func TestAcknowledgedRenameIsARetirePlusAnAdd(t *testing.T) {
	withBeta := stackValues(t, "kind")
	addShard(withBeta, "beta", "beta.kcp.localhost", "10.96.0.103")
	renamed := stackValues(t, "kind")
	addShard(renamed, "gamma", "gamma.kcp.localhost", "10.96.0.104")
	setIn(renamed, "kcp", "retiredShards", []any{"beta"})
	before, err := runValues(t, "kind", withBeta, mockstack.Options{})
	require.NoError(t, err)
	// The stack ran beta: without the acknowledgment the rename is refused.
	unacknowledged := stackValues(t, "kind")
	addShard(unacknowledged, "gamma", "gamma.kcp.localhost", "10.96.0.104")
	_, err = runValues(t, "kind", unacknowledged, mockstack.Options{Previous: endpointsOf(t, withBeta)})
	require.ErrorContains(t, err, "a rename is a retire plus an add")
	after, err := runValues(t, "kind", renamed, mockstack.Options{Previous: endpointsOf(t, withBeta)})
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, plan.WriteChanges(&b, before, after))
	changes := b.String()
	for _, obj := range []string{"Shard kcp-system/%s", "StatefulSet etcd/etcd-%s", "Service kcp-system/kcp-%s", "TLSRoute kcp-system/kcp-%s"} {
		require.Contains(t, changes, "- "+fmt.Sprintf(obj, "beta")+"\n")
		require.Contains(t, changes, "+ "+fmt.Sprintf(obj, "gamma")+"\n")
	}
	require.Contains(t, changes, "r kubernetes:core/v1:PersistentVolumeClaim etcd/data-etcd-beta-0 (new read)")
	require.Contains(t, changes, "-         10.96.0.103 beta.kcp.localhost")
	require.Contains(t, changes, "+         10.96.0.104 gamma.kcp.localhost")
}

// endpointsOf is what an up of these values records for the next one.
func endpointsOf(t *testing.T, values map[string]any) map[string]config.ShardEndpoint {
	t.Helper()
	cfg, err := config.FromValues(encode(t, values))
	require.NoError(t, err)
	return cfg.Endpoints()
}

// On GKE, adding a shard creates its etcd, Shard, Service, route, health check and
// backend policy, response-policy rule (its DNS answer), snapshot and drill jobs, and
// updates one existing object only: the Gateway, which gets the shard's HTTPS listener.
func TestAddingAShardOnGKEUpdatesOnlyTheGatewayListeners(t *testing.T) {
	shipped := stackValues(t, "gke")
	withBeta := stackValues(t, "gke")
	addShard(withBeta, "beta", "kcp-beta.railgrid.example.com", "34.118.224.103")
	before, err := runValues(t, "gke", shipped, mockstack.Options{})
	require.NoError(t, err)
	after, err := runValues(t, "gke", withBeta, mockstack.Options{Previous: endpointsOf(t, shipped)})
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, plan.WriteChanges(&b, before, after))
	changes := b.String()
	for _, want := range []string{"+ Shard kcp-system/beta\n", "+ StatefulSet etcd/etcd-beta\n", "+ Service kcp-system/kcp-beta\n", "+ HTTPRoute kcp-system/kcp-beta\n",
		"+ gcp:dns/responsePolicyRule:ResponsePolicyRule railgrid-kcp-dns-rule-beta\n", "+ CronJob etcd/etcd-beta-snapshot\n", "+ CronJob etcd/etcd-beta-restore-drill\n",
		"~ Gateway kcp-system/kcp-edge\n", "hostname: kcp-beta.railgrid.example.com", "0 to delete, 1 to update"} {
		require.Contains(t, changes, want)
	}
	require.NotContains(t, changes, "\n- ", "adding a shard deletes nothing")
}
