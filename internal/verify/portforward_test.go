package verify_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

var kcpSelector = map[string]string{"app.kubernetes.io/component": "shard", "app.kubernetes.io/instance": "alpha"}

// ownedService is like the program's: ports 443 and 6443 to the kcp port.
func ownedService(target intstr.IntOrString) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kcp-system", Name: "kcp-alpha"},
		Spec: corev1.ServiceSpec{
			Selector: kcpSelector,
			Ports: []corev1.ServicePort{
				{Name: "https", Port: 443, TargetPort: target},
				{Name: "https-kcp", Port: 6443, TargetPort: target},
			},
		},
	}
}

type podState func(*corev1.Pod)

func ready(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
}
func running(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }
func pending(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }
func terminating(p *corev1.Pod) {
	ready(p)
	now := metav1.Now()
	p.DeletionTimestamp, p.Finalizers = &now, []string{"test"}
}

func kcpPod(name string, labels map[string]string, state podState) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kcp-system", Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "kcp", Ports: []corev1.ContainerPort{{Name: "https", ContainerPort: 6443}, {Name: "https-vw", ContainerPort: 6444}},
		}}},
	}
	state(p)
	return p
}

func TestResolveServiceBackendPicksAReadyPodAndTheTargetPort(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		target   intstr.IntOrString
		port     int
		wantPort int
	}{
		"numeric targetPort": {intstr.FromInt32(6443), 443, 6443},
		"named targetPort":   {intstr.FromString("https-vw"), 6443, 6444},
		"no targetPort":      {intstr.IntOrString{}, 6443, 6443},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kube := kubefake.NewClientset(ownedService(tc.target),
				kcpPod("alpha-shard-kcp-a", kcpSelector, terminating),
				kcpPod("alpha-shard-kcp-b", kcpSelector, running), // Running, not Ready
				kcpPod("alpha-shard-kcp-c", kcpSelector, ready),
				kcpPod("alpha-shard-kcp-d", kcpSelector, ready),
				kcpPod("root-kcp-a", map[string]string{"app.kubernetes.io/component": "rootshard"}, ready),
			)
			got, err := verify.ResolveServiceBackend(context.Background(), kube, "kcp-system", "kcp-alpha", tc.port)
			if err != nil {
				t.Fatal(err)
			}
			if want := (verify.ServiceBackend{Pod: "alpha-shard-kcp-c", Port: tc.wantPort}); got != want {
				t.Errorf("backend %+v, want %+v", got, want)
			}
		})
	}
}

func TestResolveServiceBackendSaysWhyThereIsNoBackend(t *testing.T) {
	t.Parallel()
	noSelector := ownedService(intstr.FromInt32(6443))
	noSelector.Spec.Selector = nil
	cases := map[string]struct {
		objs []runtime.Object
		port int
		want []string
	}{
		"no Service": {nil, 6443, []string{"Service kcp-system/kcp-alpha not found", "pulumi up declares it"}},
		"no such port": {[]runtime.Object{ownedService(intstr.FromInt32(6443))}, 8443,
			[]string{"Service kcp-system/kcp-alpha has no port 8443 (ports: 443, 6443)"}},
		"no selector": {[]runtime.Object{noSelector}, 6443, []string{"has no selector"}},
		"no pod": {[]runtime.Object{ownedService(intstr.FromInt32(6443))}, 6443,
			[]string{"selects no pod (app.kubernetes.io/component=shard,app.kubernetes.io/instance=alpha)", "kubectl -n kcp-system get pods -l app.kubernetes.io/component=shard,app.kubernetes.io/instance=alpha"}},
		"no Ready pod": {[]runtime.Object{ownedService(intstr.FromInt32(6443)),
			kcpPod("alpha-shard-kcp-a", kcpSelector, pending), kcpPod("alpha-shard-kcp-b", kcpSelector, running), kcpPod("alpha-shard-kcp-c", kcpSelector, terminating)}, 6443,
			[]string{"selects no Ready pod", "alpha-shard-kcp-a is pending, alpha-shard-kcp-b is not Ready, alpha-shard-kcp-c is terminating", "kubectl -n kcp-system get pods -l"}},
		"unknown port name": {[]runtime.Object{ownedService(intstr.FromString("metrics")), kcpPod("alpha-shard-kcp-a", kcpSelector, ready)}, 6443,
			[]string{`targetPort "metrics" names no container port of pod alpha-shard-kcp-a`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := verify.ResolveServiceBackend(context.Background(), kubefake.NewClientset(tc.objs...), "kcp-system", "kcp-alpha", tc.port)
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// The dialer reaches a Service through the API server's port-forward: the pod and port
// ResolveServiceBackend picks, one HTTPS request answered by the server behind it.
func TestPortForwardDialerReachesTheServiceThroughTheAPIServer(t *testing.T) {
	t.Parallel()
	backend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "kcp at %s", r.URL.Path)
	}))
	t.Cleanup(backend.Close)
	api := verifytest.NewKubelet(t)
	api.Route("kcp-system", "alpha-shard-kcp-c", 6444, backend.Listener.Addr().String())
	kube := kubefake.NewClientset(ownedService(intstr.FromString("https-vw")),
		kcpPod("alpha-shard-kcp-b", kcpSelector, pending), kcpPod("alpha-shard-kcp-c", kcpSelector, ready))
	d := &verify.PortForwardDialer{Kube: kube, Config: &rest.Config{Host: api.URL}}

	roots := x509.NewCertPool()
	roots.AddCert(backend.Certificate())
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:       verify.ServiceDialFunc(d, "kcp-system", "kcp-alpha", 6443),
		TLSClientConfig:   &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}
	// httptest's certificate is for example.com; the dialer ignores the address.
	resp, err := client.Get("https://example.com/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "kcp at /readyz" {
		t.Fatalf("answer %d %q", resp.StatusCode, body)
	}
}

// The kubelet's reason for a failed forward (nothing listens on the port) is the error
// the caller reads, not a bare EOF.
func TestPortForwardDialerReportsTheKubeletsError(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	_ = closed.Close()
	api := verifytest.NewKubelet(t)
	api.Route("kcp-system", "alpha-shard-kcp-c", 6443, addr)
	d := &verify.PortForwardDialer{Config: &rest.Config{Host: api.URL}}
	conn, err := d.DialPod(context.Background(), "kcp-system", "alpha-shard-kcp-c", 6443)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.RemoteAddr().String(); got != "pod kcp-system/alpha-shard-kcp-c port 6443" {
		t.Errorf("remote address %q", got)
	}
	_, err = conn.Read(make([]byte, 1))
	if err == nil || !strings.Contains(err.Error(), "port-forward to pod kcp-system/alpha-shard-kcp-c port 6443: error forwarding port") ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("read error %v, want the kubelet's reason", err)
	}
}

// A pod the API server does not know (here: no portforward subresource) fails the dial.
func TestPortForwardDialerFailsWhenTheAPIServerRefuses(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `pods "alpha-shard-kcp-c" is forbidden`, http.StatusForbidden)
	}))
	t.Cleanup(api.Close)
	d := &verify.PortForwardDialer{Config: &rest.Config{Host: api.URL}}
	_, err := d.DialPod(context.Background(), "kcp-system", "alpha-shard-kcp-c", 6443)
	if err == nil || !strings.Contains(err.Error(), "port-forward to pod kcp-system/alpha-shard-kcp-c port 6443 (needs create on pods/portforward)") {
		t.Fatalf("error %v", err)
	}
}
