package tests

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
)

// docs/operations.md shows what `cmd/plan -format changes` prints for adding the shard
// beta to the kind stack and for retiring it; the excerpts are generated here from the
// program, so they cannot go stale.
func TestOperationsDocShowsThePlanChangesOfAddingAndRetiringAShard(t *testing.T) {
	shipped := stackValues(t, "kind")
	withBeta := stackValues(t, "kind")
	addShard(withBeta, "beta", "beta.kcp.localhost", "10.96.0.103")
	retired := stackValues(t, "kind")
	setIn(retired, "kcp", "retiredShards", []any{"beta"})
	// Adding beta runs on a stack whose last up ran without it; retiring it on one that ran it.
	ran := func(values map[string]any) mockstack.Options {
		cfg, err := config.FromValues(encode(t, values))
		require.NoError(t, err)
		return mockstack.Options{Previous: cfg.Endpoints()}
	}
	changes := func(before, after map[string]any) string {
		prev, err := runValues(t, "kind", before, ran(before))
		require.NoError(t, err)
		next, err := runValues(t, "kind", after, ran(before))
		require.NoError(t, err)
		var b bytes.Buffer
		require.NoError(t, plan.WriteChanges(&b, prev, next))
		return b.String()
	}
	add, retire := changes(shipped, withBeta), changes(withBeta, retired)
	// The excerpts show what the issue asks of them.
	for _, want := range []string{"+ Shard kcp-system/beta", "+ StatefulSet etcd/etcd-beta", "+ Service kcp-system/kcp-beta", "+ TLSRoute kcp-system/kcp-beta",
		"~ ConfigMap kube-system/railgrid-kcp-hosts", "+         10.96.0.103 beta.kcp.localhost", "0 to delete, 2 to update"} {
		require.Contains(t, add, want)
	}
	for _, want := range []string{"- Shard kcp-system/beta", "- StatefulSet etcd/etcd-beta", "r kubernetes:core/v1:PersistentVolumeClaim etcd/data-etcd-beta-0 (new read)",
		"-         10.96.0.103 beta.kcp.localhost"} {
		require.Contains(t, retire, want)
	}
	for name, text := range map[string]string{"add beta": add, "retire beta": retire} {
		generatedBlock(t, "docs/operations.md", "plan changes: "+name, "```diff\n"+text+"```\n",
			"go test ./tests -run TestOperationsDocShowsThePlanChanges -update-docs")
	}
}
