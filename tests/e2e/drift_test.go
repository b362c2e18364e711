//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

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
