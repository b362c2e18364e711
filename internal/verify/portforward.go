package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/railgrid/railgrid-kcp/internal/errtext"
)

// ServiceDialer opens a connection to a port of a Service in the cluster. cmd/verify
// runs where ClusterIPs cannot be reached, so the real one (PortForwardDialer) goes
// through the API server's port-forward; tests connect to local servers.
type ServiceDialer interface {
	DialService(ctx context.Context, namespace, service string, port int) (net.Conn, error)
}

// DialFunc opens a connection, whatever address it is asked for (the front-proxy
// Service, reached through a ServiceDialer).
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// ServiceDialFunc is a DialFunc that connects to a Service's port through d, whatever
// address it is asked for: ServiceDialFunc(d, "kcp-system", "kcp-frontproxy", 6443)
// reaches the front proxy the way checkHubCredential does.
func ServiceDialFunc(d ServiceDialer, namespace, service string, port int) DialFunc {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialService(ctx, namespace, service, port)
	}
}

// ServiceBackend is where a Service's port leads: a Ready pod the Service selects and
// the port that pod listens on.
type ServiceBackend struct {
	Pod  string
	Port int
}

// ResolveServiceBackend finds the pod and port behind a Service's port, as `kubectl
// port-forward svc/NAME PORT` does: the Service port numbered port, its targetPort (a
// number, a container port name looked up in the pod, or the port itself when unset),
// and a Ready pod the Service's selector selects (the first by name, so runs repeat).
func ResolveServiceBackend(ctx context.Context, kube kubernetes.Interface, namespace, service string, port int) (ServiceBackend, error) {
	id := namespace + "/" + service
	svc, err := kube.CoreV1().Services(namespace).Get(ctx, service, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return ServiceBackend{}, fmt.Errorf("Service %s not found: pulumi up declares it (kubectl -n %s get services)", id, namespace)
	case err != nil:
		return ServiceBackend{}, fmt.Errorf("cannot read Service %s: %w", id, err)
	}
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return int(p.Port) == port })
	if i < 0 {
		var ports []string
		for _, p := range svc.Spec.Ports {
			ports = append(ports, strconv.Itoa(int(p.Port)))
		}
		return ServiceBackend{}, fmt.Errorf("Service %s has no port %d (ports: %s): run pulumi up", id, port, errtext.List(ports))
	}
	target := svc.Spec.Ports[i].TargetPort
	if len(svc.Spec.Selector) == 0 {
		return ServiceBackend{}, fmt.Errorf("Service %s has no selector, so no pod to forward to: run pulumi up", id)
	}
	selector := labels.SelectorFromSet(svc.Spec.Selector).String()
	pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return ServiceBackend{}, fmt.Errorf("cannot list the pods of Service %s (%s): %w", id, selector, err)
	}
	items := slices.Clone(pods.Items)
	slices.SortFunc(items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	var notReady []string
	for i := range items {
		pod := &items[i]
		if why := PodNotReady(pod); why != "" {
			notReady = append(notReady, pod.Name+" "+why)
			continue
		}
		number, err := podPort(pod, target, port)
		if err != nil {
			return ServiceBackend{}, fmt.Errorf("Service %s port %d: %w", id, port, err)
		}
		return ServiceBackend{Pod: pod.Name, Port: number}, nil
	}
	if len(notReady) == 0 {
		return ServiceBackend{}, fmt.Errorf("Service %s selects no pod (%s): is the component rolled out? (kubectl -n %s get pods -l %s)", id, selector, namespace, selector)
	}
	return ServiceBackend{}, fmt.Errorf("Service %s selects no Ready pod (%s): %s (kubectl -n %s get pods -l %s)",
		id, selector, strings.Join(notReady, ", "), namespace, selector)
}

// PodNotReady says why a pod cannot take a port-forward, or "" when it can.
func PodNotReady(pod *corev1.Pod) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return "is terminating"
	case pod.Status.Phase != corev1.PodRunning:
		return "is " + strings.ToLower(orDefault(string(pod.Status.Phase), "without a phase"))
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return ""
		}
	}
	return "is not Ready"
}

// podPort is the pod's port for a Service targetPort (kubectl's
// LookupContainerPortNumberByServicePort): a number as is, a name looked up among the
// containers' ports, the Service port itself when the targetPort is unset.
func podPort(pod *corev1.Pod, target intstr.IntOrString, servicePort int) (int, error) {
	switch {
	case target.Type == intstr.Int && target.IntVal == 0:
		return servicePort, nil
	case target.Type == intstr.Int:
		return int(target.IntVal), nil
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == target.StrVal {
				return int(p.ContainerPort), nil
			}
		}
	}
	return 0, fmt.Errorf("targetPort %q names no container port of pod %s", target.StrVal, pod.Name)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// PortForwardDialer reaches a Service's port the way `kubectl port-forward svc/NAME`
// does: ResolveServiceBackend picks a Ready pod and its port, and the connection is a
// data stream of the API server's pods/portforward subresource (SPDY, client-go's
// transport/spdy and the tools/portforward protocol). No local port is opened.
type PortForwardDialer struct {
	// Kube looks the Service and its pods up.
	Kube kubernetes.Interface
	// Config reaches the API server (its address, credentials and TLS).
	Config *rest.Config
}

// DialService implements ServiceDialer.
func (d *PortForwardDialer) DialService(ctx context.Context, namespace, service string, port int) (net.Conn, error) {
	backend, err := ResolveServiceBackend(ctx, d.Kube, namespace, service, port)
	if err != nil {
		return nil, err
	}
	conn, err := d.DialPod(ctx, namespace, backend.Pod, backend.Port)
	if err != nil {
		return nil, fmt.Errorf("Service %s/%s port %d: %w", namespace, service, port, err)
	}
	return conn, nil
}

// DialPod opens a port-forward to a pod's port through the API server.
func (d *PortForwardDialer) DialPod(ctx context.Context, namespace, pod string, port int) (net.Conn, error) {
	target := fmt.Sprintf("pod %s/%s port %d", namespace, pod, port)
	core, err := corev1client.NewForConfig(d.Config)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s: %w", target, err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(d.Config)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s: %w", target, err)
	}
	u := core.RESTClient().Post().Namespace(namespace).Resource("pods").Name(pod).SubResource("portforward").URL()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s: %w", target, err)
	}
	streams, err := negotiate(ctx, upgrader, &http.Client{Transport: transport}, req)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s (needs create on pods/portforward): %w", target, err)
	}

	// One request: an error stream, on which the kubelet reports a failure to connect,
	// and a data stream, as client-go's PortForwarder.handleConnection opens them.
	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(port))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	errorStream, err := streams.CreateStream(headers)
	if err != nil {
		_ = streams.Close()
		return nil, fmt.Errorf("port-forward to %s: error stream: %w", target, err)
	}
	_ = errorStream.Close() // nothing is sent on it
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := streams.CreateStream(headers)
	if err != nil {
		_ = streams.Close()
		return nil, fmt.Errorf("port-forward to %s: data stream: %w", target, err)
	}
	remoteErr := make(chan string, 1)
	go func() {
		message, err := io.ReadAll(errorStream)
		switch {
		case len(message) > 0:
			remoteErr <- strings.TrimSpace(string(message))
		case err != nil && !errors.Is(err, io.EOF):
			remoteErr <- "reading the error stream: " + err.Error()
		default:
			remoteErr <- ""
		}
	}()
	return newForwardedConn(streams, data, remoteErr, target), nil
}

// negotiate upgrades the port-forward request to SPDY, giving up when ctx ends (the
// upgrade itself does not watch ctx once the connection to the API server is open).
func negotiate(ctx context.Context, upgrader spdy.Upgrader, client *http.Client, req *http.Request) (httpstream.Connection, error) {
	type result struct {
		conn     httpstream.Connection
		protocol string
		err      error
	}
	done := make(chan result, 1)
	go func() {
		conn, protocol, err := spdy.Negotiate(upgrader, client, req, portforward.PortForwardProtocolV1Name)
		done <- result{conn, protocol, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, r.err
		}
		if r.protocol != portforward.PortForwardProtocolV1Name {
			_ = r.conn.Close()
			return nil, fmt.Errorf("the API server chose protocol %q, want %q", r.protocol, portforward.PortForwardProtocolV1Name)
		}
		return r.conn, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.conn != nil {
				_ = r.conn.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// forwardedConn is the caller's end of a pipe whose other end is copied to and from the
// data stream, so deadlines work as on any connection. When the stream ends, the
// kubelet's message on the error stream (such as "connection refused") is returned
// instead of a bare EOF.
type forwardedConn struct {
	net.Conn
	streams   httpstream.Connection
	data      httpstream.Stream
	remoteErr <-chan string
	target    string

	errOnce   sync.Once
	errMsg    string
	closeOnce sync.Once
}

func newForwardedConn(streams httpstream.Connection, data httpstream.Stream, remoteErr <-chan string, target string) *forwardedConn {
	local, remote := net.Pipe()
	go func() {
		_, _ = io.Copy(data, remote) // the caller's bytes to the pod
		_ = data.Close()             // nothing more to send
	}()
	go func() {
		_, _ = io.Copy(remote, data) // the pod's bytes to the caller
		_ = remote.Close()
	}()
	return &forwardedConn{Conn: local, streams: streams, data: data, remoteErr: remoteErr, target: target}
}

// remoteErrorWait bounds how long an ended stream waits for the error stream's message.
const remoteErrorWait = time.Second

func (c *forwardedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, io.EOF) {
		c.errOnce.Do(func() {
			select {
			case c.errMsg = <-c.remoteErr:
			case <-time.After(remoteErrorWait):
			}
		})
		if c.errMsg != "" {
			return n, fmt.Errorf("port-forward to %s: %s", c.target, c.errMsg)
		}
	}
	return n, err
}

func (c *forwardedConn) Close() error {
	c.closeOnce.Do(func() {
		_ = c.Conn.Close()
		_ = c.data.Reset()
		_ = c.streams.Close()
	})
	return nil
}

func (c *forwardedConn) RemoteAddr() net.Addr { return portForwardAddr(c.target) }

// portForwardAddr names the pod and port a forwarded connection reaches.
type portForwardAddr string

func (portForwardAddr) Network() string  { return "portforward" }
func (a portForwardAddr) String() string { return string(a) }
