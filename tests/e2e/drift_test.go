//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/railgrid/railgrid-kcp/naming"
)

// handEdit is a change an operator in a hurry makes with kubectl, the resource of the
// stack a refresh must find changed, and how to tell that the program's value is back.
type handEdit struct {
	what string
	urn  string
	// args are kubectl's arguments, after --kubeconfig.
	args []string
	// undone is nil once the cluster holds the program's value again.
	undone func(ctx context.Context) error
}

// handEdits are the edits of the drift step: an owned shard Service's selector, the
// split-horizon stanza of the Corefile, the front proxy's replicas in its FrontProxy,
// and the hub Secret, deleted.
func handEdits(ctx context.Context, e *env, p rendered) ([]handEdit, error) {
	c := e.c
	service := naming.OwnedServiceName("alpha")
	corefile, err := c.kube.CoreV1().ConfigMaps(naming.NamespaceKubeSystem).Get(ctx, naming.SplitHorizonCorefileConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	programCorefile := corefile.Data[naming.CorefileKey]
	withoutStanza := withoutSplitHorizonStanza(programCorefile)
	if withoutStanza == programCorefile {
		return nil, fmt.Errorf("the Corefile of %s has no split-horizon stanza to remove:\n%s", naming.SplitHorizonCorefileConfigMap, programCorefile)
	}
	// What CoreDNS runs now, the program's Corefile: its pods must run it again before
	// the edit counts as undone, not only hold it in the ConfigMap.
	running, err := coreDNSRunningConfigs(ctx, c)
	if err != nil {
		return nil, err
	}
	hub := p.cfg.Hub
	hubSecret, err := c.kube.CoreV1().Secrets(hub.Namespace).Get(ctx, hub.SecretName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	merge := func(v any) string {
		data, _ := json.Marshal(v)
		return string(data)
	}
	return []handEdit{{
		what: "Service " + naming.NamespaceKcp + "/" + service + ": its selector picks the root shard's pods instead of alpha's",
		urn:  p.urnOf("Service", service),
		args: []string{"-n", naming.NamespaceKcp, "patch", "service", service, "--type", "merge",
			"-p", merge(map[string]any{"spec": map[string]any{"selector": map[string]any{naming.LabelInstance: naming.RootShardName}}})},
		undone: func(ctx context.Context) error {
			svc, err := c.kube.CoreV1().Services(naming.NamespaceKcp).Get(ctx, service, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := svc.Spec.Selector[naming.LabelInstance]; got != "alpha" {
				return fmt.Errorf("selects %s=%s", naming.LabelInstance, got)
			}
			return nil
		},
	}, {
		what: "ConfigMap " + naming.NamespaceKubeSystem + "/" + naming.SplitHorizonCorefileConfigMap + ": the split-horizon stanza removed from the Corefile",
		urn:  p.urnOf("ConfigMap", naming.SplitHorizonCorefileConfigMap),
		args: []string{"-n", naming.NamespaceKubeSystem, "patch", "configmap", naming.SplitHorizonCorefileConfigMap, "--type", "merge",
			"-p", merge(map[string]any{"data": map[string]any{naming.CorefileKey: withoutStanza}})},
		undone: func(ctx context.Context) error {
			cm, err := c.kube.CoreV1().ConfigMaps(naming.NamespaceKubeSystem).Get(ctx, naming.SplitHorizonCorefileConfigMap, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data[naming.CorefileKey] != programCorefile {
				return fmt.Errorf("holds another Corefile:\n%s", cm.Data[naming.CorefileKey])
			}
			now, err := coreDNSRunningConfigs(ctx, c)
			if err != nil {
				return err
			}
			if !maps.Equal(now, running) {
				return fmt.Errorf("the ConfigMap is back, but CoreDNS runs another configuration (the kubelet's ConfigMap sync and CoreDNS's reload have not both happened yet): %v, want %v", now, running)
			}
			return nil
		},
	}, {
		what: "FrontProxy " + naming.NamespaceKcp + "/" + naming.FrontProxyName + ": 2 replicas instead of the stack's",
		urn:  p.urnOf("FrontProxy", naming.FrontProxyName),
		args: []string{"-n", naming.NamespaceKcp, "patch", "frontproxy", naming.FrontProxyName, "--type", "merge",
			"-p", merge(map[string]any{"spec": map[string]any{"replicas": p.cfg.Kcp.FrontProxy.Replicas + 1}})},
		undone: func(ctx context.Context) error {
			fp, err := c.dyn.Resource(frontProxyGVR).Namespace(naming.NamespaceKcp).Get(ctx, naming.FrontProxyName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got, _, _ := unstructured.NestedInt64(fp.Object, "spec", "replicas"); got != int64(p.cfg.Kcp.FrontProxy.Replicas) {
				return fmt.Errorf("has spec.replicas %d", got)
			}
			return nil
		},
	}, {
		what: "Secret " + hub.Namespace + "/" + hub.SecretName + ": deleted",
		urn:  p.urnOf("Secret", hub.SecretName),
		args: []string{"-n", hub.Namespace, "delete", "secret", hub.SecretName},
		undone: func(ctx context.Context) error {
			s, err := c.kube.CoreV1().Secrets(hub.Namespace).Get(ctx, hub.SecretName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !bytes.Equal(s.Data[hub.SecretKey], hubSecret.Data[hub.SecretKey]) {
				return fmt.Errorf("holds another %s than before the edit", hub.SecretKey)
			}
			return nil
		},
	}}, nil
}

// withoutSplitHorizonStanza is the Corefile with the program's stanza (between its
// railgrid-kcp split horizon markers) cut out.
func withoutSplitHorizonStanza(corefile string) string {
	var out []string
	inside := false
	for _, line := range strings.Split(corefile, "\n") {
		switch {
		case strings.Contains(line, "railgrid-kcp split horizon: BEGIN"):
			inside = true
		case strings.Contains(line, "railgrid-kcp split horizon: END"):
			inside = false
		case !inside:
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// kubectl runs the real kubectl against the cluster, as an operator does.
func kubectl(ctx context.Context, bin, kubeconfig string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// coreDNSRunningConfigs is, for each CoreDNS pod, the SHA512 of the configuration it
// runs, as its reload plugin logs it at each (re)load ("Running configuration SHA512 =").
// The ConfigMap changes before CoreDNS does: the kubelet syncs the volume within about
// a minute, and the reload plugin checks the file every 30s or so.
func coreDNSRunningConfigs(ctx context.Context, c *cluster) (map[string]string, error) {
	deploy, err := c.kube.AppsV1().Deployments(naming.NamespaceKubeSystem).Get(ctx, naming.CoreDNSDeployment, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := c.kube.CoreV1().Pods(naming.NamespaceKubeSystem).List(ctx, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(deploy.Spec.Selector)})
	if err != nil {
		return nil, err
	}
	const marker = "Running configuration SHA512 = "
	out := map[string]string{}
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp != nil {
			continue
		}
		logs, err := c.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: naming.CoreDNSContainer}).DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("the logs of %s: %w", pod.Name, err)
		}
		text := string(logs)
		i := strings.LastIndex(text, marker)
		if i < 0 {
			return nil, fmt.Errorf("%s has not logged the configuration it runs (%q)", pod.Name, marker)
		}
		hash, _, _ := strings.Cut(text[i+len(marker):], "\n")
		out[pod.Name] = strings.TrimSpace(hash)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CoreDNS pod is running")
	}
	return out, nil
}
