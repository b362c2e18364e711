//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/internal/providerprobe"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Where the provider probe's pods mount what they are given (as cmd/verify's do).
const (
	negativeKubeconfigDir = "/var/run/railgrid-kcp/credential"
	negativeCADir         = "/var/run/railgrid-kcp/ca"
	negativeCAKey         = "ca.crt"
)

// probeNegative is a provider probe pod that must not get a working request at alpha's
// slice URL, and what its failure must say.
type probeNegative struct {
	name, what string
	// want: the shard check's error holds one of these.
	want []string
	// trustSystem: the probe trusts the system roots only, not kcp's CA.
	trustSystem bool
	// secret holds the kubeconfig the probe uses (the hub Secret when empty).
	secret string
	// hostAliases resolve alpha's public name in the pod's /etc/hosts.
	hostAliases []corev1.HostAlias
}

// sliceURLFromReport is the APIExportEndpointSlice URL on alpha that cmd/verify's
// provider-path followed, read from its report (the endpoint-slice check's URL).
func sliceURLFromReport(report verify.Report) string {
	re := regexp.MustCompile(`https://[^ ,;)]+/services/apiexport/[^ ,;)]*[^ ,;):]`)
	for _, r := range report.Results {
		if r.Check == verify.CheckProviderPath && strings.Contains(r.Item, "endpoint-slice") && !strings.Contains(r.Item, "cached") {
			if u := re.FindString(r.Message); u != "" {
				return u
			}
		}
	}
	return ""
}

// edgeAddress is where a pod reaches the kind edge: the ClusterIP of the Envoy proxy's
// Service that Envoy Gateway made for the Gateway (its status address is the host's,
// where kind maps the edge's port, which in a pod is the pod itself).
func edgeAddress(ctx context.Context, e *env) (string, error) {
	list, err := e.c.kube.CoreV1().Services(naming.NamespaceEnvoyGateway).List(ctx, metav1.ListOptions{LabelSelector: envoyProxySelector})
	if err != nil {
		return "", err
	}
	for _, s := range list.Items {
		if _, err := netip.ParseAddr(s.Spec.ClusterIP); err == nil {
			return s.Spec.ClusterIP, nil
		}
	}
	return "", fmt.Errorf("no Service of Envoy's proxy (%s) in %s with a ClusterIP", envoyProxySelector, naming.NamespaceEnvoyGateway)
}

// runProbeNegative runs the probe's hub-identity step at the slice URL in a pod of the
// hub's namespace and returns its line for alpha.
func runProbeNegative(ctx context.Context, e *env, n probeNegative, sliceURL, caConfigMap string) (providerprobe.Line, string, error) {
	hub := e.plan.cfg.Hub
	secret := n.secret
	if secret == "" {
		secret = hub.SecretName
	}
	args := []string{"-kubeconfig", negativeKubeconfigDir + "/" + hub.SecretKey, "-steps", providerprobe.StepHubIdentity,
		"-shard", "alpha", "-shard-url", "alpha=" + sliceURL,
		"-want-user", naming.KubeconfigUsername, "-want-groups", naming.KubeconfigAdminGroup, "-timeout", "45s",
		// A name resolved to the edge gets no answer here: the request's own limit ends it.
		"-request-timeout", "5s"}
	files := []verify.PodFile{{Dir: negativeKubeconfigDir, Secret: secret, Key: hub.SecretKey}}
	if n.trustSystem {
		args = append(args, "-trust", "system")
	} else {
		args = append(args, "-ca-file", negativeCADir+"/"+negativeCAKey)
		files = append(files, verify.PodFile{Dir: negativeCADir, ConfigMap: caConfigMap, Key: negativeCAKey})
	}
	runner := &verify.KubePodRunner{Client: e.c.kube, Namespace: hub.Namespace,
		Customize: func(p *corev1.Pod) { p.Spec.HostAliases = n.hostAliases }}
	logs, runErr := runner.Run(ctx, verify.PodSpec{Image: testenv.ProviderProbeImageRef, Args: args, Name: "probe-" + n.name,
		Files: files, MemoryLimit: "128Mi", CPULimit: "500m"})
	for _, l := range providerprobe.ParseReport(logs) {
		if l.Check == providerprobe.ShardCheck("alpha") {
			return l, logs, nil
		}
	}
	return providerprobe.Line{}, logs, fmt.Errorf("the probe reported no check of alpha (%v)", runErr)
}

// ownURLFailures lists the lines of a kcp server's log since the given time that show a
// failed dial or certificate error for a public shard name: its own virtual-workspace
// URL, which it dials with CacheAPIs on.
func ownURLFailures(ctx context.Context, c *cluster, namespace, pod string, since time.Time, hosts []string) ([]string, error) {
	st := metav1.NewTime(since)
	raw, err := c.kube.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{SinceTime: &st}).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	failure := regexp.MustCompile(`(?i)x509|certificate|dial tcp|no such host|connection refused|i/o timeout|tls:`)
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		for _, h := range hosts {
			if strings.Contains(line, h) && failure.MatchString(line) {
				out = append(out, line)
				break
			}
		}
	}
	return out, nil
}
