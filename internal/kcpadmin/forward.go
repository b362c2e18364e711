package kcpadmin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/railgrid/railgrid-kcp/internal/verify"
)

// ListenHost is the only address the forward listens on: the admin credential's
// front door must not be reachable from other machines.
const ListenHost = "127.0.0.1"

// PodDialer connects to the API server's port-forward of one pod (its pods/portforward
// subresource). The real one is SPDYPodDialer; tests put a fake API server behind it.
type PodDialer func(namespace, pod string) (httpstream.Dialer, error)

// SPDYPodDialer is the dialer `kubectl port-forward` builds: a SPDY upgrade of a POST
// to the pod's portforward subresource, with the kube context's credentials.
func SPDYPodDialer(cfg *rest.Config) PodDialer {
	return func(namespace, pod string) (httpstream.Dialer, error) {
		core, err := corev1client.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		transport, upgrader, err := spdy.RoundTripperFor(cfg)
		if err != nil {
			return nil, err
		}
		u := core.RESTClient().Post().Namespace(namespace).Resource("pods").Name(pod).SubResource("portforward").URL()
		return spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u), nil
	}
}

// Forward says what to forward: a Service's port, reached on 127.0.0.1.
type Forward struct {
	Kube kubernetes.Interface
	Dial PodDialer
	// Namespace, Service and Port name the Service port, as `kubectl port-forward
	// svc/NAME PORT` takes it.
	Namespace, Service string
	Port               int
	// LocalPort is the port on 127.0.0.1; 0 takes a free one (kept for the whole run).
	LocalPort int
	// PodCheck is how often the forwarded pod is looked at: when it is gone, terminating
	// or not Ready, the forward moves to a Ready pod of the Service.
	PodCheck time.Duration
	// Retry is the pause between attempts to find a pod and forward again.
	Retry time.Duration
	// StartTimeout bounds the first attempt, which StartForward waits for (1m).
	StartTimeout time.Duration
	// Log receives one line per change of pod and per reason the forward waits.
	Log io.Writer
}

// Forwarding is a running forward. It keeps the local port and follows the Service to
// another pod whenever its pod ends (the API server's connection to it is lost) or
// stops being Ready, until Close or until the context given to StartForward ends.
type Forwarding struct {
	f      Forward
	addr   string
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	pod string
}

// StartForward resolves the Service to a Ready pod, forwards 127.0.0.1:LocalPort to it
// with client-go's port-forward (the code of `kubectl port-forward`), and returns once
// the local port listens. It fails at once when the Service has no Ready pod or the API
// server refuses the port-forward, so a wrong cluster shows immediately.
func StartForward(ctx context.Context, f Forward) (*Forwarding, error) {
	if f.Kube == nil || f.Dial == nil || f.Namespace == "" || f.Service == "" || f.Port <= 0 {
		return nil, errors.New("forward: Kube, Dial, Namespace, Service and Port are required")
	}
	if f.PodCheck <= 0 {
		f.PodCheck = 5 * time.Second
	}
	if f.Retry <= 0 {
		f.Retry = 2 * time.Second
	}
	if f.StartTimeout <= 0 {
		f.StartTimeout = time.Minute
	}
	if f.Log == nil {
		f.Log = io.Discard
	}
	startCtx, cancelStart := context.WithTimeout(ctx, f.StartTimeout)
	first, err := f.start(startCtx, f.LocalPort)
	cancelStart()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &Forwarding{f: f, addr: net.JoinHostPort(ListenHost, strconv.Itoa(first.local)), cancel: cancel, done: make(chan struct{}), pod: first.pod}
	w.f.LocalPort = first.local
	go w.supervise(ctx, first)
	return w, nil
}

// Addr is the local address, 127.0.0.1:<port>.
func (w *Forwarding) Addr() string { return w.addr }

// Pod is the pod the forward currently leads to.
func (w *Forwarding) Pod() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod
}

// Done is closed once the forward has stopped and its port is closed.
func (w *Forwarding) Done() <-chan struct{} { return w.done }

// Close stops the forward and waits until the local port is closed.
func (w *Forwarding) Close() {
	w.cancel()
	<-w.done
}

// attempt is one client-go PortForwarder, to one pod.
type attempt struct {
	pod   string
	local int
	stop  chan struct{}
	ended chan error
}

func (a *attempt) end() error {
	close(a.stop)
	return <-a.ended
}

// start forwards local (0: a free port) to a Ready pod of the Service.
func (f *Forward) start(ctx context.Context, local int) (*attempt, error) {
	backend, err := verify.ResolveServiceBackend(ctx, f.Kube, f.Namespace, f.Service, f.Port)
	if err != nil {
		return nil, err
	}
	target := fmt.Sprintf("pod %s/%s port %d", f.Namespace, backend.Pod, backend.Port)
	dialer, err := f.Dial(f.Namespace, backend.Pod)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s: %w", target, err)
	}
	a := &attempt{pod: backend.Pod, stop: make(chan struct{}), ended: make(chan error, 1)}
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{ListenHost}, []string{fmt.Sprintf("%d:%d", local, backend.Port)}, a.stop, ready, io.Discard, f.Log)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s: %w", target, err)
	}
	go func() { a.ended <- pf.ForwardPorts() }()
	select {
	case <-ready:
		ports, err := pf.GetPorts()
		if err != nil || len(ports) != 1 {
			_ = a.end()
			return nil, fmt.Errorf("port-forward to %s: no local port (%v)", target, err)
		}
		a.local = int(ports[0].Local)
		return a, nil
	case err := <-a.ended:
		if local != 0 && strings.HasPrefix(err.Error(), "unable to listen") {
			return nil, fmt.Errorf("cannot listen on %s: is another program using that port? (%w)", net.JoinHostPort(ListenHost, strconv.Itoa(local)), err)
		}
		return nil, fmt.Errorf("port-forward to %s (needs create on pods/portforward): %w", target, err)
	case <-ctx.Done():
		close(a.stop) // the upgrade does not watch ctx: ForwardPorts ends once it returns
		return nil, ctx.Err()
	}
}

// supervise keeps the forward going: each time the current pod's forward ends, or the
// pod is gone or not Ready, it finds the Service's Ready pod again and forwards the same
// local port to it. Connections made in between are refused; the next one works.
func (w *Forwarding) supervise(ctx context.Context, a *attempt) {
	defer close(w.done)
	for {
		reason := w.watch(ctx, a)
		if ctx.Err() != nil {
			return
		}
		fmt.Fprintf(w.f.Log, "kcpadmin: the forward to pod %s/%s ended (%s); finding the Service's Ready pod again\n", w.f.Namespace, a.pod, reason)
		lastErr := ""
		for {
			next, err := w.f.start(ctx, w.f.LocalPort)
			if err == nil {
				a = next
				w.mu.Lock()
				w.pod = a.pod
				w.mu.Unlock()
				fmt.Fprintf(w.f.Log, "kcpadmin: forwarding %s to pod %s/%s again\n", w.addr, w.f.Namespace, a.pod)
				break
			}
			if ctx.Err() != nil {
				return
			}
			if err.Error() != lastErr { // once per distinct reason, not every Retry
				fmt.Fprintf(w.f.Log, "kcpadmin: waiting: %v\n", err)
				lastErr = err.Error()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(w.f.Retry):
			}
		}
	}
}

// watch returns when the attempt has ended, or has been ended because its pod is gone,
// terminating or not Ready, with the reason; or when ctx ends, after ending it.
func (w *Forwarding) watch(ctx context.Context, a *attempt) string {
	ticker := time.NewTicker(w.f.PodCheck)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = a.end()
			return ""
		case err := <-a.ended:
			if err == nil {
				return "the port-forward stopped"
			}
			return err.Error()
		case <-ticker.C:
			pod, err := w.f.Kube.CoreV1().Pods(w.f.Namespace).Get(ctx, a.pod, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				_ = a.end()
				return "the pod is gone"
			case err != nil:
				continue // the API server may be briefly unreachable; the forward may still work
			}
			if why := verify.PodNotReady(pod); why != "" {
				_ = a.end()
				return "the pod " + why
			}
		}
	}
}
