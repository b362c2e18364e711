package tests

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

// podTemplate is one pod template the program declares.
type podTemplate struct {
	owner  string // kind/name of the object that holds it
	spec   map[string]any
	claims []string // a StatefulSet's volume claim templates, volumes of its pods too
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
		pt := podTemplate{owner: kind + "/" + getString(t, in, "metadata.name"), spec: spec}
		if kind == "StatefulSet" {
			claims, _ := get(t, in, "spec").(map[string]any)["volumeClaimTemplates"].([]any)
			for i := range claims {
				pt.claims = append(pt.claims, getString(t, claims[i], "metadata.name"))
			}
		}
		out = append(out, pt)
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
			want := []string{"StatefulSet/etcd-root", "StatefulSet/etcd-alpha", "CronJob/etcd-root-defrag", "CronJob/etcd-alpha-defrag",
				"CronJob/" + naming.HubCopy, "Job/" + naming.HubCopyJob(0)}
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
		require.Equal(t, "restricted", etcd[naming.PodSecurityEnforceLabel], stack)
		for _, ns := range []string{naming.NamespaceKcp, naming.NamespaceOperator} {
			l := labels(ns)
			require.Equal(t, "restricted", l[naming.PodSecurityWarnLabel], "%s %s", stack, ns)
			require.NotContains(t, l, naming.PodSecurityEnforceLabel, "%s %s: upstream pods are not ours to change", stack, ns)
		}
	}
}

// Every container of the program (the etcd members; on GKE the snapshot and drill
// containers) runs with a read-only root filesystem, as the kcp-operator runs kcp's, and
// what it writes goes to a volume its pod spec names: every volume mount names one of the
// pod's volumes (an emptyDir, or a StatefulSet's claim), and every path that a container's
// command line (scripts included) or environment names is on one of its writable volume
// mounts, or on a read-only mount of what it reads (a ConfigMap, a Secret or a
// projection of them, such as the hub copy's kustomization). Not counted as paths: the program the command runs, devices (/dev, including
// bash's /dev/tcp) and an HTTP request's target. tests/snapshots runs the snapshot and
// drill pods with the root filesystem read-only for real. CoreDNS's container is
// kubeadm's, which already runs it read-only; the program only adds read-only ConfigMap
// mounts to it.
func TestEveryContainerHasAReadOnlyRootFilesystem(t *testing.T) {
	for _, stack := range []string{"kind", "gke"} {
		t.Run(stack, func(t *testing.T) {
			checked := 0
			for _, pt := range podTemplates(t, runStack(t, stack)) {
				// inputs are the volumes the kubelet fills from the API (a ConfigMap, a
				// Secret, a projection of them): always read-only, what a container
				// reads.
				volumes, inputs := map[string]bool{}, map[string]bool{}
				list, _ := pt.spec["volumes"].([]any)
				for _, v := range list {
					volumes[getString(t, v, "name")] = true
					for _, source := range []string{"configMap", "secret", "projected"} {
						if _, ok := v.(map[string]any)[source]; ok {
							inputs[getString(t, v, "name")] = true
						}
					}
				}
				for _, claim := range pt.claims {
					volumes[claim] = true
				}
				for _, c := range containersOf(pt.spec) {
					where := fmt.Sprintf("%s container %s", pt.owner, c["name"])
					require.Equal(t, true, get(t, c, "securityContext.readOnlyRootFilesystem"), where)
					var writable, read []string
					mounts, _ := c["volumeMounts"].([]any)
					for _, m := range mounts {
						name := getString(t, m, "name")
						require.True(t, volumes[name], "%s mounts %q, which its pod spec does not name", where, name)
						ro, _ := m.(map[string]any)["readOnly"].(bool)
						switch {
						case !ro:
							writable = append(writable, getString(t, m, "mountPath"))
						case inputs[name]:
							read = append(read, getString(t, m, "mountPath"))
						}
					}
					for _, path := range pathsNamed(t, c) {
						require.True(t, onMount(path, writable) || onMount(path, read),
							"%s names %s, which is on none of its writable volume mounts %v, nor on a mount of its inputs %v: the root filesystem is read-only", where, path, writable, read)
						checked++
					}
				}
			}
			require.NotZero(t, checked, "the containers name the paths they use")
		})
	}
}

// absolutePath finds the absolute paths in a command line, a script or a value: a "/"
// at the start or after a space, a quote or "=", followed by a name (so "gs://" and
// "http://" are not paths).
var absolutePath = regexp.MustCompile(`(?:^|[\s='"])(/[\w.$][^\s'"();|&<>]*)`)

// httpRequestTarget is an HTTP request line's method, just before its target.
var httpRequestTarget = regexp.MustCompile(`\b(GET|HEAD|POST|PUT|PATCH|DELETE) $`)

// pathsNamed are the filesystem paths a container names in its command (after the
// program), arguments and environment values.
func pathsNamed(t *testing.T, c map[string]any) []string {
	t.Helper()
	var texts []string
	if _, ok := c["command"]; ok {
		texts = append(texts, stringList(t, c, "command")[1:]...)
	}
	if _, ok := c["args"]; ok {
		texts = append(texts, stringList(t, c, "args")...)
	}
	env, _ := c["env"].([]any)
	for _, e := range env {
		if v, ok := e.(map[string]any)["value"].(string); ok {
			texts = append(texts, v)
		}
	}
	var out []string
	for _, text := range texts {
		for _, m := range absolutePath.FindAllStringSubmatchIndex(text, -1) {
			path := text[m[2]:m[3]]
			if strings.HasPrefix(path, "/dev/") || httpRequestTarget.MatchString(text[:m[2]]) {
				continue
			}
			out = append(out, path)
		}
	}
	return out
}

// onMount says whether a path is at or under one of the mount paths.
func onMount(path string, mounts []string) bool {
	for _, m := range mounts {
		if path == m || strings.HasPrefix(path, strings.TrimSuffix(m, "/")+"/") {
			return true
		}
	}
	return false
}
