//go:build linux

package e2e

import (
	"context"
	"fmt"
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

// corefileCoreDNSReads follows CoreDNS's pod template in the cluster to the file its
// container reads as /etc/coredns/Corefile (the container runs with -conf
// /etc/coredns/Corefile): the mount at that path (or the directory mount above it) and
// the ConfigMap key behind it. It returns the Corefile, the ConfigMap it came from, and
// the hosts file the Corefile's hosts stanza names, resolved the same way (absent: "").
func corefileCoreDNSReads(ctx context.Context, e *env) (corefile, from, hosts string, err error) {
	deploy, err := e.c.kube.AppsV1().Deployments(naming.NamespaceKubeSystem).Get(ctx, naming.CoreDNSDeployment, metav1.GetOptions{})
	if err != nil {
		return "", "", "", err
	}
	read := func(file string) (string, string, error) {
		spec := deploy.Spec.Template.Spec
		var container *corev1.Container
		for i := range spec.Containers {
			if spec.Containers[i].Name == naming.CoreDNSContainer {
				container = &spec.Containers[i]
			}
		}
		if container == nil {
			return "", "", fmt.Errorf("no container %s in the CoreDNS pod template", naming.CoreDNSContainer)
		}
		// The most specific mount wins, as in the container's mount table.
		var best *corev1.VolumeMount
		for i, m := range container.VolumeMounts {
			if (file == m.MountPath || strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")) && (best == nil || len(m.MountPath) > len(best.MountPath)) {
				best = &container.VolumeMounts[i]
			}
		}
		if best == nil {
			return "", "", fmt.Errorf("nothing is mounted at %s", file)
		}
		key := best.SubPath
		if key == "" {
			key = strings.TrimPrefix(file, strings.TrimSuffix(best.MountPath, "/")+"/")
		}
		for _, v := range spec.Volumes {
			if v.Name != best.Name || v.ConfigMap == nil {
				continue
			}
			for _, item := range v.ConfigMap.Items { // kubeadm maps key Corefile to path Corefile
				if item.Path == key {
					key = item.Key
				}
			}
			cm, err := e.c.kube.CoreV1().ConfigMaps(naming.NamespaceKubeSystem).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				return "", v.ConfigMap.Name, err
			}
			return cm.Data[key], v.ConfigMap.Name, nil
		}
		return "", "", fmt.Errorf("volume %s of the mount at %s is not a ConfigMap", best.Name, best.MountPath)
	}
	corefile, from, err = read(naming.CorefilePath)
	if err != nil {
		return "", from, "", err
	}
	for _, line := range strings.Split(corefile, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "hosts" {
			hosts, _, err = read(path.Clean(f[1]))
			if err != nil && !strings.Contains(err.Error(), "not found") {
				return corefile, from, "", err
			}
			return corefile, from, hosts, nil
		}
	}
	return corefile, from, "", nil
}

// checkCoreDNSReadsOurCorefile: CoreDNS's pod template in the cluster makes it read our
// Corefile (kubeadm's plus the hosts stanza), whose hosts file answers every shard
// hostname with its owned Service's ClusterIP; kubeadm's ConfigMap is kubeadm's alone,
// unchanged. wantHosts false: after destroy, the stanza stays and its file is gone.
func checkCoreDNSReadsOurCorefile(t *testing.T, ctx context.Context, e *env, p rendered, wantHosts bool) {
	t.Helper()
	corefile, from, hosts, err := corefileCoreDNSReads(ctx, e)
	if err != nil {
		t.Fatalf("the Corefile CoreDNS reads: %v", err)
	}
	if from != naming.SplitHorizonCorefileConfigMap {
		t.Errorf("CoreDNS reads its Corefile from ConfigMap %q, want %q", from, naming.SplitHorizonCorefileConfigMap)
	}
	if want := strings.Replace(mockstack.KindCorefile, ".:53 {\n", ".:53 {\n    # railgrid-kcp split horizon: BEGIN\n    hosts /etc/railgrid-kcp/hosts {\n        fallthrough\n    }\n    # railgrid-kcp split horizon: END\n", 1); corefile != want {
		t.Errorf("CoreDNS reads this Corefile:\n%s\nwant kubeadm's with the hosts stanza:\n%s", indent([]string{corefile}), indent([]string{want}))
	}
	if wantHosts {
		for _, s := range p.cfg.Kcp.AllShards() {
			if !strings.Contains(hosts, s.ClusterIP+" "+s.Hostname+"\n") {
				t.Errorf("the hosts file CoreDNS reads lacks %s %s:\n%s", s.ClusterIP, s.Hostname, hosts)
			}
		}
	} else if hosts != "" {
		t.Errorf("after destroy CoreDNS still reads answers:\n%s", hosts)
	}
	kubeadm, err := e.c.kube.CoreV1().ConfigMaps(naming.NamespaceKubeSystem).Get(ctx, naming.CoreDNSConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kubeadm.Data["Corefile"] != mockstack.KindCorefile {
		t.Errorf("kubeadm's Corefile was changed:\n%s", kubeadm.Data["Corefile"])
	}
	for _, m := range kubeadm.ManagedFields {
		if m.Manager != "kubeadm" {
			t.Errorf("kubeadm's ConfigMap has fields of manager %q", m.Manager)
		}
	}
	t.Logf("CoreDNS reads /etc/coredns/Corefile from ConfigMap %s (%d lines); its hosts file has %d lines", from, strings.Count(corefile, "\n"), strings.Count(hosts, "\n"))
}
