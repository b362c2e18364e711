package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/railgrid/railgrid-kcp/naming"
	"github.com/railgrid/railgrid-kcp/tests/internal/testenv"
)

// kubeContext is the kubeconfig context the stack's kind.context points at.
const kubeContext = "railgrid-e2e"

// cluster is a Kubernetes control plane without containers: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok (which plays the kubelet of three fake
// nodes), all on loopback and stopped when the (sub)test ends.
type cluster struct {
	dir        string
	host       string
	token      string
	caPEM      []byte
	kubeconfig string // admin kubeconfig with context kubeContext
	rest       *rest.Config
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	apiserver  *testenv.Process
	procs      []*testenv.Process
}

// startCluster starts the control plane in dir with the given Service range and waits
// until the API server is ready and kwok runs pods on the fake nodes.
func startCluster(t *testing.T, ctx context.Context, bins binaries, dir, serviceCIDR string) *cluster {
	t.Helper()
	start := time.Now()
	server := testenv.StartAPIServer(t, ctx, testenv.APIServerOptions{
		KubeAPIServer: bins.kubeAPIServer, Etcd: bins.etcd, Dir: dir, ServiceCIDR: serviceCIDR, Name: "e2e",
	})
	pki := server.PKI
	c := &cluster{dir: dir, host: server.Host, token: server.Token, caPEM: pki.CAPEM, apiserver: server.Process,
		procs: []*testenv.Process{server.Etcd, server.Process}}

	c.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := server.WriteKubeconfig(c.kubeconfig, kubeContext); err != nil {
		t.Fatal(err)
	}
	c.rest = server.RESTConfig()
	c.rest.QPS, c.rest.Burst, c.rest.UserAgent = 100, 200, "railgrid-kcp-e2e"
	var err error
	if c.kube, err = kubernetes.NewForConfig(c.rest); err != nil {
		t.Fatal(err)
	}
	if c.dyn, err = dynamic.NewForConfig(c.rest); err != nil {
		t.Fatal(err)
	}

	// Controllers: everything a cluster needs for Deployments, StatefulSets, volumes,
	// namespaces and garbage collection; nothing that needs a cloud, a pod network or
	// certificate signing. The fake nodes heartbeat rarely (kwok renews their leases),
	// so the node lifecycle controller gets a long grace period.
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
		"--cidr=10.244.0.0/16",
	)
	c.procs = append(c.procs, kcm, scheduler, kwok)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv(envVerbose) == "1" {
			for _, p := range []*testenv.Process{kcm, scheduler, kwok} {
				t.Logf("%s log (last lines):\n%s", p.Name, p.Tail(15))
			}
		}
	})
	t.Logf("control plane up in %s (API server %s)", time.Since(start).Round(time.Millisecond), c.host)
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

// kwokStages returns kwok's stock stages for fast nodes with leases and fast pods, read
// from the sigs.k8s.io/kwok module in the module cache (downloaded first if needed).
func kwokStages(ctx context.Context) ([]byte, error) {
	const module = "sigs.k8s.io/kwok@v0.8.0"
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
			if set == "pod/fast" && filepath.Base(f) == "pod-ready.yaml" {
				if data, err = delayedPodReady(data); err != nil {
					return nil, fmt.Errorf("%s: %w", f, err)
				}
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

// kcpPodReadyDelay is how long kwok takes to make a pod in kcp-system or kcp-operator
// Ready: a real kcp server takes seconds to start, and the upgrade order (root shard
// before shards and front proxy), the interrupted up and the kill while Helm installs
// the operator (Helm waits for its Deployment) are only tested if that window exists.
const kcpPodReadyDelay = 3 * time.Second

// delayedPodReady splits kwok's pod-ready stage in two: pods in kcp-system and
// kcp-operator become Ready after kcpPodReadyDelay, every other pod at once, as before.
func delayedPodReady(stage []byte) ([]byte, error) {
	const anchor = "    matchExpressions:\n"
	text := string(stage)
	if !strings.Contains(text, anchor) || !strings.Contains(text, "name: pod-ready\n") || !strings.Contains(text, "spec:\n") {
		return nil, fmt.Errorf("kwok's pod-ready stage no longer has the shape this test edits")
	}
	ns := func(op string) string {
		return anchor + "    - key: '.metadata.namespace'\n      operator: '" + op + "'\n      values:\n      - '" + naming.NamespaceKcp + "'\n      - '" + naming.NamespaceOperator + "'\n"
	}
	others := strings.Replace(text, anchor, ns("NotIn"), 1)
	kcp := strings.Replace(text, anchor, ns("In"), 1)
	kcp = strings.Replace(kcp, "name: pod-ready\n", "name: pod-ready-kcp\n", 1)
	kcp = strings.Replace(kcp, "spec:\n", fmt.Sprintf("spec:\n  delay:\n    durationMilliseconds: %d\n", kcpPodReadyDelay.Milliseconds()), 1)
	return []byte(others + "\n---\n" + kcp), nil
}
