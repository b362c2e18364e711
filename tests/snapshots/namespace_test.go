package snapshots

import (
	"bytes"
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
)

// envChild names the JSON file that tells a re-executed test binary which scenario to
// run inside its private namespaces.
const envChild = "RAILGRID_SNAPSHOTS_CHILD"

// childInput is what the outer test hands to the process inside the namespaces.
type childInput struct {
	Scenario  string             `json:"scenario"`
	Pods      map[string]podSpec `json:"pods"` // "snapshot", "drill", "probe"
	Bucket    string             `json:"bucket"`
	Shard     string             `json:"shard"`
	EtcdHost  string             `json:"etcdHost"` // the in-cluster name the snapshot job dials
	EtcdImage string             `json:"etcdImage"`
	GcloudImg string             `json:"gcloudImage"`
	EtcdTools string             `json:"etcdTools"` // etcd, etcdctl, etcdutl
	FakeGCS   string             `json:"fakeGCS"`
	GcloudBin string             `json:"gcloudBin"` // a directory of the gcloud image's tools
	WorkDir   string             `json:"workDir"`
	Keys      int                `json:"keys"`
	Result    string             `json:"result"`
}

// childResult is what it hands back.
type childResult struct {
	Runs  []podRun `json:"runs"`
	Error string   `json:"error,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// gcsPort is fake-gcs-server's port inside the private network namespace.
const gcsPort = 4443

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

func scenario(in childInput, res *childResult) error {
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("bringing up lo: %w", err)
	}
	// The etcd image's tools at the path its containers call them by.
	if err := syscall.Mount(in.EtcdTools, "/usr/local/bin", "", syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("bind-mounting the etcd tools on /usr/local/bin: %w", err)
	}
	// The in-cluster Service name resolves to the shard's etcd on loopback.
	hosts := filepath.Join(in.WorkDir, "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n127.0.0.1 "+in.EtcdHost+"\n"), 0o644); err != nil {
		return err
	}
	if err := syscall.Mount(hosts, "/etc/hosts", "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting /etc/hosts: %w", err)
	}

	gcs := exec.Command(in.FakeGCS, "-scheme", "http", "-host", "127.0.0.1", "-port", fmt.Sprint(gcsPort),
		"-backend", "memory", "-public-host", fmt.Sprintf("127.0.0.1:%d", gcsPort),
		"-external-url", fmt.Sprintf("http://127.0.0.1:%d", gcsPort), "-log-level", "warn")
	gcsLog := &bytes.Buffer{}
	gcs.Stdout, gcs.Stderr = gcsLog, gcsLog
	gcs.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := gcs.Start(); err != nil {
		return fmt.Errorf("fake-gcs-server: %w", err)
	}
	defer func() { _ = gcs.Process.Kill(); _ = gcs.Wait() }()
	gcsURL := fmt.Sprintf("http://127.0.0.1:%d", gcsPort)
	if err := waitHTTP(gcsURL+"/storage/v1/b", 30*time.Second); err != nil {
		return fmt.Errorf("fake-gcs-server did not answer: %w\n%s", err, gcsLog)
	}
	if err := postJSON(gcsURL+"/storage/v1/b?project=railgrid-test", `{"name":"`+in.Bucket+`"}`); err != nil {
		return fmt.Errorf("creating the bucket: %w", err)
	}

	token := filepath.Join(in.WorkDir, "token")
	if err := os.WriteFile(token, []byte("test-access-token\n"), 0o644); err != nil {
		return err
	}
	runner := podRunner{timeout: 4 * time.Minute, dir: in.WorkDir, images: func(ref string) (image, error) {
		switch ref {
		case in.EtcdImage:
			// Distroless: the three binaries and nothing else.
			return image{path: "/usr/local/bin"}, nil
		case in.GcloudImg:
			// In place of GKE: the emulator's endpoint and a fixed token instead of
			// Workload Identity, and no update checks or prompts.
			return image{path: in.GcloudBin, env: []string{
				"CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE=" + gcsURL + "/",
				"CLOUDSDK_AUTH_ACCESS_TOKEN_FILE=" + token,
				"CLOUDSDK_CORE_PROJECT=railgrid-test",
				"CLOUDSDK_CORE_DISABLE_PROMPTS=1",
				"CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK=1",
				"CLOUDSDK_CORE_DISABLE_USAGE_REPORTING=1",
			}}, nil
		}
		return image{}, fmt.Errorf("no tool set for image %s", ref)
	}}
	runPod := func(name string) (podRun, error) {
		run, err := runner.run(name, in.Pods[name])
		res.Runs = append(res.Runs, run)
		return run, err
	}
	upload := func(object string, content []byte) error {
		return postBytes(fmt.Sprintf("%s/upload/storage/v1/b/%s/o?uploadType=media&name=%s", gcsURL, in.Bucket, object), content)
	}

	switch in.Scenario {
	case "pass":
		// An older, unusable object: the drill must take the newest one.
		if err := upload(in.Shard+"/20000101T000000Z.db", []byte("an old snapshot the drill must not pick")); err != nil {
			return err
		}
		etcd, err := startShardEtcd(in)
		if err != nil {
			return err
		}
		for i := 0; i < in.Keys; i++ {
			put := exec.Command("/usr/local/bin/etcdctl", "--endpoints=http://127.0.0.1:2379", "put", fmt.Sprintf("/registry/drill/key-%03d", i), fmt.Sprintf("value-%d", i))
			if out, err := put.CombinedOutput(); err != nil {
				etcd.stop()
				return fmt.Errorf("etcdctl put: %v: %s", err, out)
			}
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
		if err := upload(in.Shard+"/29991231T235959Z.db", bytes.Repeat([]byte("not a bolt database\n"), 2048)); err != nil {
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
	}
	return fmt.Errorf("unknown scenario %q", in.Scenario)
}

// shardEtcd is the shard's live etcd, on the address the in-cluster name resolves to.
type shardEtcd struct {
	cmd *exec.Cmd
	log *bytes.Buffer
}

func startShardEtcd(in childInput) (*shardEtcd, error) {
	dir := filepath.Join(in.WorkDir, "shard-etcd")
	cmd := exec.Command("/usr/local/bin/etcd", "--name=shard", "--data-dir="+dir,
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

func postJSON(url, body string) error {
	return post(url, "application/json", []byte(body))
}

func postBytes(url string, body []byte) error {
	return post(url, "application/octet-stream", body)
}

func post(url, contentType string, body []byte) error {
	resp, err := http.Post(url, contentType, bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		buf := &bytes.Buffer{}
		_, _ = buf.ReadFrom(resp.Body)
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, strings.TrimSpace(buf.String()))
	}
	return nil
}
