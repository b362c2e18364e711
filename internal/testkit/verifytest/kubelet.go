package verifytest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/tools/portforward"
)

// Kubelet is an API server that serves only pods/portforward the way the kubelet answers
// it: SPDY, protocol portforward.k8s.io, one error and one data stream per forwarded
// connection, paired by request ID, the data stream connected to the address the pod's
// port leads to (Route). A forward that cannot connect writes the reason on the error
// stream, as the kubelet does. DropPod ends a pod's port-forward sessions, as the
// kubelet does when the pod goes away.
type Kubelet struct {
	*httptest.Server

	mu       sync.Mutex
	targets  map[string]string // "<namespace>/<pod>:<port>" -> address
	sessions map[string][]httpstream.Connection
	asked    []string // pods, in the order of the port-forward requests
}

// NewKubelet starts the fake; it stops when the test ends.
func NewKubelet(t *testing.T) *Kubelet {
	t.Helper()
	k := &Kubelet{targets: map[string]string{}, sessions: map[string][]httpstream.Connection{}}
	k.Server = httptest.NewServer(http.HandlerFunc(k.serve))
	t.Cleanup(k.Close)
	return k
}

// Route sends the forwards to a pod's port to addr; "" makes them fail.
func (k *Kubelet) Route(namespace, pod string, port int, addr string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.targets[fmt.Sprintf("%s/%s:%d", namespace, pod, port)] = addr
}

// DropPod closes the pod's port-forward sessions.
func (k *Kubelet) DropPod(pod string) {
	k.mu.Lock()
	conns := k.sessions[pod]
	delete(k.sessions, pod)
	k.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// AskedPods are the pods of the port-forward requests, in order.
func (k *Kubelet) AskedPods() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string{}, k.asked...)
}

func (k *Kubelet) serve(w http.ResponseWriter, r *http.Request) {
	var ns, pod string
	if _, err := fmt.Sscanf(strings.ReplaceAll(r.URL.Path, "/", " "), " api v1 namespaces %s pods %s portforward", &ns, &pod); err != nil || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{portforward.PortForwardProtocolV1Name}); err != nil {
		return
	}
	type newStream struct {
		stream httpstream.Stream
		reply  <-chan struct{}
	}
	streams := make(chan newStream, 8)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, reply <-chan struct{}) error {
		streams <- newStream{s, reply}
		return nil
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	k.mu.Lock()
	k.asked = append(k.asked, pod)
	k.sessions[pod] = append(k.sessions[pod], conn)
	k.mu.Unlock()

	type pair struct{ errorStream, dataStream httpstream.Stream }
	pairs := map[string]*pair{}
	for {
		select {
		case s := <-streams:
			<-s.reply
			id := s.stream.Headers().Get(corev1.PortForwardRequestIDHeader)
			p := pairs[id]
			if p == nil {
				p = &pair{}
				pairs[id] = p
			}
			if s.stream.Headers().Get(corev1.StreamType) == corev1.StreamTypeError {
				p.errorStream = s.stream
			} else {
				p.dataStream = s.stream
			}
			if p.errorStream != nil && p.dataStream != nil {
				delete(pairs, id)
				go k.forward(ns+"/"+pod, p.errorStream, p.dataStream)
			}
		case <-conn.CloseChan():
			return
		}
	}
}

// forward connects one data stream to the pod's port; a failure goes on the error
// stream, as the kubelet reports it.
func (k *Kubelet) forward(pod string, errorStream, dataStream httpstream.Stream) {
	defer errorStream.Close()
	defer dataStream.Close()
	key := pod + ":" + dataStream.Headers().Get(corev1.PortHeader)
	k.mu.Lock()
	addr := k.targets[key]
	k.mu.Unlock()
	target, err := net.Dial("tcp", addr)
	if err != nil {
		_, _ = fmt.Fprintf(errorStream, "error forwarding port to pod %s: %v", key, err)
		return
	}
	defer target.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(target, dataStream)
		_ = target.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(dataStream, target)
	<-done
}
