package verifytest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/providerprobe"
	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// ProviderImage is the provider probe's image in the tests.
const ProviderImage = "registry.example.test/railgrid-kcp/provider-probe:test"

// ProbeRunner is a scripted PodRunner for the provider probe's Pods: it answers the
// report the probe prints for the steps it is asked (-steps), as a healthy stack gives
// it, after Edit; every other Pod goes to Others (the DNS probe).
type ProbeRunner struct {
	Others verify.PodRunner
	cfg    *config.Config

	mu sync.Mutex
	// Edit, when set, changes the lines of a step before they are printed.
	Edit func(step string, lines []providerprobe.Line) []providerprobe.Line
	// Err, when set, is returned after the output (a probe that exited non-zero).
	Err error
	// Noise is printed before the report (client-go warnings on stderr mix into a log).
	Noise string
	// Specs records every provider probe Pod; CAs the CA ConfigMap each one mounted,
	// read while the Pod ran.
	Specs []verify.PodSpec
	CAs   []string
	// ReadCA reads a ConfigMap's ca.crt while the Pod runs (the fake cluster's).
	ReadCA func(ctx context.Context, namespace, name string) (string, error)
}

// HealthyProbe reports every check passed, with the URLs the probe follows on cfg's
// stack: the front proxy the hub kubeconfig names and the first shard's public name.
func HealthyProbe(cfg *config.Config, others verify.PodRunner) *ProbeRunner {
	return &ProbeRunner{Others: others, cfg: cfg}
}

// Run implements verify.PodRunner.
func (r *ProbeRunner) Run(ctx context.Context, spec verify.PodSpec) (string, error) {
	if spec.Name != verify.ProviderProbeContainer {
		return r.Others.Run(ctx, spec)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Specs = append(r.Specs, spec)
	for _, f := range spec.Files {
		if f.ConfigMap != "" && r.ReadCA != nil {
			ca, err := r.ReadCA(ctx, spec.Namespace, f.ConfigMap)
			if err != nil {
				return "", err
			}
			r.CAs = append(r.CAs, ca)
		}
	}
	steps := strings.Split(argValue(spec.Args, "-steps"), ",")
	var b strings.Builder
	b.WriteString(r.Noise)
	for _, step := range steps {
		lines := HealthyProbeLines(r.cfg, step)
		if r.Edit != nil {
			lines = r.Edit(step, lines)
		}
		for _, l := range lines {
			data, err := json.Marshal(l)
			if err != nil {
				return "", err
			}
			b.Write(data)
			b.WriteByte('\n')
		}
	}
	return b.String(), r.Err
}

func argValue(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// Scratch names of the healthy report.
const (
	ProbeProviderCluster = "2x1provider"
	ProbeConsumerCluster = "2x1consumer"
)

// HealthyProbeLines are the lines the probe prints for step on a healthy stack.
func HealthyProbeLines(cfg *config.Config, step string) []providerprobe.Line {
	credential := "client certificate CN=kcp-admin,O=system:kcp:admin issued by CN=root-client-ca"
	front := "https://" + verify.HubServerHost()
	shard := cfg.Kcp.Shards[0]
	slice := fmt.Sprintf("https://%s/services/apiexport/%s/widgets", shard.Hostname, ProbeProviderCluster)
	cached := fmt.Sprintf("https://%s/services/replication/%s/flavors", shard.Hostname, ProbeProviderCluster)
	line := func(check, url, message string) providerprobe.Line {
		return providerprobe.Line{Step: step, Check: check, URL: url, Credential: credential, Result: providerprobe.Pass, Message: message, Seconds: 0.25}
	}
	switch step {
	case providerprobe.StepProviderPath:
		return []providerprobe.Line{
			line(providerprobe.CheckWorkspaces, front+"/clusters/root", "workspaces root:railgrid-verify-0-provider and root:railgrid-verify-0-consumer are Ready on shard alpha"),
			line(providerprobe.CheckPublish, front+"/clusters/root:railgrid-verify-0-provider", "APIResourceSchema v1.widgets.probe.railgrid.dev and APIExport widgets"),
			line(providerprobe.CheckBind, front+"/clusters/root:railgrid-verify-0-consumer", "APIBinding widgets is Bound"),
			line(providerprobe.CheckEndpointSlice, slice, "APIExportEndpointSlice widgets lists "+slice+" for shard alpha"),
			line(providerprobe.CheckCreate, slice+"/clusters/"+ProbeConsumerCluster+"/apis/probe.railgrid.dev/v1/widgets", "created Widget"),
			line(providerprobe.CheckList, slice+"/clusters/*/apis/probe.railgrid.dev/v1/widgets", "lists 1 Widget(s) across workspaces"),
			line(providerprobe.CheckWatch, slice+"/clusters/*/apis/probe.railgrid.dev/v1/widgets?watch=true", "ADDED event came"),
			line(providerprobe.CheckCachedPublish, front+"/clusters/root:railgrid-verify-0-provider", "ClusterCachedResource flavors Ready"),
			line(providerprobe.CheckCachedBind, front+"/clusters/root:railgrid-verify-0-consumer", "APIBinding flavors is Bound"),
			line(providerprobe.CheckCachedEndpointSlice, cached, "ClusterCachedResourceEndpointSlice flavors lists "+cached),
			line(providerprobe.CheckCachedList, cached+"/clusters/"+ProbeConsumerCluster+"/apis/probe.railgrid.dev/v1/flavors", "lists 1 Flavor(s)"),
			line(providerprobe.CheckCachedWatch, cached+"/clusters/"+ProbeConsumerCluster+"/apis/probe.railgrid.dev/v1/flavors?watch=true", "ADDED event came"),
			line(providerprobe.CheckCachedConsumerRead, front+"/clusters/root:railgrid-verify-0-consumer/apis/probe.railgrid.dev/v1/flavors", "the consumer workspace lists Flavors"),
			line(providerprobe.CheckCachedWriteRefused, cached+"/clusters/"+ProbeConsumerCluster+"/apis/probe.railgrid.dev/v1/flavors", "refused as it must be"),
			line(providerprobe.CheckCleanup, front+"/clusters/root", "deleted root:railgrid-verify-0-consumer, root:railgrid-verify-0-provider"),
		}
	case providerprobe.StepHubIdentity:
		identity := `user "kcp-admin" in groups [system:kcp:admin, system:authenticated]`
		out := []providerprobe.Line{line(providerprobe.CheckFrontProxy, front+"/clusters/root", "kcp sees "+identity)}
		for _, s := range cfg.Kcp.AllShards() {
			name := naming.KcpShardName(s.Name)
			if s.Name == naming.RootShardName {
				name = naming.KcpRootShard
			}
			out = append(out, line(providerprobe.ShardCheck(name), "https://"+s.Hostname+"/clusters/root", "kcp sees "+identity))
		}
		for i := range out {
			out[i].Identity = identity
		}
		return out
	}
	return nil
}
