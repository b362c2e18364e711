//go:build linux

package snapshots

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// envChild names the JSON file that tells a re-executed test binary which scenario to
// run inside its private namespaces.
const envChild = "RAILGRID_SNAPSHOTS_CHILD"

// childInput is what the outer test hands to the process inside the namespaces.
type childInput struct {
	Scenario string             `json:"scenario"`
	Pods     map[string]podSpec `json:"pods"` // "snapshot", "drill", "defrag", "probe"
	// Members are the root shard's etcd StatefulSet pod templates, by stack.
	Members    map[string]podSpec   `json:"members"`
	StackFiles map[string]string    `json:"stackFiles"` // Pulumi.<stack>.yaml, by stack
	Bucket     string               `json:"bucket"`
	Shard      string               `json:"shard"`
	EtcdHost   string               `json:"etcdHost"`  // the in-cluster name the snapshot job dials
	Images     map[string]imageRoot `json:"images"`    // the unpacked images, by name
	EtcdTools  string               `json:"etcdTools"` // etcd, etcdctl, etcdutl
	FakeGCS    string               `json:"fakeGCS"`
	WorkDir    string               `json:"workDir"`
	Keys       int                  `json:"keys"`
	Result     string               `json:"result"`
}

// imageRoot is an unpacked image: its root filesystem and its environment.
type imageRoot struct {
	Root string   `json:"root"`
	Env  []string `json:"env"`
}

// childResult is what it hands back.
type childResult struct {
	Runs    []podRun      `json:"runs"`
	Restore *restoreFacts `json:"restore,omitempty"`
	Defrag  *defragFacts  `json:"defrag,omitempty"`
	Error   string        `json:"error,omitempty"`
	Notes   []string      `json:"notes,omitempty"`
}

// runChild runs one scenario; it is called in the re-executed binary, which is already
// in fresh mount and network namespaces (unshare(2) through SysProcAttr.Unshareflags;
// Go makes the mount tree private first, so nothing here is seen outside).
func runChild(path string) int {
	var in childInput
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &in)
	}
	res := childResult{}
	if err == nil {
		err = scenario(in, &res)
	}
	if err != nil {
		res.Error = err.Error()
	}
	out, _ := json.Marshal(res)
	if werr := os.WriteFile(in.Result, out, 0o644); werr != nil {
		fmt.Fprintln(os.Stderr, werr)
		return 2
	}
	return 0
}

// memberIP is where member i of the shard's etcd listens: loopback has all of 127/8.
func memberIP(i int) string { return fmt.Sprintf("127.0.0.%d", i+1) }

// writeHosts is the scenario's /etc/hosts, which every container gets as the kubelet
// mounts one, and this process sees too: the shard's client Service is member 0, and
// each member's name under the headless Service is its own address.
func writeHosts(in childInput, members int) (string, error) {
	lines := []string{"127.0.0.1 localhost", "127.0.0.1 " + in.EtcdHost}
	for i := 0; i < members; i++ {
		lines = append(lines, memberIP(i)+" "+naming.EtcdMemberHost(in.Shard, i))
	}
	hosts := filepath.Join(in.WorkDir, "hosts")
	if err := os.WriteFile(hosts, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := syscall.Mount(hosts, "/etc/hosts", "", syscall.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("bind-mounting /etc/hosts: %w", err)
	}
	return hosts, nil
}

func scenario(in childInput, res *childResult) error {
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("bringing up lo: %w", err)
	}
	hosts, err := writeHosts(in, 3)
	if err != nil {
		return err
	}
	gcs, err := testenv.StartGCSEmulator(in.FakeGCS, "127.0.0.1", 4443)
	if err != nil {
		return err
	}
	defer gcs.Stop()
	ctx := context.Background()
	if err := gcs.CreateBucket(ctx, in.Bucket); err != nil {
		return fmt.Errorf("creating the bucket: %w", err)
	}
	runner := podRunner{timeout: 4 * time.Minute, dir: in.WorkDir, hosts: hosts, claims: map[string]string{},
		images: func(ref string) (image, error) {
			img, ok := in.Images[ref]
			if !ok {
				return image{}, fmt.Errorf("no image %s unpacked", ref)
			}
			return image{root: img.Root, env: img.Env}, nil
		}}
	runPod := func(name string) (podRun, error) {
		run, err := runner.run(name, in.Pods[name])
		res.Runs = append(res.Runs, run)
		return run, err
	}

	switch in.Scenario {
	case "pass":
		// An older, unusable object: the drill must take the newest one.
		if err := gcs.Upload(ctx, in.Bucket, in.Shard+"/20000101T000000Z.db", []byte("an old snapshot the drill must not pick")); err != nil {
			return err
		}
		etcd, err := startShardEtcd(in)
		if err != nil {
			return err
		}
		if err := putKeys(in, "/registry/drill/key-%03d", in.Keys); err != nil {
			etcd.stop()
			return err
		}
		snapshot, err := runPod("snapshot")
		etcd.stop()
		if err != nil {
			return err
		}
		if _, failed := snapshot.failed(); failed {
			return nil
		}
		// The drill never talks to the live etcd: it is stopped, as another pod's would be.
		_, err = runPod("drill")
		return err
	case "empty-bucket":
		_, err := runPod("drill")
		return err
	case "corrupt-snapshot":
		if err := gcs.Upload(ctx, in.Bucket, in.Shard+"/29991231T235959Z.db", bytes.Repeat([]byte("not a bolt database\n"), 2048)); err != nil {
			return err
		}
		_, err := runPod("drill")
		return err
	case "unreachable-etcd":
		_, err := runPod("snapshot")
		return err
	case "read-only-root":
		_, err := runPod("probe")
		return err
	case "defrag":
		return defragScenario(in, res, runner, -1)
	case "defrag-unhealthy":
		return defragScenario(in, res, runner, 1)
	case "restore-kind", "restore-gke":
		return restoreScenario(ctx, in, res, runner, gcs, strings.TrimPrefix(in.Scenario, "restore-"))
	}
	return fmt.Errorf("unknown scenario %q", in.Scenario)
}

// putKeys writes n keys named by format through member 0.
func putKeys(in childInput, format string, n int) error {
	for i := 0; i < n; i++ {
		if out, err := etcdctl(in, "put", fmt.Sprintf(format, i), fmt.Sprintf("value-%d", i)); err != nil {
			return fmt.Errorf("etcdctl put: %v: %s", err, out)
		}
	}
	return nil
}

// etcdctl runs the etcd tools' etcdctl against member 0.
func etcdctl(in childInput, args ...string) ([]byte, error) {
	return exec.Command(filepath.Join(in.EtcdTools, "etcdctl"), append([]string{"--endpoints=http://" + memberIP(0) + ":2379", "--command-timeout=20s"}, args...)...).CombinedOutput()
}

// shardEtcd is the shard's live etcd, on the address the in-cluster name resolves to.
type shardEtcd struct {
	cmd *exec.Cmd
	log *bytes.Buffer
}

func startShardEtcd(in childInput) (*shardEtcd, error) {
	dir := filepath.Join(in.WorkDir, "shard-etcd")
	cmd := exec.Command(filepath.Join(in.EtcdTools, "etcd"), "--name=shard", "--data-dir="+dir,
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=shard=http://127.0.0.1:2380", "--log-level=warn")
	e := &shardEtcd{cmd: cmd, log: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = e.log, e.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if err := waitHTTP("http://127.0.0.1:2379/health", time.Minute); err != nil {
		e.stop()
		return nil, fmt.Errorf("the shard's etcd did not become healthy: %w\n%s", err, e.log)
	}
	return e, nil
}

func (e *shardEtcd) stop() {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = e.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = e.cmd.Process.Kill()
		<-done
	}
}

// loopbackUp sets IFF_UP on lo, which a new network namespace has down.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var req struct {
		name  [syscall.IFNAMSIZ]byte
		flags uint16
		_     [22]byte
	}
	copy(req.name[:], "lo")
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&req))); errno != 0 {
		return errno
	}
	req.flags |= syscall.IFF_UP
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&req))); errno != 0 {
		return errno
	}
	return nil
}

func waitHTTP(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
