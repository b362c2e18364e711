package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// GCSEmulator is fake-gcs-server (hack/build-tools.sh fakegcs) standing in for Cloud
// Storage: plain HTTP on one address, objects in memory.
type GCSEmulator struct {
	// URL is where it serves, http://<address>:<port>.
	URL string
	cmd *exec.Cmd
	log *bytes.Buffer
}

// StartGCSEmulator starts fake-gcs-server listening on host:port only (a pod reaches a
// server of the machine on the node bridge's address; nothing else is exposed) and waits
// until it answers.
func StartGCSEmulator(bin, host string, port int) (*GCSEmulator, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	e := &GCSEmulator{URL: "http://" + addr, log: &bytes.Buffer{}}
	// -public-host and -external-url: the URLs it hands back (resumable uploads,
	// downloads) point at the same address the clients use.
	e.cmd = exec.Command(bin, "-scheme", "http", "-host", host, "-port", strconv.Itoa(port),
		"-backend", "memory", "-public-host", addr, "-external-url", e.URL, "-log-level", "warn")
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	setParentDeathSignal(e.cmd)
	if err := e.cmd.Start(); err != nil {
		return nil, fmt.Errorf("fake-gcs-server: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(e.URL + "/storage/v1/b")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return e, nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			e.Stop()
			return nil, fmt.Errorf("fake-gcs-server did not answer at %s: %v\n%s", e.URL, err, e.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop kills the emulator and waits for it.
func (e *GCSEmulator) Stop() {
	_ = e.cmd.Process.Kill()
	_ = e.cmd.Wait()
}

// Log is what the emulator wrote.
func (e *GCSEmulator) Log() string { return e.log.String() }

// CreateBucket creates a bucket.
func (e *GCSEmulator) CreateBucket(ctx context.Context, name string) error {
	return e.post(ctx, "/storage/v1/b?project=railgrid-test", "application/json", []byte(`{"name":"`+name+`"}`))
}

// Upload writes an object.
func (e *GCSEmulator) Upload(ctx context.Context, bucket, object string, content []byte) error {
	return e.post(ctx, fmt.Sprintf("/upload/storage/v1/b/%s/o?uploadType=media&name=%s", bucket, url.QueryEscape(object)),
		"application/octet-stream", content)
}

// Objects lists the names of a bucket's objects under prefix, in the emulator's order
// (by name).
func (e *GCSEmulator) Objects(ctx context.Context, bucket, prefix string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/storage/v1/b/%s/o?prefix=%s", e.URL, bucket, url.QueryEscape(prefix)), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("listing gs://%s/%s: %s: %s", bucket, prefix, resp.Status, strings.TrimSpace(string(body)))
	}
	var list struct {
		Items []struct {
			Name string `json:"name"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Name)
	}
	return names, nil
}

func (e *GCSEmulator) post(ctx context.Context, path, contentType string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// GCSEmulatorEnv is what gcloud needs, beside what the jobs set, to use a GCS emulator
// at endpoint (http://<address>:<port>) in place of Cloud Storage with Workload
// Identity: the endpoint; no credentials at all (the emulator checks none, and there is
// no token file in a pod); a project; and nothing that would reach for the network
// elsewhere: no metadata-server probe (a pod's packets to 169.254.169.254 are dropped on
// the machine, and gcloud would wait for each probe to time out), no usage reports, no
// update check, no prompt. tests/snapshots runs the jobs with exactly this.
func GCSEmulatorEnv(endpoint string) [][2]string {
	return [][2]string{
		{"CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE", strings.TrimSuffix(endpoint, "/") + "/"},
		{"CLOUDSDK_AUTH_DISABLE_CREDENTIALS", "True"},
		{"CLOUDSDK_CORE_PROJECT", "railgrid-test"},
		{"CLOUDSDK_CORE_CHECK_GCE_METADATA", "False"},
		{"CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "True"},
		{"CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "True"},
		{"CLOUDSDK_CORE_DISABLE_PROMPTS", "1"},
	}
}
