package verify

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/errtext"
	"github.com/railgrid/railgrid-kcp/naming"
)

// GVRKcpShard is kcp's own Shard (core.kcp.io), which each shard registers in the root
// workspace; not the operator's Shard (GVRShard).
var GVRKcpShard = schema.GroupVersionResource{Group: "core.kcp.io", Version: "v1alpha1", Resource: "shards"}

// KcpShard is what the shards check reads of a kcp Shard: its three URLs (kcp-operator
// reference, "kcp flags and the URLs the operator sets").
type KcpShard struct {
	Name                string
	BaseURL             string
	ExternalURL         string
	VirtualWorkspaceURL string
}

// ListKcpShards lists the Shards of kcp's root workspace with cfg (its server URL's path
// is replaced by the root workspace's).
func ListKcpShards(ctx context.Context, cfg *rest.Config) ([]KcpShard, error) {
	root := rest.CopyConfig(cfg)
	u, err := url.Parse(root.Host)
	if err != nil {
		return nil, fmt.Errorf("server %q: %v", errtext.URL(root.Host), err)
	}
	u.Path = RootWorkspacePath
	root.Host = u.String()
	client, err := dynamic.NewForConfig(root)
	if err != nil {
		return nil, err
	}
	list, err := client.Resource(GVRKcpShard).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]KcpShard, 0, len(list.Items))
	for _, item := range list.Items {
		field := func(name string) string {
			v, _, _ := unstructured.NestedString(item.Object, "spec", name)
			return v
		}
		out = append(out, KcpShard{
			Name: item.GetName(), BaseURL: field("baseURL"), ExternalURL: field("externalURL"),
			VirtualWorkspaceURL: field("virtualWorkspaceURL"),
		})
	}
	return out, nil
}

// VerifyShards compares the Shards kcp lists with the configured ones: every configured
// shard is registered (the root shard as naming.KcpRootShard, the others by
// naming.KcpShardName); a shard's virtual-workspace URL is on its public hostname,
// except the root's, which is reported; and no shard's base URL is, because the front
// proxy and the shards dial the base URL with client certificates (the design
// document: "Set the virtual-workspace URL, never the base URL").
func VerifyShards(cfg *config.Config, shards []KcpShard) []Result {
	registered := make([]string, 0, len(shards))
	for _, s := range shards {
		registered = append(registered, s.Name)
	}
	slices.Sort(registered)
	var out []Result
	for _, want := range cfg.Kcp.AllShards() {
		isRoot := want.Name == naming.RootShardName
		name, deployment := naming.KcpShardName(want.Name), naming.ShardDeployment(want.Name)
		if isRoot {
			name, deployment = naming.KcpRootShard, naming.RootShardDeployment(want.Name)
		}
		item := "kcp Shard " + name
		logs := fmt.Sprintf("kubectl -n %s logs deploy/%s", naming.NamespaceKcp, deployment)
		i := slices.IndexFunc(shards, func(s KcpShard) bool { return s.Name == name })
		if i < 0 {
			out = append(out, fail(CheckShards, item, "not registered in kcp's root workspace (registered: %s); a shard registers itself when it starts: look at %s",
				errtext.List(registered), logs))
			continue
		}
		got := shards[i]
		urls := fmt.Sprintf("baseURL %s, externalURL %s, virtualWorkspaceURL %s", orDefault(got.BaseURL, `""`), orDefault(got.ExternalURL, `""`), orDefault(got.VirtualWorkspaceURL, `""`))
		var problems []string
		if urlHost(got.BaseURL) == want.Hostname {
			problems = append(problems, fmt.Sprintf("spec.baseURL %q is on the public hostname %s: the front proxy and the shards dial it with client certificates, which the edge strips; leave the shard's spec.shardBaseURL unset (the in-cluster Service)",
				got.BaseURL, want.Hostname))
		}
		if !isRoot && urlHost(got.VirtualWorkspaceURL) != want.Hostname {
			problems = append(problems, fmt.Sprintf("spec.virtualWorkspaceURL %q is not on the public hostname %s: APIExportEndpointSlices advertise it to clients outside the cluster; the Shard's extraArgs must carry --shard-virtual-workspace-url=https://%s (run pulumi up)",
				got.VirtualWorkspaceURL, want.Hostname, want.Hostname))
		}
		if len(problems) > 0 {
			out = append(out, fail(CheckShards, item, "%s; look at %s (%s)", strings.Join(problems, "; "), logs, urls))
			continue
		}
		if isRoot {
			out = append(out, pass(CheckShards, item, "registered: %s (kcp lists %s)", urls, strings.Join(registered, ", ")))
			continue
		}
		out = append(out, pass(CheckShards, item, "registered, virtual workspaces on the public hostname %s, base URL in-cluster: %s", want.Hostname, urls))
	}
	return out
}

// urlHost is the host name of a URL, without the port ("" when it does not parse).
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// checkShards lists the Shards of kcp's root workspace with the hub's credential through
// the front proxy's owned Service and runs VerifyShards on them, retrying until they are
// right or the check times out.
func checkShards(ctx context.Context, o *Options) []Result {
	front := frontProxyService(o.Config)
	return poll(ctx, o.Interval, func(ctx context.Context) []Result {
		data, failed := readHubKubeconfig(ctx, o, CheckShards)
		if failed != nil {
			return []Result{*failed}
		}
		cfg, err := KubeconfigRESTConfig(data, front.dial(o))
		if err != nil {
			return []Result{fail(CheckShards, "hub kubeconfig", "unusable for listing the shards: %v", err)}
		}
		shards, err := ListKcpShards(ctx, cfg)
		if err != nil {
			return []Result{fail(CheckShards, "Shards in kcp's root workspace", "cannot list them with the hub's credential: %s; look at %s",
				describeKcpError(err, cfg), front.logs())}
		}
		return VerifyShards(o.Config, shards)
	})
}
