//go:build linux

// Command pause is the sandbox ("pause") container of the end-to-end test's real node:
// it holds a pod's namespaces until it is told to stop, and reaps the orphans of a pod
// that shares its process namespace. No registry can be reached, so the image the
// kubelet asks for is built from this.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
