//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/internal/providerprobe"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Stage 3, verify: cmd/verify's checks against running kcp, CoreDNS reading the
// program's Corefile, the hub's credential used as the hub uses it, and the gke plan's
// kcp command lines run through the real kcp binaries, what GKE's upgrades, drains and a
// lost zone do to the gke plan's kcp servers, and the etcd defragmentation. Its lanes
// only read the stack (each makes and removes its own workspaces, users, pods, nodes and
// Jobs), so they run side by side: the provider's path, people signing in, the admin's
// and the hub's tools, the gke plan's disruptions, and the defragmentation.
// With RAILGRID_E2E_HOLD=1 the lifecycle holds the converged stack after this stage
// (hold).
var verifyLanes = [][]step{{
	{"cmd-verify", cmdVerify, false},
	{"verify-certificates-fails-within-its-threshold", verifyCertificatesFailsWithinItsThreshold, false},
	{"verify-certificates-fails-on-one-about-to-expire", verifyCertificatesFailsOnOneAboutToExpire, false},
	{"provider-path-negatives", providerPathNegatives, false},
	{"shards-reach-their-own-public-urls", shardsReachTheirOwnPublicURLs, false},
}, {
	{"kcp-serves-while-the-issuer-is-down", kcpServesWhileTheIssuerIsDown, false},
	{"dex-runs-as-the-hub-runs-it", dexRunsAsTheHubRunsIt, true},
	{"users-sign-in-with-kubelogin", usersSignInWithKubelogin, false},
	{"verify-oidc-user", verifyOIDCUser, false},
}, {
	{"admin-from-a-laptop-in-one-command", adminFromALaptopInOneCommand, false},
	{"coredns-reads-our-corefile", corednsReadsOurCorefile, false},
	{"hub-credential-works", hubCredentialWorks, false},
	{"kcp-accepts-the-gke-plans-command-lines", kcpAcceptsTheGKEPlansCommandLines, false},
}, {
	{"gke-plan-kcp-servers-spread-over-zones", gkePlanKcpServersSpreadOverZones, false},
	{"kcp-budgets-refuse-a-second-eviction", kcpBudgetsRefuseASecondEviction, false},
	{"gke-plan-kcp-servers-never-pack-into-the-zones-left", gkePlanKcpServersNeverPackIntoTheZonesLeft, false},
}, {
	{"etcd-shrinks-when-its-scheduled-defragmentation-runs", etcdShrinksWhenItsScheduledDefragmentationRuns, false},
}}

// afterVerifyLanes renew certificates, which rolls kcp's servers: they run once the
// lanes, which read the stack as the first up left it, are done.
var afterVerifyLanes = []step{
	{"certificates-renew-without-an-up", certificatesRenewWithoutAnUp, false},
	{"everyone-works-after-the-renewals", everyoneWorksAfterTheRenewals, false},
	{"preview-is-clean-after-the-renewals", previewIsCleanAfterTheRenewals, false},
}

// verifyFindings is what a lane's step finds for the later steps of its lane.
type verifyFindings struct {
	// verifyStarted is when the first cmd/verify run began; sliceURL is the endpoint-slice
	// URL on alpha its provider-path followed.
	verifyStarted time.Time
	sliceURL      string
	// dexUp is when the hub's Dex was Ready; aliceToken an ID token of alice's from it,
	// for cmd/verify's oidc-user.
	dexUp      time.Time
	aliceToken string
	// removeGKEPlan removes the gke plan's kcp objects, which the stage applies when it
	// begins, so that the operator renders their Deployments while the lanes run, and the
	// kcp pool they run on.
	removeGKEPlan func()
	// gkePlanTemplates are the pod templates of the gke plan's kcp servers, by Deployment.
	gkePlanTemplates map[string]corev1.PodSpec
}

// beginVerify applies the gke plan's kcp objects in a namespace of their own, for
// kcp-accepts-the-gke-plans-command-lines and the disruption steps, with the kcp pool
// their pods select, and removes them when the stage ends.
func beginVerify(t *testing.T, l *lifecycle) {
	applied, remove := applyGKEPlanKcpObjects(t, l.ctx, l.c, l.src.root)
	var once sync.Once
	l.verify = &verifyFindings{removeGKEPlan: func() { once.Do(remove) }}
	t.Cleanup(l.verify.removeGKEPlan)
	templates, err := gkePlanTemplates(applied)
	if err != nil {
		t.Fatal(err)
	}
	l.verify.gkePlanTemplates = templates
	removePool, err := createKcpPool(l.ctx, l.c, templates[naming.RootShardDeployment(naming.RootShardName)].NodeSelector)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(removePool)
}

// cmdVerify: cmd/verify passes every check but ingress, which it reports as skipped:
// provider-path and hub-credential from a pod on the real node among them, with the
// endpoint-slice URL the probe followed and the identity kcp gave it in the log.
func cmdVerify(t *testing.T, l *lifecycle) {
	bin, err := l.verifyBin()
	if err != nil {
		t.Fatal(err)
	}
	// As an operator would: verify once the operator's rollouts after the up are done.
	if err := testenv.WaitFor(l.ctx, 3*time.Minute, nil, func() (bool, error) { return kcpRollout(l.ctx, l.env) == "", nil }); err != nil {
		t.Logf("kcp-system still rolling out after 3m: %s", kcpRollout(l.ctx, l.env))
	}
	l.verify.verifyStarted = time.Now()
	report := runVerify(t, l.ctx, l.env, bin, nil)
	l.verify.sliceURL = sliceURLFromReport(report)
	t.Logf("the provider followed the endpoint-slice URL %s", l.verify.sliceURL)
}

// verifyCertificatesFailsWithinItsThreshold: cmd/verify's certificates check, which
// passed in cmd-verify, fails on the stack's real certificates once its threshold is
// longer than their life (a year for the servers'), naming each Secret.
func verifyCertificatesFailsWithinItsThreshold(t *testing.T, l *lifecycle) {
	bin, err := l.verifyBin()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(l.ctx, bin, "-config", l.stack.cfgFile, "-kubeconfig", l.c.kubeconfig, "-json",
		"-checks", verify.CheckCertificates, "-cert-min-validity", "9000h")
	out, runErr := cmd.Output()
	var report verify.Report
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("cmd/verify (%v) printed no JSON report: %v\n%s", runErr, err, out)
	}
	failed := map[string]string{}
	for _, r := range report.Results {
		if r.Status == verify.StatusFail {
			failed[r.Item] = r.Message
		}
	}
	for _, item := range []string{"Secret kcp-system/" + naming.ShardServerCertificate(naming.RootShardName) + " tls.crt",
		"Secret kcp-system/" + naming.FrontProxyServerCertificate(naming.RootShardName, naming.FrontProxyName) + " tls.crt"} {
		msg, ok := failed[item]
		if !ok || !strings.Contains(msg, "within the 9000h0m0s threshold") {
			t.Errorf("%s did not fail within the threshold: %q", item, msg)
		} else {
			t.Logf("%s: %s", item, msg)
		}
	}
	if runErr == nil || report.Passed {
		t.Errorf("cmd/verify passed with every certificate inside its threshold (%v)", runErr)
	}
	t.Logf("certificates with -cert-min-validity 9000h: %d of %d items failed", len(failed), len(report.Results))
}

// adminFromALaptopInOneCommand: cmd/kcpadmin, run as an admin runs it with the
// cluster's kubeconfig, reads the operator's Kubeconfig Secret, forwards the front
// proxy's Service, and writes a kubeconfig (mode 0600, outside the repository); plain
// kubectl then lists the root workspace's workspaces through it as kcp-admin. Ctrl-C
// ends the command with the file kept.
func adminFromALaptopInOneCommand(t *testing.T, l *lifecycle) {
	bin, err := l.kcpadminBin()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "kind-kcp-admin.kubeconfig")
	cmd := exec.CommandContext(l.ctx, bin, "-config", l.stack.cfgFile, "-kubeconfig", l.c.kubeconfig, "-o", out)
	cmd.Dir = dir
	var stdout, stderr testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()
	if err := testenv.WaitFor(l.ctx, 2*time.Minute, nil, func() (bool, error) {
		select {
		case err := <-exited:
			return false, fmt.Errorf("kcpadmin ended (%v) before it wrote %s:\n%s%s", err, out, stdout.String(), stderr.String())
		default:
		}
		return strings.Contains(stdout.String(), "wrote "+out), nil
	}); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(out)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the admin kubeconfig %s: %v, mode %v; want 0600", out, err, info.Mode())
	}
	if data, _ := os.ReadFile(out); strings.Contains(string(data), "insecure-skip-tls-verify") {
		t.Errorf("the admin kubeconfig skips TLS verification")
	}
	whoami, err := kubectl(l.ctx, l.bins.kubectl, out, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}")
	if err != nil || !strings.HasPrefix(whoami, naming.KubeconfigUsername+" ") || !strings.Contains(whoami, naming.KubeconfigAdminGroup) {
		t.Errorf("kubectl auth whoami through kcpadmin's forward: %q %v; want %s in %s", whoami, err, naming.KubeconfigUsername, naming.KubeconfigAdminGroup)
	}
	workspaces, err := kubectl(l.ctx, l.bins.kubectl, out, "get", "workspaces")
	if err != nil {
		t.Errorf("kubectl get workspaces through kcpadmin's forward: %v", err)
	}
	t.Logf("plain kubectl through kcpadmin's forward: whoami %q; get workspaces:\n%s", whoami, workspaces)
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("kcpadmin ended with %v after Ctrl-C:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("kcpadmin did not end within 30s of Ctrl-C")
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("the admin kubeconfig is gone after Ctrl-C: %v", err)
	}
	t.Logf("kcpadmin's output:\n%s", stdout.String())
}

// providerPathNegatives: at alpha's slice URL, a pod that resolves the shard's name to
// the edge gets no working request, a client certificate from another CA is refused
// (401), and a pod that trusts only the system roots fails verification. Each runs the
// provider probe, as cmd/verify's check does, in the hub's namespace, in parallel.
func providerPathNegatives(t *testing.T, l *lifecycle) {
	if l.verify.sliceURL == "" {
		t.Fatal("cmd/verify's provider-path reported no slice URL on alpha")
	}
	ctx, hub := l.ctx, l.plan.cfg.Hub
	edge, err := edgeAddress(ctx, l.env)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := verify.HubKubeconfigCA(ctx, l.c.kube, l.plan.cfg)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := withClientCertFromAnotherCA(hubSecretKubeconfig(ctx, l.env))
	if err != nil {
		t.Fatal(err)
	}
	const caMap, foreign = "e2e-probe-ca", "e2e-foreign-credential"
	if _, err := l.c.kube.CoreV1().ConfigMaps(hub.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: caMap},
		Data: map[string]string{negativeCAKey: string(ca)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.kube.CoreV1().Secrets(hub.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: foreign},
		Data: map[string][]byte{hub.SecretKey: forged}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = l.c.kube.CoreV1().ConfigMaps(hub.Namespace).Delete(context.WithoutCancel(ctx), caMap, metav1.DeleteOptions{})
		_ = l.c.kube.CoreV1().Secrets(hub.Namespace).Delete(context.WithoutCancel(ctx), foreign, metav1.DeleteOptions{})
	}()
	alpha := ""
	for _, s := range l.plan.cfg.Kcp.AllShards() {
		if s.Name == "alpha" {
			alpha = s.Hostname
		}
	}
	negatives := []probeNegative{{
		name: "edge", what: "alpha's name resolved to the edge (Envoy's Service, " + edge + ") by the pod's /etc/hosts",
		// No Envoy proxy runs here (its pods are kwok's), so the edge's address answers
		// nothing; with a TLS-terminating edge the design says the client certificate is
		// stripped (401), which no test here can show.
		want:        []string{"i/o timeout", "connection refused", "no route to host", "context deadline exceeded", "Client.Timeout exceeded", "x509", "401", "Unauthorized"},
		hostAliases: []corev1.HostAlias{{IP: edge, Hostnames: []string{alpha}}},
	}, {
		name: "foreign-ca", what: "a client certificate of kcp-admin from another CA",
		want: []string{"401", "Unauthorized"}, secret: foreign,
	}, {
		name: "system-roots", what: "a pod that trusts only the system roots",
		want: []string{"x509", "certificate signed by unknown authority"}, trustSystem: true,
	}}
	type outcome struct {
		line providerprobe.Line
		logs string
		err  error
	}
	results := make([]outcome, len(negatives))
	done := make(chan int, len(negatives))
	for i, n := range negatives {
		go func() {
			line, logs, err := runProbeNegative(ctx, l.env, n, l.verify.sliceURL, caMap)
			results[i] = outcome{line, logs, err}
			done <- i
		}()
	}
	for range negatives {
		<-done
	}
	for i, n := range negatives {
		r := results[i]
		switch {
		case r.err != nil:
			t.Errorf("%s: %v\n%s", n.what, r.err, r.logs)
		case r.line.Result == providerprobe.Pass:
			t.Errorf("%s: the request at %s WORKED (%s); it must not", n.what, r.line.URL, r.line.Message)
		case !containsAny(r.line.Error, n.want):
			t.Errorf("%s: refused, but not as expected (want one of %q): %s", n.what, n.want, r.line.Error)
		default:
			t.Logf("%s: no working request at %s: %s", n.what, r.line.URL, r.line.Error)
		}
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// shardsReachTheirOwnPublicURLs: with CacheAPIs serving (the provider path's cached
// resource went through alpha's own public URL), no kcp server logged a failed dial or
// certificate error for a public shard name since verify began.
func shardsReachTheirOwnPublicURLs(t *testing.T, l *lifecycle) {
	if l.verify.verifyStarted.IsZero() {
		t.Fatal("cmd/verify did not run")
	}
	var hosts []string
	for _, s := range l.plan.cfg.Kcp.AllShards() {
		hosts = append(hosts, s.Hostname)
	}
	pods, err := l.c.kube.CoreV1().Pods(naming.NamespaceKcp).List(l.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range pods.Items {
		if !runsBinary(&p, p.Spec.Containers[0].Name, "/kcp") {
			continue
		}
		lines, err := ownURLFailures(l.ctx, l.c, p.Namespace, p.Name, l.verify.verifyStarted, hosts)
		if err != nil {
			t.Errorf("%s: %v", p.Name, err)
			continue
		}
		checked++
		if len(lines) > 0 {
			t.Errorf("kcp server %s logged failures for a public shard name %v since verify began:%s", p.Name, hosts, indent(lines))
		}
	}
	if checked == 0 {
		t.Fatal("no kcp server pod in " + naming.NamespaceKcp)
	}
	t.Logf("%d kcp servers logged no failed dial or certificate error for %v since %s", checked, hosts, l.verify.verifyStarted.Format(time.TimeOnly))
}

// corednsReadsOurCorefile: CoreDNS's pod template makes it read the program's Corefile.
func corednsReadsOurCorefile(t *testing.T, l *lifecycle) {
	checkCoreDNSReadsOurCorefile(t, l.ctx, l.env, l.plan, true)
}

// hubCredentialWorks: the hub's credential works as the hub uses it, through the front
// proxy, as kcp-admin; one from another CA is refused.
func hubCredentialWorks(t *testing.T, l *lifecycle) {
	checkHubCredentialWorks(t, l.ctx, l.env, "first up")
}

// kcpAcceptsTheGKEPlansCommandLines: the gke plan's kcp objects, applied beside the kind
// stack's after the first up, give command lines that the real kcp binaries accept too.
func kcpAcceptsTheGKEPlansCommandLines(t *testing.T, l *lifecycle) {
	if l.verify.removeGKEPlan == nil {
		t.Skip("the first up did not apply the gke plan's kcp objects")
	}
	checkGKEPlanKcpArgs(t, l.ctx, l.c, l.bins)
}

// envHold=1 holds the converged stack for hands-on use (docs/testing.md, "Hands on a
// running stack"); envHoldFile names the file the hold writes (default: holdFileName in
// the temporary directory).
const (
	envHold      = "RAILGRID_E2E_HOLD"
	envHoldFile  = "RAILGRID_E2E_HOLD_FILE"
	holdFileName = "railgrid-e2e-hold.sh"
)

// hold, with RAILGRID_E2E_HOLD=1, stops the lifecycle once (after verify, or where a
// required step failed) and writes a file that says how to reach the cluster and kcp:
// the cluster's kubeconfig, the hub's kcp kubeconfig rewritten to work from the host
// (the front-proxy Service's ClusterIP, which the machine routes to the node, with the
// Service's name as the TLS server name), and a command prefix that runs a program on
// the pod network with the cluster's DNS, where the hub's kubeconfig works as written.
// It waits until the file is removed, then the lifecycle goes on; SIGINT or SIGTERM end
// the test instead, and the test's -timeout ends the hold with every clean-up run.
func (l *lifecycle) hold(t *testing.T, why string) {
	if os.Getenv(envHold) != "1" || l.held {
		return
	}
	if m := testenv.Machine(); m != "" {
		// Its servers listen in a network namespace no shell on this machine is in.
		t.Logf("%s=1 holds the lifecycle's machine; machine %s goes on (%s)", envHold, m, why)
		return
	}
	l.held = true
	file := os.Getenv(envHoldFile)
	if file == "" {
		file = filepath.Join(os.TempDir(), holdFileName)
	}
	dir := filepath.Join(l.c.dir, "hold")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	content, err := l.holdFile(dir, why, t.Failed())
	if err != nil {
		t.Errorf("%s=1: writing the hold file: %v", envHold, err)
		return
	}
	if err := l.c.network.Check(l.c.apiPort, l.c.node.KubeletPort); err != nil {
		t.Fatalf("the node network's rules do not hold; not holding: %v", err)
	}
	msg := fmt.Sprintf("%s=1: holding the stack (%s). Read %s; remove it to go on, or send SIGINT or SIGTERM to end the test.", envHold, why, file)
	t.Log(msg)
	fmt.Fprintln(os.Stderr, msg)
	start := time.Now()
	err = testenv.Hold(l.ctx, file, content)
	switch {
	case err == nil:
		t.Logf("the hold file was removed after %s: the lifecycle goes on", time.Since(start).Round(time.Second))
		if err := l.c.network.Check(l.c.apiPort, l.c.node.KubeletPort); err != nil {
			t.Errorf("after the hold: %v", err)
		}
	case errors.Is(err, testenv.ErrDeadline):
		t.Fatalf("the hold lasted %s and reached the test's -timeout (less %s for the clean-up): ending the test; everything is cleaned up",
			time.Since(start).Round(time.Second), cleanupMargin)
	default:
		t.Fatalf("the hold ended after %s: %v; everything is cleaned up", time.Since(start).Round(time.Second), err)
	}
}

// holdFile writes the kubeconfigs into dir and returns the hold file's text, a shell
// script to source.
func (l *lifecycle) holdFile(dir, why string, failed bool) ([]byte, error) {
	hub, err := l.c.kube.CoreV1().Secrets(l.plan.cfg.Hub.Namespace).Get(l.ctx, l.plan.cfg.Hub.SecretName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the hub Secret: %w", err)
	}
	inCluster := hub.Data[l.plan.cfg.Hub.SecretKey]
	podsKubeconfig := filepath.Join(dir, "kcp-admin.pods.kubeconfig")
	if err := os.WriteFile(podsKubeconfig, inCluster, 0o600); err != nil {
		return nil, err
	}
	hostKubeconfig := filepath.Join(dir, "kcp-admin.host.kubeconfig")
	fromHost, err := l.kubeconfigFromHost(inCluster)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(hostKubeconfig, fromHost, 0o600); err != nil {
		return nil, err
	}
	state := "passed"
	if failed {
		state = "FAILED (see the test's log)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# railgrid-kcp end-to-end test, held at %s: %s; the steps so far %s.\n", time.Now().Format(time.RFC3339), why, state)
	fmt.Fprintf(&b, "# Source this file in a root shell. Remove it to let the test go on; SIGINT or SIGTERM to the test binary ends it.\n")
	fmt.Fprintf(&b, "# The cluster (kube-apiserver on the node's bridge):\nexport KUBECONFIG=%s\n", l.c.kubeconfig)
	fmt.Fprintf(&b, "# The hub's kcp credential (kcp-admin, system:kcp:admin), from this machine: the front proxy's Service by its ClusterIP:\nexport KCP_KUBECONFIG=%s\n", hostKubeconfig)
	fmt.Fprintf(&b, "# The same credential as the hub has it (the in-cluster Service name), for the pod network:\nexport KCP_POD_KUBECONFIG=%s\n", podsKubeconfig)
	fmt.Fprintf(&b, "# Run a program on the pod network, with the cluster's DNS (split horizon answers the shard names):\nexport POD_NET=%q\n", l.testHost.Prefix())
	fmt.Fprintf(&b, "# The stack's workspace, state and stack file (PULUMI_* as the test ran the CLI):\nexport RAILGRID_E2E_WORKSPACE=%s\n", l.stack.dir)
	fmt.Fprintf(&b, "# For example:\n#   kubectl get pods -A -o wide\n#   kubectl --kubeconfig \"$KCP_KUBECONFIG\" get shards\n")
	fmt.Fprintf(&b, "#   $POD_NET kubectl --kubeconfig \"$KCP_POD_KUBECONFIG\" get shards\n#   $POD_NET nslookup alpha.kcp.localhost\n")
	return []byte(b.String()), nil
}

// kubeconfigFromHost points a kubeconfig whose server is an in-cluster Service name at
// that Service's ClusterIP, keeping the name as the TLS server name: the machine routes
// the Service range to the node, where kube-proxy's rules take it to the pod.
func (l *lifecycle) kubeconfigFromHost(inCluster []byte) ([]byte, error) {
	return kubeconfigAtClusterIPs(inCluster, func(namespace, service string) (string, error) {
		s, err := l.c.kube.CoreV1().Services(namespace).Get(l.ctx, service, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return s.Spec.ClusterIP, nil
	})
}

// kubeconfigAtClusterIPs rewrites each cluster whose server is a Service's name to the
// Service's ClusterIP (clusterIP), the name kept as the TLS server name and the rest of
// the URL (/clusters/root) kept as it was.
func kubeconfigAtClusterIPs(kubeconfig []byte, clusterIP func(namespace, service string) (string, error)) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	for name, cluster := range cfg.Clusters {
		u, err := url.Parse(cluster.Server)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
		host, port, _ := net.SplitHostPort(u.Host)
		svc, ns, ok := serviceOfHost(host)
		if !ok {
			continue
		}
		ip, err := clusterIP(ns, svc)
		if err != nil {
			return nil, fmt.Errorf("Service %s/%s of %s: %w", ns, svc, cluster.Server, err)
		}
		if port == "" {
			port = strconv.Itoa(443)
		}
		cluster.TLSServerName = host
		u.Host = net.JoinHostPort(ip, port)
		cluster.Server = u.String()
	}
	return clientcmd.Write(*cfg)
}

// serviceOfHost splits <service>.<namespace>.svc.cluster.local.
func serviceOfHost(host string) (service, namespace string, ok bool) {
	rest, found := strings.CutSuffix(host, ".svc."+naming.ClusterDomain)
	if !found {
		return "", "", false
	}
	service, namespace, ok = strings.Cut(rest, ".")
	return service, namespace, ok && !strings.Contains(namespace, ".")
}

// runVerify runs cmd/verify against the cluster, as an operator would
// after `up`, with the ingress check skipped explicitly; every other check must pass
// against the running kcp (split-horizon asks the real CoreDNS from a probe pod on the
// real node; anonymous, hub-credential and shards reach kcp's owned Services through the
// API server's port-forward), and the skipped check must be reported as skipped.
func runVerify(t *testing.T, ctx context.Context, e *env, bin string, extra []string, checks ...string) verify.Report {
	t.Helper()
	args := append([]string{"-config", e.stack.cfgFile, "-kubeconfig", e.c.kubeconfig, "-json", "-timeout", "3m", "-interval", "1s",
		"-provider-image", testenv.ProviderProbeImageRef}, extra...)
	if len(checks) == 0 {
		// Every check but oidc-user, which the sign-in steps run with a fresh token of
		// alice's; ingress is reported skipped.
		checks = []string{verify.CheckRollout, verify.CheckSplitHorizon, verify.CheckHubKubeconfig, verify.CheckCertificates,
			verify.CheckAnonymous, verify.CheckHubCredential, verify.CheckShards, verify.CheckProviderPath}
		args = append(args, "-checks", strings.Join(append([]string{verify.CheckIngress}, checks...), ","),
			"-skip", verify.CheckIngress, "-skip-reason", verifySkipReason)
	} else {
		args = append(args, "-checks", strings.Join(checks, ","))
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var report verify.Report
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("cmd/verify (%v) printed no JSON report: %v\n%s%s", runErr, err, stdout.String(), stderr.String())
	}
	counts := map[string]map[verify.Status]int{}
	for _, r := range report.Results {
		if counts[r.Check] == nil {
			counts[r.Check] = map[verify.Status]int{}
		}
		counts[r.Check][r.Status]++
		switch {
		case r.Check == verify.CheckIngress:
			if r.Status != verify.StatusSkip || r.Message != "skipped: "+verifySkipReason {
				t.Errorf("cmd/verify %s: %s %s, want skipped with the reason", r.Check, r.Status, r.Message)
			}
		case r.Status != verify.StatusPass:
			t.Errorf("cmd/verify %s %s: %s: %s", r.Check, r.Item, r.Status, r.Message)
		}
	}
	for _, r := range report.Results {
		if r.Check == verify.CheckProviderPath || (r.Check == verify.CheckHubCredential && strings.Contains(r.Item, "pod")) {
			t.Logf("cmd/verify %s %s: %s: %s", r.Check, r.Item, r.Status, r.Message)
		}
	}
	for _, check := range checks {
		if counts[check][verify.StatusPass] == 0 {
			t.Errorf("cmd/verify reported no passing %s item", check)
		}
	}
	if runErr != nil || !report.Passed {
		t.Errorf("cmd/verify exited with %v (passed %v)\n%s", runErr, report.Passed, stderr.String())
	}
	t.Logf("cmd/verify: %+v; per check: %v", report.Summary, counts)
	return report
}

// verifySkipReason is why the e2e skips cmd/verify's ingress check: it asks the edge's
// load balancer, and Envoy's proxy pods are simulated (no Envoy binary can be built here).
const verifySkipReason = "no Envoy proxy runs in the test cluster: its pods are simulated by kwok"

// The hold's host kubeconfig reaches the front proxy's Service at its ClusterIP, with
// the Service's name as the TLS server name and the server's path kept: without
// /clusters/root, kubectl from the host got 404 for every request.
func TestTheHoldKubeconfigFromTheHostKeepsTheServersPath(t *testing.T) {
	front := "frontproxy-front-proxy." + naming.NamespaceKcp + ".svc." + naming.ClusterDomain
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kcp"] = &clientcmdapi.Cluster{Server: "https://" + front + ":6443/clusters/root"}
	kc.Clusters["elsewhere"] = &clientcmdapi.Cluster{Server: "https://kcp.example.com/clusters/root"}
	in, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	out, err := kubeconfigAtClusterIPs(in, func(namespace, service string) (string, error) {
		asked = append(asked, namespace+"/"+service)
		return "10.96.0.100", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := clientcmd.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Clusters["kcp"]; c.Server != "https://10.96.0.100:6443/clusters/root" || c.TLSServerName != front {
		t.Errorf("the front proxy's cluster: server %q, TLS server name %q; want https://10.96.0.100:6443/clusters/root and %s", c.Server, c.TLSServerName, front)
	}
	if c := got.Clusters["elsewhere"]; c.Server != "https://kcp.example.com/clusters/root" || c.TLSServerName != "" {
		t.Errorf("a cluster that is no Service was rewritten: %q, %q", c.Server, c.TLSServerName)
	}
	if want := []string{naming.NamespaceKcp + "/frontproxy-front-proxy"}; !slices.Equal(asked, want) {
		t.Errorf("asked for the ClusterIPs of %v, want %v", asked, want)
	}
}
