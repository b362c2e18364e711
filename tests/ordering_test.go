package tests

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
	"github.com/railgrid/railgrid-kcp/naming"
)

// reaches reports whether from waits for to in the plan's dependency graph.
func reaches(edges map[string][]string, from, to string) bool {
	seen := map[string]bool{}
	stack := []string{from}
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, d := range edges[u] {
			if d == to {
				return true
			}
			if !seen[d] {
				seen[d] = true
				stack = append(stack, d)
			}
		}
	}
	return false
}

// The design's essential ordering, read from the plan's dependency graph, and nothing
// more: independent prerequisites start at the same time.
func TestPlanGraphHasTheDesignsOrderingAndNoMore(t *testing.T) {
	for _, stack := range stacks {
		rec := runStack(t, stack)
		edges := plan.Edges(rec)
		urn := func(kind, name string) string { return object(t, rec, kind, name).URN }
		release := func(name string) string {
			res, ok := rec.Find("kubernetes:helm.sh/v3:Release", name)
			require.True(t, ok, name)
			return res.URN
		}
		operator := release("railgrid-kcp-operator-release")
		root, shard, frontProxy := urn("RootShard", "root"), urn("Shard", "alpha"), urn("FrontProxy", naming.FrontProxyName)
		kubeconfig, hubSecret := urn("Kubeconfig", naming.KubeconfigName), urn("Secret", "railgrid-kcp")
		etcdRoot, etcdAlpha := urn("StatefulSet", "etcd-root"), urn("StatefulSet", "etcd-alpha")

		must := [][2]string{
			{root, operator}, {root, urn("Issuer", naming.SelfSignedIssuer)}, {root, etcdRoot},
			{shard, root}, {frontProxy, root}, {kubeconfig, frontProxy}, {hubSecret, kubeconfig},
			{urn("Job", naming.HubCopyJob(0)), hubSecret},
		}
		for _, e := range must {
			require.True(t, reaches(edges, e[0], e[1]), "%s: %s must wait for %s", stack, e[0], e[1])
		}
		independent := []string{etcdRoot, etcdAlpha, operator}
		if stack == "kind" {
			independent = append(independent, release("railgrid-kcp-kind-cert-manager"), release("railgrid-kcp-kind-envoy-gateway"))
		}
		independent = append(independent, shard, frontProxy)
		for i, a := range independent {
			for _, b := range independent[i+1:] {
				if (a == shard && b == frontProxy) || (a != shard && a != frontProxy && b != shard && b != frontProxy) {
					require.False(t, reaches(edges, a, b), "%s: %s must not wait for %s", stack, a, b)
					require.False(t, reaches(edges, b, a), "%s: %s must not wait for %s", stack, b, a)
				}
			}
		}
		// The alpha shard does not wait for the root shard's etcd, nor root for alpha's.
		require.False(t, reaches(edges, root, etcdAlpha))
	}
}

// The critical path runs through etcd, the root shard, the front proxy, the Kubeconfig
// and the copy of its kubeconfig into the hub's Secret: the five waits that cannot
// overlap.
func TestCriticalPathOfEachStack(t *testing.T) {
	for _, stack := range stacks {
		path := plan.CriticalPath(runStack(t, stack))
		var names []string
		for _, res := range path {
			names = append(names, mockstack.MetadataName(res))
		}
		require.Len(t, path, 5, "%s: %v", stack, names)
		require.Equal(t, []string{"root", "frontproxy", naming.KubeconfigName, naming.HubCopyJob(0)}, names[1:], stack)
		t.Logf("%s critical path (%d): %v", stack, len(path), names)
	}
}

// The YAML plan puts namespaces first and each object after what it needs.
func TestPlanObjectsComeInApplyOrder(t *testing.T) {
	for _, stack := range stacks {
		objects := plan.KubernetesObjects(runStack(t, stack))
		position := map[string]int{}
		for i, obj := range objects {
			position[obj.Resource.URN] = i
		}
		for i := 0; i < 4; i++ {
			require.Equal(t, "Namespace", objects[i].Manifest["kind"], "%s: namespaces first", stack)
		}
		edges := plan.Edges(runStack(t, stack))
		for _, obj := range objects {
			for _, dep := range edges[obj.Resource.URN] {
				if p, ok := position[dep]; ok {
					require.Less(t, p, position[obj.Resource.URN], "%s: %s before %s", stack, dep, obj.Resource.URN)
				}
			}
		}
	}
}
