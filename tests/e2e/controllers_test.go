package e2e

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/components"
	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/naming"
	"github.com/railgrid/railgrid-kcp/tests/internal/testenv"
)

// The operator.kcp.io resources the test reads.
var (
	rootShardGVR   = kcpGVR("rootshards")
	shardGVR       = kcpGVR("shards")
	frontProxyGVR  = kcpGVR("frontproxies")
	kubeconfigGVR  = kcpGVR("kubeconfigs")
	certificateGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	crbGVR         = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
)

func kcpGVR(resource string) schema.GroupVersionResource {
	gv := schema.FromAPIVersionAndKind(kcpapi.APIVersion, "").GroupVersion()
	return gv.WithResource(resource)
}

// shardFinalizer is the finalizer the kcp-operator puts on every Shard: on delete it
// removes the shard from the root shard's kcp API, which no simulated pod serves.
const shardFinalizer = "operator.kcp.io/cleanup-shard"

// controllers are the real kcp-operator and cert-manager controller, run as processes
// against the simulated cluster (kwok runs no containers, so the chart's operator
// Deployment and the kind cluster's cert-manager pods stay simulated and these
// binaries do their work).
//
// cert-manager runs with the cluster's admin credentials, as the kind cluster's
// cert-manager runs with its own chart's broad RBAC. The operator starts once the
// stack's Helm release has installed the chart (CRDs, ServiceAccount, RBAC) and runs
// as that ServiceAccount (its kubeconfig impersonates it), so a permission the chart
// does not grant fails here as it would in the cluster.
type controllers struct {
	c   *cluster
	dir string

	certManager *testenv.Process

	mu          sync.Mutex
	operator    *testenv.Process
	operatorSA  string
	operatorErr error
	restarts    []string
	lifted      []liftRecord
}

// liftRecord is one shard finalizer the test removed, and the operator's report that
// justified it.
type liftRecord struct {
	Shard  string
	Report string
	At     time.Time
}

// With externalApprover, cert-manager runs without its own CertificateRequest approver
// and the test's requestApprover approves in its place.
func startControllers(t *testing.T, ctx context.Context, c *cluster, bins binaries, dir string, externalApprover bool) *controllers {
	t.Helper()
	ctl := &controllers{c: c, dir: dir}
	// Its health endpoint has no flag; the config file keeps it on loopback.
	cmConfig := filepath.Join(dir, "cert-manager.yaml")
	if err := os.WriteFile(cmConfig, []byte("apiVersion: controller.config.cert-manager.io/v1alpha1\n"+
		"kind: ControllerConfiguration\nhealthzListenAddress: "+testenv.Loopback+":0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config=" + cmConfig,
		"--kubeconfig=" + c.kubeconfig,
		"--leader-elect=false",
		"--namespace=",
		"--cluster-resource-namespace=" + certManagerNamespace,
		"--metrics-listen-address=" + testenv.Loopback + ":0",
		"--enable-profiling=false",
		"--v=2",
	}
	if externalApprover {
		args = append(args, "--controllers=*,-certificaterequests-approver")
	}
	ctl.certManager = testenv.StartProcess(t, "cert-manager-controller", bins.certManager, filepath.Join(dir, "cert-manager.log"), args...)
	c.procs = append(c.procs, ctl.certManager)

	octx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Like the kubelet for the chart's Deployment (restartPolicy Always), start the
		// operator again if it exits; each run logs to its own file.
		for run := 1; octx.Err() == nil; run++ {
			p, sa, err := ctl.launchOperator(octx, bins.kcpOperator, run)
			ctl.mu.Lock()
			ctl.operator, ctl.operatorSA, ctl.operatorErr = p, sa, err
			ctl.mu.Unlock()
			if err != nil {
				return
			}
			select {
			case <-octx.Done():
				return
			case <-p.Done():
				ctl.mu.Lock()
				ctl.restarts = append(ctl.restarts, fmt.Sprintf("run %d exited (%v): %s", run, p.Err(), lastLine(p.Tail(1))))
				ctl.mu.Unlock()
			}
			select {
			case <-octx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		ctl.mu.Lock()
		p := ctl.operator
		ctl.mu.Unlock()
		if p != nil {
			p.Stop()
		}
		if t.Failed() || os.Getenv(envVerbose) == "1" {
			if p != nil {
				t.Logf("kcp-operator (as %s) log (last lines):\n%s", ctl.operatorSA, p.Tail(25))
			} else {
				t.Logf("kcp-operator never started: %v", ctl.operatorErr)
			}
			t.Logf("cert-manager-controller log (last lines):\n%s", ctl.certManager.Tail(15))
		}
		if len(ctl.restarts) > 0 {
			t.Logf("kcp-operator restarts:%s", indent(ctl.restarts))
		}
	})
	return ctl
}

// certManagerNamespace is where the kind stack's cert-manager runs.
const certManagerNamespace = "cert-manager"

// launchOperator waits until the chart has installed the operator's CRDs (both groups)
// and bound its ServiceAccount to a ClusterRole, then starts the operator as that
// ServiceAccount.
func (ctl *controllers) launchOperator(ctx context.Context, bin string, run int) (*testenv.Process, string, error) {
	c := ctl.c
	var sa string
	err := testenv.WaitFor(ctx, 30*time.Minute, nil, func() (bool, error) {
		crds, err := c.dyn.Resource(crdGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		established := 0
		for _, crd := range crds.Items {
			group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
			if group != "operator.kcp.io" && group != "deploy.operator.kcp.io" {
				continue
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, x := range conds {
				if m, _ := x.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					established++
				}
			}
		}
		// Both groups' CRDs (six and five), all served, before the operator starts
		// watching them.
		if established < 11 {
			return false, nil
		}
		bindings, err := c.dyn.Resource(crbGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, b := range bindings.Items {
			subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
			for _, s := range subjects {
				m, _ := s.(map[string]any)
				if m["kind"] == "ServiceAccount" && m["namespace"] == naming.NamespaceOperator {
					sa = fmt.Sprint(m["name"])
				}
			}
		}
		if sa == "" {
			return false, nil
		}
		_, err = c.kube.CoreV1().ServiceAccounts(naming.NamespaceOperator).Get(ctx, sa, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("waiting for the chart's CRDs and ServiceAccount: %w", err)
	}
	user := "system:serviceaccount:" + naming.NamespaceOperator + ":" + sa
	kubeconfig := filepath.Join(ctl.dir, "kcp-operator.kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: c.host, CertificateAuthorityData: c.caPEM}
	cfg.AuthInfos["operator"] = &clientcmdapi.AuthInfo{
		Token:       c.token,
		Impersonate: user,
		// The groups the API server gives every ServiceAccount token.
		ImpersonateGroups: []string{"system:serviceaccounts", "system:serviceaccounts:" + naming.NamespaceOperator, "system:authenticated"},
	}
	cfg.Contexts["operator"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "operator"}
	cfg.CurrentContext = "operator"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		return nil, "", err
	}
	logName := "kcp-operator.log"
	if run > 1 {
		logName = fmt.Sprintf("kcp-operator.%d.log", run)
	}
	p, err := testenv.LaunchProcess("kcp-operator", bin, filepath.Join(ctl.dir, logName), nil,
		"--kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--health-probe-bind-address="+testenv.Loopback+":0",
		"--metrics-bind-address=0",
		"--zap-devel=false",
		"--zap-encoder=json",
		"--zap-time-encoding=rfc3339nano",
	)
	return p, user, err
}

// operatorLog returns the operator's log, or "" if it has not started.
func (ctl *controllers) operatorLog() string {
	ctl.mu.Lock()
	p := ctl.operator
	ctl.mu.Unlock()
	if p == nil {
		return ""
	}
	data, _ := os.ReadFile(p.LogPath)
	return string(data)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// running reports an error if a controller has exited.
func (ctl *controllers) running() error {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	for _, p := range []*testenv.Process{ctl.certManager, ctl.operator} {
		if p != nil && p.Exited() {
			return fmt.Errorf("%s exited: %v\n%s", p.Name, p.Err(), p.Tail(30))
		}
	}
	return nil
}

// shardCleanupFailure returns the operator's log line reporting that it could not remove
// a kcp Shard from the root shard because it cannot reach the root shard's kcp API,
// logged at or after since. The operator's log line does not name the Shard object; the
// root shard it cannot reach is the same for every Shard.
func (ctl *controllers) shardCleanupFailure(since time.Time) string {
	rootHost := naming.OperatorServiceHost(naming.RootShardDeployment(naming.RootShardName))
	sc := bufio.NewScanner(strings.NewReader(ctl.operatorLog()))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		var entry struct {
			TS         string `json:"ts"`
			Controller string `json:"controller"`
			Error      string `json:"error"`
		}
		if json.Unmarshal([]byte(line), &entry) != nil || entry.Controller != "shard" ||
			!strings.Contains(entry.Error, "failed to delete kcp Shard") || !strings.Contains(entry.Error, rootHost) {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, entry.TS)
		if err == nil && !ts.Before(since.Add(-time.Second)) {
			return line
		}
	}
	return ""
}

// liftShardFinalizers runs while `pulumi destroy` runs: for each Shard being deleted
// whose only finalizer is the operator's cleanup-shard, and only once the operator has
// logged that it cannot remove that shard from the root shard (no kcp runs behind the
// simulated root-kcp pods), it removes that one finalizer, with a JSON patch that fails
// if the finalizers changed meanwhile. Any other finalizer, and any other stuck
// deletion, is left alone, so destroy fails on it.
func (ctl *controllers) liftShardFinalizers(ctx context.Context) func() []liftRecord {
	stop := poll(ctx, 250*time.Millisecond, func(ctx context.Context) {
		list, err := ctl.c.dyn.Resource(shardGVR).Namespace("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, sh := range list.Items {
			if sh.GetDeletionTimestamp() == nil || !slices.Equal(sh.GetFinalizers(), []string{shardFinalizer}) {
				continue
			}
			report := ctl.shardCleanupFailure(sh.GetDeletionTimestamp().Time)
			if report == "" {
				continue
			}
			patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers","value":[%q]},{"op":"remove","path":"/metadata/finalizers"}]`, shardFinalizer)
			_, err := ctl.c.dyn.Resource(shardGVR).Namespace(sh.GetNamespace()).Patch(ctx, sh.GetName(), types.JSONPatchType, []byte(patch), metav1.PatchOptions{FieldManager: fieldManager})
			if err == nil {
				ctl.mu.Lock()
				ctl.lifted = append(ctl.lifted, liftRecord{Shard: sh.GetNamespace() + "/" + sh.GetName(), Report: report, At: time.Now()})
				ctl.mu.Unlock()
			}
		}
	})
	return func() []liftRecord {
		stop()
		ctl.mu.Lock()
		defer ctl.mu.Unlock()
		return append([]liftRecord(nil), ctl.lifted...)
	}
}

// credential is a hub credential as the operator wrote it into its Kubeconfig's Secret.
type credential struct {
	Secret     string // <ns>/<name> of the operator's Secret
	Kubeconfig []byte
	Cert       *x509.Certificate
	// Marker is the certificate's serial number (as bytes): unique per issuance, so
	// the leak search can look for it in the state.
	Marker string
}

// readCredential reads the kubeconfig the operator wrote for the Kubeconfig object name.
func readCredential(ctx context.Context, c *cluster, name string) (credential, error) {
	secret, err := c.kube.CoreV1().Secrets(naming.NamespaceKcp).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return credential{}, err
	}
	return parseCredential(naming.NamespaceKcp+"/"+name, secret)
}

func parseCredential(id string, secret *corev1.Secret) (credential, error) {
	data := secret.Data[components.KubeconfigSecretKey]
	if len(data) == 0 {
		return credential{}, fmt.Errorf("%s has no key %s", id, components.KubeconfigSecretKey)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return credential{}, fmt.Errorf("%s: %w", id, err)
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil || cfg.AuthInfos[kctx.AuthInfo] == nil {
		return credential{}, fmt.Errorf("%s: no current context with a user", id)
	}
	block, _ := pem.Decode(cfg.AuthInfos[kctx.AuthInfo].ClientCertificateData)
	if block == nil {
		return credential{}, fmt.Errorf("%s: the client certificate is not PEM", id)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return credential{}, fmt.Errorf("%s: %w", id, err)
	}
	return credential{Secret: id, Kubeconfig: data, Cert: cert, Marker: string(cert.SerialNumber.Bytes())}, nil
}

// certificateSecrets lists the cert-manager Certificates of kcp-system that issue the hub
// credential (kubeconfig-cert-<Kubeconfig>) with their Secrets, if still there.
func certificateSecrets(ctx context.Context, c *cluster) ([]string, error) {
	list, err := c.dyn.Resource(certificateGVR).Namespace(naming.NamespaceKcp).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, crt := range list.Items {
		if !strings.HasPrefix(crt.GetName(), "kubeconfig-cert-") {
			continue
		}
		secretName, _, _ := unstructured.NestedString(crt.Object, "spec", "secretName")
		state := "Secret " + secretName
		if _, err := c.kube.CoreV1().Secrets(naming.NamespaceKcp).Get(ctx, secretName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			state += " (gone)"
		}
		out = append(out, "Certificate "+crt.GetName()+", "+state)
	}
	slices.Sort(out)
	return out, nil
}

// isAvailable reports whether a kcp object's Available condition is True (for its
// current generation, when the condition says which generation it observed).
func isAvailable(obj *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" && m["status"] == "True" {
			gen, _ := m["observedGeneration"].(int64)
			return gen == 0 || gen == obj.GetGeneration()
		}
	}
	return false
}

// imageOf returns "<repository>:<tag>" of an image spec at path.
func imageOf(obj map[string]any, path ...string) string {
	repo, _, _ := unstructured.NestedString(obj, append(path, "repository")...)
	tag, _, _ := unstructured.NestedString(obj, append(path, "tag")...)
	if repo == "" {
		repo = "ghcr.io/kcp-dev/kcp"
	}
	if tag == "" {
		tag = "operator-default" // what a missing pin would run: visible in the checks
	}
	return repo + ":" + tag
}
