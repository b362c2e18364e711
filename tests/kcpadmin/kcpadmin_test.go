// Package kcpadmin_test runs kcpadmin.Run against a fake cluster: a fake clientset for
// the operator's Secret, the owned front-proxy Service and its pods; a fake API server
// that answers pods/portforward as the kubelet does, reached with client-go's own SPDY
// dialer and port-forward; and a TLS server that behaves as kcp-front-proxy does in the
// handshake and authenticates client certificates as kcp does. The certificates come
// from testenv's CA, built like the operator's PKI.
package kcpadmin_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/kcpadmin"
	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/naming"
)

// podA and podB are front-proxy pods; podA sorts first, so it is picked while Ready.
const (
	podA = "frontproxy-front-proxy-7d9f8-a"
	podB = "frontproxy-front-proxy-7d9f8-b"
)

type harness struct {
	certs   *kcpCerts
	cfg     *config.Config
	kube    *kubefake.Clientset
	kubelet *verifytest.Kubelet
	proxy   *fakeFrontProxy
	log     *testenv.SyncBuffer
}

// newHarness is a cluster whose front proxy (pod podA, Ready) advertises the client CAs
// advertised picks from the PKI, and whose operator Secret holds the admin kubeconfig.
func newHarness(t *testing.T, advertised func(*kcpCerts) []*pki.CA) *harness {
	t.Helper()
	h := &harness{certs: newKcpCerts(t), cfg: kindConfig(t), kubelet: verifytest.NewKubelet(t), log: &testenv.SyncBuffer{}}
	var cas []*pki.CA
	if advertised != nil {
		cas = advertised(h.certs)
	}
	h.proxy = newFakeFrontProxy(t, h.certs, cas...)
	h.kube = newCluster(frontProxyPod(podA, true), operatorSecret(h.cfg, operatorKubeconfig(t, h.certs)))
	h.kubelet.Route(naming.NamespaceKcp, podA, naming.KcpPort, h.proxy.Listener.Addr().String())
	return h
}

func (h *harness) options(t *testing.T) kcpadmin.Options {
	return kcpadmin.Options{
		Config: h.cfg, Stack: "kind", Kube: h.kube, Dial: kcpadmin.SPDYPodDialer(&rest.Config{Host: h.kubelet.URL}),
		Output: filepath.Join(t.TempDir(), "admin.kubeconfig"), WorkDir: t.TempDir(),
		Timeout: 20 * time.Second, PodCheck: 50 * time.Millisecond, Retry: 50 * time.Millisecond, Log: h.log,
	}
}

func (h *harness) run(t *testing.T, o kcpadmin.Options) *kcpadmin.Session {
	t.Helper()
	s, err := kcpadmin.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v\nlog:\n%s", err, h.log)
	}
	t.Cleanup(s.Close)
	return s
}

// whoAmI asks through the kubeconfig file, as kubectl reads and sends it.
func whoAmI(t *testing.T, path string) (string, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	user, err := kcpadmin.WhoAmI(ctx, data)
	return user.Username, err
}

// The kubeconfig points kubectl at the forward on 127.0.0.1, verifies the front proxy
// under the in-cluster name its certificate carries with the operator's CA, never skips
// verification, carries the operator's client certificate chain and key, is mode 0600,
// and authenticates as kcp-admin in system:kcp:admin.
func TestTheKubeconfigReachesTheFrontProxyThroughTheForwardAsKcpAdmin(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(p *kcpCerts) []*pki.CA { return []*pki.CA{p.clientCA, p.requestHeaderCA} })
	s := h.run(t, h.options(t))

	st, err := os.Stat(s.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %04o, want 0600", s.KubeconfigPath, st.Mode().Perm())
	}
	raw, err := os.ReadFile(s.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("insecure-skip-tls-verify")) {
		t.Errorf("the kubeconfig mentions insecure-skip-tls-verify:\n%s", raw)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	name := "railgrid-kcp-kind-kcp-admin"
	kctx := kc.Contexts[kc.CurrentContext]
	if kc.CurrentContext != name || kctx == nil || kctx.Cluster != name || kctx.AuthInfo != name || len(kc.Contexts) != 1 {
		t.Fatalf("contexts %v, current %q: want one context %q on cluster and user %q", kc.Contexts, kc.CurrentContext, name, name)
	}
	cluster, user := kc.Clusters[name], kc.AuthInfos[name]
	if !strings.HasPrefix(s.LocalAddress, kcpadmin.ListenHost+":") {
		t.Errorf("local address %q is not on %s", s.LocalAddress, kcpadmin.ListenHost)
	}
	if want := "https://" + s.LocalAddress + "/clusters/root"; cluster.Server != want || s.Server != want {
		t.Errorf("server %q (session %q), want %q", cluster.Server, s.Server, want)
	}
	if cluster.TLSServerName != frontProxyHost || s.ServerName != frontProxyHost {
		t.Errorf("tls-server-name %q (session %q), want the in-cluster name %q", cluster.TLSServerName, s.ServerName, frontProxyHost)
	}
	if !bytes.Equal(cluster.CertificateAuthorityData, h.certs.serverCA.PEM) {
		t.Errorf("certificate-authority-data is not the operator's CA (root-server-ca)")
	}
	if cluster.InsecureSkipTLSVerify || cluster.CertificateAuthority != "" || cluster.ProxyURL != "" {
		t.Errorf("cluster %+v: want no insecure flag, no CA file, no proxy", cluster)
	}
	if !bytes.Equal(user.ClientCertificateData, h.certs.adminChain) || !bytes.Equal(user.ClientKeyData, h.certs.adminKey) {
		t.Errorf("the user's client certificate and key are not the operator's chain and key")
	}
	if user.Exec != nil || user.AuthProvider != nil || user.Token != "" || user.ClientCertificate != "" || user.ClientKey != "" {
		t.Errorf("user carries more than inline certificate data: %+v", user)
	}

	if s.User != naming.KubeconfigUsername || !slices.Contains(s.Groups, naming.KubeconfigAdminGroup) {
		t.Errorf("session saw %q in %v, want %q in %s", s.User, s.Groups, naming.KubeconfigUsername, naming.KubeconfigAdminGroup)
	}
	leaf := firstCert(t, h.certs.adminLeaf)
	if !s.ExpiresAt.Equal(leaf.NotAfter) {
		t.Errorf("ExpiresAt %s, want the certificate's NotAfter %s", s.ExpiresAt, leaf.NotAfter)
	}
	if s.Secret != "kcp-system/kcp-kubeconfig-frontproxy" || s.Service != "kcp-system/kcp-frontproxy:6443" || s.Pod() != podA {
		t.Errorf("Secret %q, Service %q, pod %q", s.Secret, s.Service, s.Pod())
	}
	if got, err := whoAmI(t, s.KubeconfigPath); err != nil || got != naming.KubeconfigUsername {
		t.Fatalf("through the written file: %q, %v", got, err)
	}
	if n := h.proxy.lastPresented(t); n != 2 {
		t.Errorf("the client presented %d certificates, want the operator's chain of 2", n)
	}
	if log := h.log.String(); strings.Contains(log, "BEGIN") || strings.Contains(log, "PRIVATE") {
		t.Errorf("the log shows key material:\n%s", log)
	}
}

// Which acceptable client CAs in the front proxy's CertificateRequest make Go's
// crypto/tls client send a certificate it holds in tls.Config.Certificates: it sends
// one only when the list is empty or names the issuer of a certificate in its chain
// (handshake_client.go getClientCertificate, common.go SupportsCertificate). kubectl
// does not depend on the list: client-go answers through GetClientCertificate, so the
// kubeconfig kcpadmin writes authenticates in every case.
func TestWhichAdvertisedClientCAsMakeGoSendTheClientCertificate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// advertised are the CAs whose subjects the handshake lists.
		advertised func(*kcpCerts) []*pki.CA
		// leafSent and chainSent: does a Go client holding the leaf alone, or the leaf
		// with root-client-ca, send it?
		leafSent, chainSent bool
	}{
		{"no list", nil, true, true},
		{"root-client-ca and the requestheader CA, as kcp-front-proxy with the operator's flags", func(p *kcpCerts) []*pki.CA {
			return []*pki.CA{p.clientCA, p.requestHeaderCA}
		}, true, true},
		{"root-ca, which issued root-client-ca", func(p *kcpCerts) []*pki.CA { return []*pki.CA{p.rootCA} }, false, true},
		{"a client CA that issued nothing here", func(p *kcpCerts) []*pki.CA { return []*pki.CA{p.otherClientCA} }, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, c.advertised)
			s := h.run(t, h.options(t))

			var want [][]byte
			if c.advertised != nil {
				for _, ca := range c.advertised(h.certs) {
					want = append(want, ca.Cert.RawSubject)
				}
			}
			if got := acceptableCAs(t, h, s.LocalAddress); !slices.EqualFunc(got, want, bytes.Equal) {
				t.Fatalf("the handshake lists %d acceptable CAs, want %d: the fake does not advertise what the case says", len(got), len(want))
			}

			for _, holder := range []struct {
				what string
				cert []byte
				sent bool
			}{{"the leaf alone", h.certs.adminLeaf, c.leafSent}, {"the leaf and root-client-ca", h.certs.adminChain, c.chainSent}} {
				status := plainGoRequest(t, h, s.LocalAddress, holder.cert)
				presented := h.proxy.lastPresented(t)
				wantPresented, wantStatus := 0, http.StatusUnauthorized
				if holder.sent {
					wantPresented, wantStatus = len(certsIn(t, holder.cert)), http.StatusOK
				}
				if presented != wantPresented || status != wantStatus {
					t.Errorf("Go holding %s: presented %d certificates, answer %d; want %d, %d", holder.what, presented, status, wantPresented, wantStatus)
				}
			}

			if got, err := whoAmI(t, s.KubeconfigPath); err != nil || got != naming.KubeconfigUsername {
				t.Errorf("kcpadmin's kubeconfig (client-go, as kubectl): %q, %v; want %q", got, err, naming.KubeconfigUsername)
			}
			if n := h.proxy.lastPresented(t); n != 2 {
				t.Errorf("client-go presented %d certificates, want the chain of 2", n)
			}
		})
	}
}

// acceptableCAs is the list of CA subjects the server's CertificateRequest carries, as
// Go's client sees it.
func acceptableCAs(t *testing.T, h *harness, addr string) [][]byte {
	t.Helper()
	var seen [][]byte
	conn, err := tls.Dial("tcp", addr, &tls.Config{
		RootCAs: pool(h.certs.serverCA.Cert), ServerName: frontProxyHost, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			seen = cri.AcceptableCAs
			return &tls.Certificate{}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// TLS 1.3 finishes the client's side of the handshake only when it first reads.
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = conn.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	_, _ = conn.Read(make([]byte, 1))
	_ = conn.Close()
	return seen
}

// plainGoRequest sends one request through the forward with the certificate in
// tls.Config.Certificates, as a Go program without client-go does.
func plainGoRequest(t *testing.T, h *harness, addr string, certPEM []byte) int {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, h.certs.adminKey)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{
			RootCAs: pool(h.certs.serverCA.Cert), ServerName: frontProxyHost, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12,
		},
		DisableKeepAlives: true,
		Proxy:             nil,
	}}
	resp, err := client.Get("https://" + addr + "/clusters/root/version")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// A front proxy that is replaced (its pod deleted) needs no new command: the forward
// finds the Service's new Ready pod and serves the same local port, so the kubeconfig
// written once keeps working. The kubelet usually ends the port-forward with the pod;
// when the forward outlives the pod, the forward sees the pod gone.
func TestTheForwardMovesToTheNewPodWhenTheFrontProxyIsReplaced(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                  string
		kubeletEndsTheForward bool
		// reasons are what the log may give for the move: with the pod deleted before the
		// kubelet ends the forward, the pod check may come first.
		reasons []string
	}{
		{"the kubelet ends the forward", true, []string{"lost connection to pod", "the pod is gone"}},
		{"the forward outlives the pod", false, []string{"the pod is gone"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			s := h.run(t, h.options(t))

			ctx := context.Background()
			if err := h.kube.CoreV1().Pods(naming.NamespaceKcp).Delete(ctx, podA, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.kube.CoreV1().Pods(naming.NamespaceKcp).Create(ctx, frontProxyPod(podB, true), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.kubelet.Route(naming.NamespaceKcp, podB, naming.KcpPort, h.proxy.Listener.Addr().String())
			if c.kubeletEndsTheForward {
				h.kubelet.Route(naming.NamespaceKcp, podA, naming.KcpPort, "") // the old pod answers nothing any more
				h.kubelet.DropPod(podA)
			} else {
				waitForPod(t, h, s, podB) // no request meanwhile: only the pod check can move it
			}

			waitForUser(t, h, s)
			if s.Pod() != podB {
				t.Errorf("the forward leads to %q, want the new pod %q", s.Pod(), podB)
			}
			if asked := h.kubelet.AskedPods(); asked[len(asked)-1] != podB {
				t.Errorf("port-forwards asked for %v, want the last for %s", asked, podB)
			}
			log := h.log.String()
			saysWhy := slices.ContainsFunc(c.reasons, func(r string) bool {
				return strings.Contains(log, "forward to pod kcp-system/"+podA+" ended ("+r)
			})
			if !saysWhy || !strings.Contains(log, "forwarding "+s.LocalAddress+" to pod kcp-system/"+podB+" again") {
				t.Errorf("the log does not say why (one of %q) and where the forward went:\n%s", c.reasons, log)
			}
		})
	}
}

// waitForPod waits until the forward leads to pod.
func waitForPod(t *testing.T, h *harness, s *kcpadmin.Session, pod string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Pod() != pod {
		if time.Now().After(deadline) {
			t.Fatalf("the forward still leads to %q, want %q; log:\n%s", s.Pod(), pod, h.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A pod that stops being Ready while the API server's port-forward to it stays open is
// left for a Ready one.
func TestTheForwardLeavesAPodThatIsNoLongerReady(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	if _, err := h.kube.CoreV1().Pods(naming.NamespaceKcp).Create(context.Background(), frontProxyPod(podB, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.kubelet.Route(naming.NamespaceKcp, podB, naming.KcpPort, h.proxy.Listener.Addr().String())
	s := h.run(t, h.options(t))
	if s.Pod() != podA {
		t.Fatalf("the forward starts at %q, want %q (the first Ready pod by name)", s.Pod(), podA)
	}

	if _, err := h.kube.CoreV1().Pods(naming.NamespaceKcp).UpdateStatus(context.Background(), frontProxyPod(podA, false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForPod(t, h, s, podB)
	waitForUser(t, h, s)
	if !strings.Contains(h.log.String(), "the pod is not Ready") {
		t.Errorf("the log does not say why the forward moved:\n%s", h.log)
	}
}

// waitForUser retries through the kubeconfig file until kcp answers kcp-admin.
func waitForUser(t *testing.T, h *harness, s *kcpadmin.Session) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err := whoAmI(t, s.KubeconfigPath)
		if err == nil && got == naming.KubeconfigUsername {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("through the kubeconfig after the pod changed: %q, %v; log:\n%s", got, err, h.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Without -o the kubeconfig goes to the user's config directory, in a directory only the
// user can enter.
func TestTheKubeconfigGoesToTheUserConfigDirectoryByDefault(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	h := newHarness(t, nil)
	o := h.options(t)
	o.Output = ""
	s := h.run(t, o)
	want := filepath.Join(home, "railgrid-kcp", "kind-kcp-admin.kubeconfig")
	if s.KubeconfigPath != want {
		t.Fatalf("kubeconfig at %s, want %s", s.KubeconfigPath, want)
	}
	for path, mode := range map[string]os.FileMode{want: 0o600, filepath.Dir(want): 0o700} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s has mode %04o, want %04o", path, st.Mode().Perm(), mode)
		}
	}
}

// An output file inside the checkout the command runs from is refused before the cluster
// is asked anything, and nothing is written.
func TestRunRefusesAKubeconfigInsideTheCheckout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	repo := t.TempDir()
	if err := os.Mkdir(filepath.Join(repo, ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	o := h.options(t)
	o.WorkDir = filepath.Join(repo, "cmd")
	o.Output = filepath.Join(repo, "secrets", "admin.kubeconfig")
	_, err := kcpadmin.Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), o.Output+" is inside the git checkout "+repo) {
		t.Fatalf("Run: %v, want the refusal naming the file and the checkout", err)
	}
	if _, err := os.Stat(filepath.Dir(o.Output)); !os.IsNotExist(err) {
		t.Errorf("something was created in the checkout: %v", err)
	}
	if len(h.kube.Actions()) != 0 || len(h.kubelet.AskedPods()) != 0 {
		t.Errorf("the cluster was asked before the refusal: %d API calls, port-forwards %v", len(h.kube.Actions()), h.kubelet.AskedPods())
	}
}

// A local port another program holds is refused, naming it, and nothing is written.
func TestRunSaysWhenTheLocalPortIsTaken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	taken, err := net.Listen("tcp", kcpadmin.ListenHost+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	o := h.options(t)
	o.LocalPort = taken.Addr().(*net.TCPAddr).Port
	_, err = kcpadmin.Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "cannot listen on "+taken.Addr().String()+": is another program using that port?") {
		t.Fatalf("Run: %v, want the taken port named", err)
	}
	if _, err := os.Stat(o.Output); !os.IsNotExist(err) {
		t.Errorf("%s was written: %v", o.Output, err)
	}
}

// An expired credential is refused with the re-mint procedure, before any forward.
func TestRunRefusesAnExpiredCredential(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	o := h.options(t)
	expiry := firstCert(t, h.certs.adminLeaf).NotAfter
	o.Now = func() time.Time { return expiry.Add(time.Hour) }
	_, err := kcpadmin.Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "expired at "+expiry.UTC().Format(time.RFC3339)) || !strings.Contains(err.Error(), "hub.remintGeneration") {
		t.Fatalf("Run: %v, want the expiry and the re-mint procedure", err)
	}
	if len(h.kubelet.AskedPods()) != 0 {
		t.Errorf("a forward was started: %v", h.kubelet.AskedPods())
	}
}

// The Secret read is the one of the stack's current re-mint generation; when it is
// missing, the error names it and says why it can be missing.
func TestRunNamesTheMissingSecretOfTheCurrentRemintGeneration(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.cfg.Hub.RemintGeneration = 2
	_, err := kcpadmin.Run(context.Background(), h.options(t))
	want := "Secret kcp-system/kcp-kubeconfig-frontproxy-remint-2 not found: the kcp-operator writes it for the Kubeconfig object kcp-kubeconfig-frontproxy-remint-2 of hub.remintGeneration 2 once that object is Available; run pulumi up"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run: %v\nwant: %s", err, want)
	}
}

// The credential is parsed without reading or running anything the kubeconfig names,
// and a kubeconfig that cannot give kubectl a verified, authenticated connection is
// refused with a reason that quotes no key material.
func TestParseCredentialRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	p := newKcpCerts(t)
	now := time.Now()
	edit := func(change func(kc *kcfg)) []byte {
		kc := loadKcfg(t, operatorKubeconfig(t, p))
		change(kc)
		data, err := clientcmd.Write(*kc.Config)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	cases := []struct {
		name, want string
		change     func(kc *kcfg)
	}{
		{"insecure", "insecure-skip-tls-verify", func(kc *kcfg) { kc.cluster().InsecureSkipTLSVerify = true }},
		{"no CA", "no inline CA", func(kc *kcfg) { kc.cluster().CertificateAuthorityData = nil }},
		{"CA file only", "no inline CA", func(kc *kcfg) {
			kc.cluster().CertificateAuthorityData = nil
			kc.cluster().CertificateAuthority = "/etc/kcp/ca.crt"
		}},
		{"no key", "no inline client certificate and key", func(kc *kcfg) { kc.user().ClientKeyData = nil }},
		{"key of another certificate", "not a usable pair", func(kc *kcfg) { kc.user().ClientKeyData = otherKey(t, p) }},
		{"plain http", "is not an https URL", func(kc *kcfg) { kc.cluster().Server = "http://" + frontProxyHost + ":6443" }},
		{"no current context", "no usable current context", func(kc *kcfg) { kc.CurrentContext = "elsewhere" }},
	}
	for _, c := range cases {
		_, err := kcpadmin.ParseCredential(edit(c.change), now)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "BEGIN") || strings.Contains(err.Error(), "PRIVATE") {
			t.Errorf("%s: the error quotes key material: %v", c.name, err)
		}
	}

	// A path-less server gets the root workspace's path; a tls-server-name is kept.
	cred, err := kcpadmin.ParseCredential(edit(func(kc *kcfg) {
		kc.cluster().Server = "https://10.96.0.100:6443"
		kc.cluster().TLSServerName = frontProxyHost
	}), now)
	if err != nil {
		t.Fatal(err)
	}
	if cred.Server.String() != "https://10.96.0.100:6443/clusters/root" || cred.ServerName != frontProxyHost {
		t.Errorf("server %s, server name %q", cred.Server, cred.ServerName)
	}
}

// kcfg edits the operator's kubeconfig's current cluster and user.
type kcfg struct{ *clientcmdapi.Config }

func loadKcfg(t *testing.T, data []byte) *kcfg {
	t.Helper()
	kc, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	return &kcfg{kc}
}

func (k *kcfg) cluster() *clientcmdapi.Cluster {
	return k.Clusters[k.Contexts[k.CurrentContext].Cluster]
}

func (k *kcfg) user() *clientcmdapi.AuthInfo {
	return k.AuthInfos[k.Contexts[k.CurrentContext].AuthInfo]
}

// otherKey is the key of another certificate.
func otherKey(t *testing.T, p *kcpCerts) []byte {
	t.Helper()
	return p.clientCA.MustClientCert(t, "someone", nil).KeyPEM
}

// certsIn parses the certificates of a PEM bundle.
func certsIn(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return certs
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, cert)
	}
}

func firstCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	certs := certsIn(t, data)
	if len(certs) == 0 {
		t.Fatal("no certificate")
	}
	return certs[0]
}

func pool(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}
