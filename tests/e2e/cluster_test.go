//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

// cluster is a Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) with one real node (kubelet, kube-proxy and containerd on a bridge of
// the test's own, node_test.go) and three nodes simulated by kwok, stopped and removed
// when the (sub)test ends.
type cluster struct {
	dir         string
	host        string
	token       string
	caPEM       []byte
	kubeconfig  string // admin kubeconfig whose context is the stack's kind.context
	serviceCIDR string
	rest        *rest.Config
	kube        kubernetes.Interface
	dyn         dynamic.Interface
	apiserver   *testenv.Process
	procs       []*testenv.Process
	node        *testenv.Node
	// network is the real node's pod network; its rules are checked again once the
	// add-ons' webhooks have been called through their Services (addons_test.go).
	network *testenv.NodeNetwork
	apiPort int
	// certManagerPresent: cert-manager is the test's process, not the chart's pods
	// (envOptions.externalApprover; prepareCluster).
	certManagerPresent bool
}

// startCluster starts the control plane in dir with the stack's Service range, on the
// gateway address of the real node's network, and the real node with the given images;
// it waits until the API server is ready and the node is Ready. kwok starts too; its
// nodes are created by prepareCluster.
func startCluster(t *testing.T, ctx context.Context, bins binaries, dir string, stack *config.Config, images []string) *cluster {
	t.Helper()
	serviceCIDR := stack.Network.ServiceCIDR
	start := time.Now()
	services, err := netip.ParsePrefix(serviceCIDR)
	if err != nil {
		t.Fatalf("the stack's Service range %q: %v", serviceCIDR, err)
	}
	network := testenv.SetUpNodeNetwork(t, dir, testenv.NodeNetworkOptions{
		Bridge: nodeBridge, PodCIDR: podCIDR, ServiceCIDR: services, Blackholes: []netip.Prefix{kwokCIDR},
	})
	server := testenv.StartAPIServer(t, ctx, testenv.APIServerOptions{
		KubeAPIServer: bins.kubeAPIServer, Etcd: bins.etcd, Dir: dir, ServiceCIDR: serviceCIDR, Name: "e2e",
		BindAddress: network.Gateway.String(), DefaultNodeSelector: realNodeSelector,
		// The Envoy proxies' placement (prepareCluster) is a MutatingAdmissionPolicy.
		MutatingAdmissionPolicies: true,
	})
	pki := server.PKI
	c := &cluster{dir: dir, host: server.Host, token: server.Token, caPEM: pki.CAPEM, apiserver: server.Process,
		serviceCIDR: serviceCIDR, procs: []*testenv.Process{server.Etcd, server.Process}, network: network, apiPort: server.Port()}

	c.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := server.WriteKubeconfig(c.kubeconfig, stack.Kind.Context); err != nil {
		t.Fatal(err)
	}
	c.rest = server.RESTConfig()
	c.rest.QPS, c.rest.Burst, c.rest.UserAgent = 100, 200, "railgrid-kcp-e2e"
	if c.kube, err = kubernetes.NewForConfig(c.rest); err != nil {
		t.Fatal(err)
	}
	if c.dyn, err = dynamic.NewForConfig(c.rest); err != nil {
		t.Fatal(err)
	}

	// Controllers: everything a cluster needs for Deployments, StatefulSets, volumes,
	// namespaces and garbage collection; nothing that needs a cloud, node IPAM (the real
	// node's range is the bridge's) or certificate signing. The fake nodes heartbeat
	// rarely (kwok renews their leases), so the node lifecycle controller gets a long
	// grace period.
	kcm := testenv.StartProcess(t, "kube-controller-manager", bins.kubeControllerManager, filepath.Join(dir, "kube-controller-manager.log"),
		"--kubeconfig="+c.kubeconfig,
		"--bind-address="+testenv.Loopback,
		"--secure-port=0",
		"--leader-elect=false",
		"--controllers=*,-node-ipam-controller,-node-route-controller,-cloud-node-lifecycle-controller,-service-lb-controller,"+
			"-certificatesigningrequest-signing-controller,-certificatesigningrequest-approving-controller,-persistentvolume-attach-detach-controller",
		"--service-account-private-key-file="+pki.SAPrivate,
		"--root-ca-file="+pki.CAFile,
		"--use-service-account-credentials=false",
		"--node-monitor-grace-period=1h",
		"--concurrent-statefulset-syncs=5",
		"--v=1",
	)
	scheduler := testenv.StartProcess(t, "kube-scheduler", bins.kubeScheduler, filepath.Join(dir, "kube-scheduler.log"),
		"--kubeconfig="+c.kubeconfig,
		"--bind-address="+testenv.Loopback,
		"--secure-port=0",
		"--leader-elect=false",
		"--v=1",
	)
	stages, err := kwokStages(ctx)
	if err != nil {
		t.Fatalf("kwok stages: %v", err)
	}
	stagesFile := filepath.Join(dir, "kwok-stages.yaml")
	if err := os.WriteFile(stagesFile, stages, 0o600); err != nil {
		t.Fatal(err)
	}
	kwok := testenv.StartProcess(t, "kwok", bins.kwok, filepath.Join(dir, "kwok.log"),
		"--kubeconfig="+c.kubeconfig,
		"--config="+stagesFile,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-lease-duration-seconds=40",
		"--node-ip="+testenv.Loopback,
		"--cidr="+kwokCIDR.String(),
	)
	c.procs = append(c.procs, kcm, scheduler, kwok)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv(envVerbose) == "1" {
			for _, p := range []*testenv.Process{kcm, scheduler, kwok} {
				t.Logf("%s log (last lines):\n%s", p.Name, p.Tail(15))
			}
		}
	})
	c.node = startRealNode(t, ctx, c, bins, server, network, images)
	t.Logf("control plane and real node up in %s (API server %s)", time.Since(start).Round(time.Millisecond), c.host)
	return c
}

// running reports an error if a control-plane process has exited.
func (c *cluster) running() error {
	for _, p := range c.procs {
		if p.Exited() {
			return fmt.Errorf("%s exited: %v\n%s", p.Name, p.Err(), p.Tail(30))
		}
	}
	return nil
}

// kwokModule at kwokVersion holds kwok's stock stages.
const (
	kwokModule  = "sigs.k8s.io/kwok"
	kwokVersion = "v0.8.0"
)

// kwokStages returns kwok's stock stages for fast nodes with leases and fast pods, read
// from the sigs.k8s.io/kwok module in the module cache (downloaded first if needed).
func kwokStages(ctx context.Context) ([]byte, error) {
	module := kwokModule + "@" + kwokVersion
	dl := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	dl.Env = append(os.Environ(), "GOFLAGS=")
	dl.Dir = os.TempDir() // outside any module: nothing is written to a go.mod or go.sum
	out, err := dl.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download %s: %v\n%s", module, err, out)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return nil, fmt.Errorf("go mod download %s: no module directory (%v %s):\n%s", module, err, info.Error, out)
	}
	dir := info.Dir
	var stages bytes.Buffer
	for _, set := range []string{"node/fast", "node/heartbeat-with-lease", "pod/fast"} {
		files, err := filepath.Glob(filepath.Join(dir, "kustomize", "stage", set, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			stages.WriteString("---\n")
			stages.Write(data)
			stages.WriteString("\n")
		}
	}
	if stages.Len() == 0 {
		return nil, fmt.Errorf("no kwok stages under %s", dir)
	}
	return stages.Bytes(), nil
}
