package tests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Every Kubernetes object is applied by one fixed field manager, so a create that an
// interrupted up left in the cluster but not in the state is re-applied by its own
// manager on the next up (tests/conformance TestReapplyAfterAnInterruptedCreate shows the
// conflict without it). Forcing conflicts over (pulumi.com/patchForce) is allowed only
// on objects this program alone writes: never on the kcp-operator's objects (the
// operator writes their status and finalizers) nor on the patches of kubeadm's CoreDNS,
// except the one that must take a field of kubeadm's (its config-volume's ConfigMap,
// tests/kind_test.go).
func TestEveryObjectHasTheFixedFieldManagerAndForceOnlyWhereWeAloneWrite(t *testing.T) {
	for _, stack := range []string{"kind", "gke"} {
		rec := runStack(t, stack)
		objects, forced, operatorObjects := 0, 0, 0
		for _, res := range rec.Resources {
			if !res.Custom || res.Read || !strings.HasPrefix(res.Type, "kubernetes:") || strings.HasPrefix(res.Type, "kubernetes:helm.sh/") {
				continue
			}
			objects++
			annotations, _ := getOptional(inputs(res), "metadata", "annotations").(map[string]any)
			manager := naming.FieldManager
			if res.Type == "kubernetes:core/v1:Secret" && mockstack.MetadataName(res) == config.DefaultHubSecretName {
				// The hub's Secret: a manager of its own, so that its data, which an
				// earlier version applied under FieldManager, is left to the copy
				// (tests/kcp_test.go, TestHubKubeconfigIsSecretAndWhereTheHubReadsIt).
				manager = naming.HubSecretFieldManager
			}
			require.Equal(t, manager, annotations["pulumi.com/patchFieldManager"], "%s %s: field manager", stack, res.URN)
			force := annotations["pulumi.com/patchForce"]
			sharedWithAnotherWriter := strings.Contains(res.Type, "operator.kcp.io") || strings.HasSuffix(res.Type, "Patch")
			if strings.Contains(res.Type, "operator.kcp.io") {
				operatorObjects++
			}
			if sharedWithAnotherWriter && !strings.HasSuffix(res.URN, "::railgrid-kcp-dns-coredns-volume") {
				require.Nil(t, force, "%s %s: patchForce on an object another writer shares", stack, res.URN)
				continue
			}
			require.Equal(t, "true", force, "%s %s: an object this program alone writes takes its fields back", stack, res.URN)
			forced++
		}
		require.Greater(t, objects, 20, stack)
		require.Equal(t, 4, operatorObjects, "%s: RootShard, Shard, FrontProxy, Kubeconfig", stack)
		t.Logf("stack %s: %d objects, %d forced", stack, objects, forced)
	}
}

// getOptional walks keys through nested maps and returns nil where one is missing.
func getOptional(tree any, keys ...string) any {
	for _, k := range keys {
		m, ok := tree.(map[string]any)
		if !ok {
			return nil
		}
		tree = m[k]
	}
	return tree
}

// Every Helm release carries the hook that removes the records an interrupted Helm
// operation left pending, before the release is installed or upgraded again; without it
// an up killed while Helm installs needs a record deleted by hand (tests/e2e killed-up
// runs it against the real engine, provider and Helm; tests/conformance
// TestRemoveInterruptedHelmRecords runs the removal against a real kube-apiserver).
func TestEveryHelmReleaseRepairsRecordsAnInterruptedHelmLeftPending(t *testing.T) {
	for stack, want := range map[string]int{"kind": 3, "gke": 1} {
		rec := runStack(t, stack)
		releases := 0
		for _, res := range rec.Resources {
			if res.Type != "kubernetes:helm.sh/v3:Release" {
				continue
			}
			releases++
			require.Equal(t, []string{naming.HelmRecordRepairHook}, res.BeforeCreateHooks, "%s %s: before-create hooks", stack, res.URN)
			require.Equal(t, []string{naming.HelmRecordRepairHook}, res.BeforeUpdateHooks, "%s %s: before-update hooks", stack, res.URN)
		}
		require.Equal(t, want, releases, "%s: Helm releases (kind: cert-manager, Envoy Gateway, kcp-operator)", stack)
	}
}
