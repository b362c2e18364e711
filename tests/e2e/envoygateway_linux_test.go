//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/railgrid/railgrid-kcp/tests/internal/testenv"
)

// privateLaunch is a server started in a mount and a network namespace of its own, with a
// private root (tmpfs) that holds only what it needs: /certs, /config, the binary at
// /bin/<name>, /proc, /dev, a tmpfs /tmp and /var/lib/eg/wasm (the chart's emptyDir for
// Envoy Gateway's wasm cache). Nothing is mounted or created on the host.
type privateLaunch struct {
	name, bin, dir string
	certs, config  string // host directories bound read-only at /certs and /config
	apiServer      string // host:port of the API server
	// inside is the loopback host:port in the namespace where the API server is
	// forwarded (the API server's own address is the bridge's, absent in the namespace).
	inside    string
	env, args []string
}

// privateRootScript runs under `unshare --net --mount` (mounts private), before the
// server: it builds the private root, signals the test, waits for the API server's port
// to be forwarded into the network namespace, then runs the server chrooted.
const privateRootScript = `set -eu
root=$1 certs=$2 conf=$3 bin=$4 name=$5 signal=$6
shift 6
mount -t tmpfs -o mode=0755 railgrid-private-root "$root"
mkdir -p "$root/proc" "$root/dev" "$root/tmp" "$root/certs" "$root/config" "$root/bin" "$root/var/lib/eg/wasm"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/tmp"
mount -t tmpfs tmpfs "$root/var/lib/eg/wasm"
mount --bind "$certs" "$root/certs"
mount -o remount,bind,ro "$root/certs"
mount --bind "$conf" "$root/config"
mount -o remount,bind,ro "$root/config"
touch "$root/bin/$name"
mount --bind "$bin" "$root/bin/$name"
: > "$signal.ns"
while [ ! -e "$signal.go" ]; do sleep 0.05; done
exec chroot "$root" "/bin/$name" "$@"
`

// launchInPrivateNamespaces starts l.bin in namespaces of its own and forwards the API
// server's address into its network namespace. It returns the process and a counter of
// the connections forwarded.
func launchInPrivateNamespaces(ctx context.Context, l privateLaunch) (*testenv.Process, func() int, error) {
	root := filepath.Join(l.dir, "root") // only a mount point: the tmpfs is mounted inside the namespace
	signal := filepath.Join(l.dir, "launch")
	for _, p := range []string{signal + ".ns", signal + ".go"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, err
		}
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, nil, err
	}
	args := append([]string{"--net", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", privateRootScript, "sh",
		root, l.certs, l.config, l.bin, l.name, signal}, l.args...)
	p, err := testenv.LaunchProcess(l.name, "unshare", filepath.Join(l.dir, l.name+".log"), l.env, args...)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*testenv.Process, func() int, error) {
		p.Stop()
		return nil, nil, fmt.Errorf("%w\n%s", err, p.Tail(20))
	}
	if err := testenv.WaitFor(ctx, time.Minute, p, func() (bool, error) {
		_, err := os.Stat(signal + ".ns")
		return err == nil, nil
	}); err != nil {
		return fail(fmt.Errorf("the private namespaces were not set up: %w", err))
	}
	// unshare execs the script in place: the process's namespace is the new one.
	ln, err := listenInNetns(p.Pid(), l.inside)
	if err != nil {
		return fail(err)
	}
	var forwarded atomic.Int64
	go forward(ln, l.apiServer, &forwarded)
	// The listener holds the namespace: close it when the server is gone.
	go func() {
		<-p.Done()
		ln.Close()
	}()
	if err := os.WriteFile(signal+".go", nil, 0o600); err != nil {
		return fail(err)
	}
	return p, func() int { return int(forwarded.Load()) }, nil
}

// listenInNetns brings the loopback interface of pid's network namespace up and listens
// on addr inside it, from one OS thread switched into the namespace and back.
//
// The thread must neither return to the Go scheduler while in the namespace (another
// goroutine, or a process the test starts from it, would run there) nor exit: every
// server the test starts has a parent-death signal (testenv.SetProcessGroup), which the kernel
// sends when the thread that forked it exits, and any thread may have forked one. So
// the goroutine stays locked to the thread until the thread is back in the test's own
// namespace, and if it cannot get back, it parks on the thread forever.
func listenInNetns(pid int, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer own.Close()
		ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("setns into the network namespace of pid %d: %w", pid, err)}
			return
		}
		var ln net.Listener
		err = loopbackUp()
		if err == nil {
			ln, err = net.Listen("tcp", addr)
		}
		if back := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); back != nil {
			ch <- result{ln: ln, err: errors.Join(err, fmt.Errorf("setns back into the test's network namespace: %w", back))}
			select {} // stay locked on this thread, alive, forever (see above)
		}
		runtime.UnlockOSThread()
		ch <- result{ln: ln, err: err}
	}()
	r := <-ch
	if r.err != nil && r.ln != nil {
		r.ln.Close()
	}
	return r.ln, r.err
}

// loopbackUp sets IFF_UP on "lo" of the calling thread's network namespace (a new one
// has it down), with the SIOCGIFFLAGS/SIOCSIFFLAGS ioctls, so no `ip` binary is needed.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	req, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, req); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS lo: %w", err)
	}
	req.SetUint16(req.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, req); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS lo: %w", err)
	}
	return nil
}

// forward accepts connections on ln (inside the namespace) and relays each to target,
// dialled from the test's own network namespace.
func forward(ln net.Listener, target string, count *atomic.Int64) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		count.Add(1)
		go func() {
			defer in.Close()
			out, err := net.DialTimeout("tcp", target, 10*time.Second)
			if err != nil {
				return
			}
			defer out.Close()
			var wg sync.WaitGroup
			wg.Add(2)
			relay := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				if tcp, ok := dst.(*net.TCPConn); ok {
					_ = tcp.CloseWrite()
				}
			}
			go relay(out, in)
			go relay(in, out)
			wg.Wait()
		}()
	}
}
