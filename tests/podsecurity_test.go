package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/components"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

// podTemplate is one pod template the program declares.
type podTemplate struct {
	owner string // kind/name of the object that holds it
	spec  map[string]any
}

// podTemplates lists the pod templates of every workload object in a stack.
func podTemplates(t *testing.T, rec *mockstack.Recording) []podTemplate {
	t.Helper()
	var out []podTemplate
	for _, res := range rec.Resources {
		if !strings.HasPrefix(res.Type, "kubernetes:") || !res.Custom {
			continue
		}
		kind := res.Type[strings.LastIndex(res.Type, ":")+1:]
		path := ""
		switch kind {
		case "StatefulSet", "Deployment", "DaemonSet", "ReplicaSet", "Job":
			path = "spec.template.spec"
		case "CronJob":
			path = "spec.jobTemplate.spec.template.spec"
		case "Pod":
			path = "spec"
		default:
			continue
		}
		in := inputs(res)
		spec, ok := get(t, in, path).(map[string]any)
		require.True(t, ok, "%s %s: no pod spec", kind, res.Name)
		out = append(out, podTemplate{owner: kind + "/" + getString(t, in, "metadata.name"), spec: spec})
	}
	return out
}

// containersOf are a pod spec's init and main containers.
func containersOf(spec map[string]any) []map[string]any {
	var out []map[string]any
	for _, field := range []string{"initContainers", "containers"} {
		list, _ := spec[field].([]any)
		for _, c := range list {
			out = append(out, c.(map[string]any))
		}
	}
	return out
}

// Every pod template the program defines (the etcd StatefulSets, the snapshot and drill
// CronJobs) sets what the restricted Pod Security Standard requires, and requests cpu and
// memory with a memory limit. Controls from "Pod Security Standards", Restricted
// (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted):
// runAsNonRoot true, runAsUser not 0, seccompProfile RuntimeDefault or Localhost,
// allowPrivilegeEscalation false, capabilities drop ALL. The real admission plugin is
// run on these templates by tests/conformance (TestPodTemplatesPassRestrictedPodSecurity).
func TestPodTemplatesSetRestrictedSecurityAndResources(t *testing.T) {
	for _, stack := range []string{"kind", "gke"} {
		t.Run(stack, func(t *testing.T) {
			rec := runStack(t, stack)
			templates := podTemplates(t, rec)
			var owners []string
			for _, pt := range templates {
				owners = append(owners, pt.owner)
				pod := pt.spec
				require.Equal(t, true, get(t, pod, "securityContext.runAsNonRoot"), pt.owner)
				require.NotZero(t, number(t, pod, "securityContext.runAsUser"), pt.owner)
				require.Equal(t, "RuntimeDefault", getString(t, pod, "securityContext.seccompProfile.type"), pt.owner)
				require.NotContains(t, pod, "hostNetwork", pt.owner)
				require.NotContains(t, pod, "hostPID", pt.owner)
				for _, c := range containersOf(pod) {
					where := fmt.Sprintf("%s container %s", pt.owner, c["name"])
					require.Equal(t, false, get(t, c, "securityContext.allowPrivilegeEscalation"), where)
					require.Equal(t, []string{"ALL"}, stringList(t, c, "securityContext.capabilities.drop"), where)
					require.NotContains(t, c["securityContext"], "privileged", where)
					require.NotEmpty(t, getString(t, c, "resources.requests.cpu"), where)
					require.NotEmpty(t, getString(t, c, "resources.requests.memory"), where)
					require.NotEmpty(t, getString(t, c, "resources.limits.memory"), where)
				}
			}
			want := []string{"StatefulSet/etcd-root", "StatefulSet/etcd-alpha"}
			if stack == "gke" {
				want = append(want, "CronJob/etcd-root-snapshot", "CronJob/etcd-root-restore-drill",
					"CronJob/etcd-alpha-snapshot", "CronJob/etcd-alpha-restore-drill")
			}
			require.ElementsMatch(t, want, owners, "the pod templates the program defines")
		})
	}
}

// The etcd namespace holds only this program's pods and enforces the restricted level;
// the namespaces with upstream pods (kcp-operator, kcp-system) only warn. Labels from
// "Pod Security Admission"
// (https://kubernetes.io/docs/concepts/security/pod-security-admission/#pod-security-admission-labels-for-namespaces).
func TestNamespacesApplyRestrictedPodSecurity(t *testing.T) {
	for _, stack := range []string{"kind", "gke"} {
		rec := runStack(t, stack)
		labels := func(name string) map[string]any {
			return get(t, inputs(object(t, rec, "Namespace", name)), "metadata.labels").(map[string]any)
		}
		etcd := labels(naming.NamespaceEtcd)
		require.Equal(t, "restricted", etcd[components.PodSecurityEnforceLabel], stack)
		for _, ns := range []string{naming.NamespaceKcp, naming.NamespaceOperator} {
			l := labels(ns)
			require.Equal(t, "restricted", l[components.PodSecurityWarnLabel], "%s %s", stack, ns)
			require.NotContains(t, l, components.PodSecurityEnforceLabel, "%s %s: upstream pods are not ours to change", stack, ns)
		}
	}
}
