package verify

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/providerprobe"
	"github.com/railgrid/railgrid-kcp/naming"
)

// CheckProviderPath runs the provider probe (cmd/provider-probe) in a Pod beside the
// hub, with the hub's kubeconfig and kcp's CA mounted: the path an in-cluster provider
// takes, from publishing an API to following the endpoint-slice URL on the public shard
// name through the cluster's split-horizon DNS.
const CheckProviderPath = "provider-path"

// Where the provider probe Pod finds its files (cmd/provider-probe's defaults).
const (
	probeKubeconfigDir = "/var/run/railgrid-kcp/hub"
	probeCADir         = "/var/run/railgrid-kcp/ca"
	probeCAKey         = "ca.crt"
	// ProviderProbeContainer names the probe's container and starts its Pod's name.
	ProviderProbeContainer = "provider-probe"
	// ProviderProbeNamePrefix starts the scratch workspaces' names, so that leftovers
	// of an interrupted run are recognised as verify's.
	ProviderProbeNamePrefix = "railgrid-verify"
)

// noProviderImage is the reason a provider-probe check is skipped without an image.
const noProviderImage = "no provider-probe image given (Options.ProviderImage; build it from cmd/provider-probe): the check cannot run, so it is not verified"

// placementShard is the shard the probe's scratch workspaces go on: the first shard
// besides the root (the root shard when there is none), as kcp names its Shard.
func placementShard(cfg *config.Config) (kcpName, hostname string) {
	if len(cfg.Kcp.Shards) > 0 {
		s := cfg.Kcp.Shards[0]
		return naming.KcpShardName(s.Name), s.Hostname
	}
	return naming.KcpRootShard, cfg.Kcp.RootShard.Hostname
}

// ProviderProbeArgs are the probe's arguments for steps: the mounted files, the
// placement shard, every shard's public URL, the identity the hub's Kubeconfig object
// asks for, and time limits that end before the check's.
func ProviderProbeArgs(cfg *config.Config, steps []string, timeout time.Duration) []string {
	shard, hostname := placementShard(cfg)
	// The workspaces' scheduling and the binding can take a while on a busy cluster right
	// after an up; half the probe's time, at most two minutes, for each wait.
	wait := min(timeout/2, 2*time.Minute)
	args := []string{
		"-kubeconfig", probeKubeconfigDir + "/" + cfg.Hub.SecretKey,
		"-ca-file", probeCADir + "/" + probeCAKey,
		"-steps", strings.Join(steps, ","),
		"-shard", shard,
		"-shard-hostname", hostname,
		"-name-prefix", ProviderProbeNamePrefix,
		"-want-user", naming.KubeconfigUsername,
		"-want-groups", naming.KubeconfigAdminGroup,
		"-timeout", timeout.Round(time.Second).String(),
		"-wait", wait.Round(time.Second).String(),
	}
	for _, s := range cfg.Kcp.AllShards() {
		name := naming.KcpShardName(s.Name)
		if s.Name == naming.RootShardName {
			name = naming.KcpRootShard
		}
		args = append(args, "-shard-url", name+"=https://"+s.Hostname)
	}
	return args
}

// runProviderProbe runs the probe once in a Pod in the hub's namespace and returns its
// report. kcp's CA (the one the hub kubeconfig carries, which the stack exports as
// kcpRootServerCA) reaches the Pod through a ConfigMap made for this run and deleted
// with it.
func runProviderProbe(ctx context.Context, o *Options, steps []string) ([]providerprobe.Line, string, error) {
	hub := o.Config.Hub
	ca, err := HubKubeconfigCA(ctx, o.Kube, o.Config)
	if err != nil {
		return nil, "", fmt.Errorf("kcp's CA from the hub kubeconfig (Secret %s/%s): %v", hub.Namespace, hub.SecretName, err)
	}
	cms := o.Kube.CoreV1().ConfigMaps(hub.Namespace)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "railgrid-kcp-provider-probe-ca-" + utilrand.String(5),
			Namespace: hub.Namespace,
			Labels:    map[string]string{"app.kubernetes.io/managed-by": "railgrid-kcp-verify"},
		},
		Data: map[string]string{probeCAKey: string(ca)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("create the CA ConfigMap in %s: %v", hub.Namespace, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = cms.Delete(dctx, cm.Name, metav1.DeleteOptions{})
	}()

	// The probe must end, clean-up included, before the check's time is up.
	timeout := 5 * time.Minute
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline) * 3 / 4
	}
	logs, runErr := o.Pods.Run(ctx, PodSpec{
		Image:     o.ProviderImage,
		Args:      ProviderProbeArgs(o.Config, steps, timeout),
		Name:      ProviderProbeContainer,
		Namespace: hub.Namespace,
		Files: []PodFile{
			{Dir: probeKubeconfigDir, Secret: hub.SecretName, Key: hub.SecretKey},
			{Dir: probeCADir, ConfigMap: cm.Name, Key: probeCAKey},
		},
		MemoryLimit: "128Mi",
		CPULimit:    "500m",
	})
	return providerprobe.ParseReport(logs), logs, runErr
}

// probeResults turns the probe's lines of one step into check's results, one per
// expected probe check in the probe's order: a line that did not pass fails, and a
// check the probe never reported (it crashed, or the Pod never ran) fails saying so.
func probeResults(check, step string, expected []string, lines []providerprobe.Line, logs string, runErr error, item func(providerprobe.Line) string) []Result {
	var out []Result
	seen := map[string]bool{}
	for _, l := range lines {
		if l.Step != step {
			continue
		}
		seen[l.Check] = true
		msg := l.Message
		if l.URL != "" {
			msg = "at " + l.URL + ": " + msg
		}
		if l.Identity != "" && !strings.Contains(msg, l.Identity) {
			msg += "; kcp sees " + l.Identity
		}
		switch l.Result {
		case providerprobe.Pass:
			out = append(out, pass(check, item(l), "%s (%s, %.1fs)", msg, l.Credential, l.Seconds))
		case providerprobe.NotRun:
			out = append(out, fail(check, item(l), "%s", msg))
		default:
			out = append(out, fail(check, item(l), "%s: %s (%s)", strings.TrimSuffix(msg, ": "), l.Error, l.Credential))
		}
	}
	why := "the probe did not report it"
	if runErr != nil {
		why = "the probe Pod failed: " + runErr.Error()
	}
	if len(seen) == 0 {
		if tail := lastLines(logs, 5); tail != "" {
			why += "; its log ends: " + tail
		}
	}
	for _, name := range expected {
		if !seen[name] {
			out = append(out, fail(check, name, "%s", why))
		}
	}
	return out
}

// lastLines is the last n non-empty lines of a log, joined for a message.
func lastLines(logs string, n int) string {
	var lines []string
	for _, l := range strings.Split(logs, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// checkProviderPath runs the probe's provider-path step from a Pod beside the hub, once:
// the step makes scratch workspaces and waits on kcp itself, and deletes them at its end.
func checkProviderPath(ctx context.Context, o *Options) []Result {
	if o.ProviderImage == "" {
		return []Result{{Check: CheckProviderPath, Item: "provider probe", Status: StatusSkip, Message: "skipped: " + noProviderImage}}
	}
	lines, logs, err := runProviderProbe(ctx, o, []string{providerprobe.StepProviderPath})
	if lines == nil && err != nil && logs == "" {
		return []Result{fail(CheckProviderPath, "provider probe", "%v", err)}
	}
	return probeResults(CheckProviderPath, providerprobe.StepProviderPath, providerprobe.ProviderPathChecks, lines, logs, err,
		func(l providerprobe.Line) string { return l.Check })
}
