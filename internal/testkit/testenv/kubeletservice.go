package testenv

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// The kubelet runs as kubeadm's systemd unit runs it on a real node: restarted when it
// exits on its own (Restart=always, RestartSec=10 in kubeadm's kubelet.service), up to
// systemd's start limit (StartLimitBurst=5). The pinned kubelet can die at start with
// "concurrent map iteration and map write" in containerManagerImpl.GetCapacity, when its
// DRA plugin manager reads the node's capacity while the container manager writes it
// (kubernetes/kubernetes#119637 is the same race, seen from another caller); on a real
// node the unit brings it back, and so does the test. Each run that exited on its own
// keeps its log, which KubeletCrashes lists.
const (
	kubeletRestartDelay = 10 * time.Second
	kubeletStartLimit   = 5
)

// launchKubelet starts the kubelet with its log in logName and supervises it.
func (n *Node) launchKubelet(logName string) error {
	p, err := LaunchProcess("kubelet", n.opts.Bins.Kubelet, filepath.Join(n.opts.Dir, logName), nil, n.kubeletArgs...)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.kubelet = p
	n.mu.Unlock()
	go n.superviseKubelet(p, logName)
	return nil
}

// superviseKubelet starts the kubelet again when p, the kubelet as last started, exits
// while nobody stops it.
func (n *Node) superviseKubelet(p *Process, logName string) {
	<-p.Done()
	n.mu.Lock()
	if n.kubelet != p || n.kubeletStopping {
		n.mu.Unlock()
		return
	}
	n.kubeletCrashes = append(n.kubeletCrashes, fmt.Sprintf("%s (%v): %s", p.LogPath, p.Err(), lastLine(p.Tail(40))))
	crashes := len(n.kubeletCrashes)
	n.mu.Unlock()
	if crashes >= kubeletStartLimit {
		return
	}
	time.Sleep(n.kubeletRestartDelay)
	n.mu.Lock()
	stopped := n.kubelet != p || n.kubeletStopping
	n.mu.Unlock()
	if !stopped {
		_ = n.launchKubelet(fmt.Sprintf("%s.after-exit-%d", strings.TrimSuffix(logName, ".log"), crashes) + ".log")
	}
}

// stopKubelet stops the kubelet; the supervisor does not start it again.
func (n *Node) stopKubelet() {
	n.mu.Lock()
	n.kubeletStopping = true
	p := n.kubelet
	n.mu.Unlock()
	if p != nil {
		p.Stop()
	}
}

// KubeletCrashes are the kubelet's runs that exited on their own: each log, how it
// ended and its fatal line.
func (n *Node) KubeletCrashes() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.kubeletCrashes...)
}

// lastLine is the first line of a log's end that says why a Go program died.
func lastLine(tail string) string {
	for _, l := range strings.Split(tail, "\n") {
		if strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "panic:") {
			return l
		}
	}
	lines := strings.Split(strings.TrimSpace(tail), "\n")
	return lines[len(lines)-1]
}
