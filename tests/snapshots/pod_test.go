package snapshots

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The parts of a pod spec the runner uses, decoded from the program's CronJob.
type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type volumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
}

type container struct {
	Name          string        `json:"name"`
	Image         string        `json:"image"`
	Command       []string      `json:"command"`
	Args          []string      `json:"args"`
	Env           []envVar      `json:"env"`
	RestartPolicy string        `json:"restartPolicy"`
	VolumeMounts  []volumeMount `json:"volumeMounts"`
}

type podSpec struct {
	InitContainers  []container `json:"initContainers"`
	Containers      []container `json:"containers"`
	SecurityContext struct {
		RunAsUser  *uint32 `json:"runAsUser"`
		RunAsGroup *uint32 `json:"runAsGroup"`
		FSGroup    *uint32 `json:"fsGroup"`
	} `json:"securityContext"`
	Volumes []struct {
		Name     string    `json:"name"`
		EmptyDir *struct{} `json:"emptyDir"`
	} `json:"volumes"`
}

// containerRun is what one container did.
type containerRun struct {
	Name   string `json:"name"`
	Exit   int    `json:"exit"` // -1: killed (a sidecar at the end, or a timeout)
	Output string `json:"output"`
	Ran    bool   `json:"ran"`
}

// podRun is what one pod did, container by container, in the order they started.
type podRun struct {
	Pod        string         `json:"pod"`
	Containers []containerRun `json:"containers"`
	Seconds    float64        `json:"seconds"`
}

// failed is the first container that exited non-zero, if any.
func (r podRun) failed() (containerRun, bool) {
	for _, c := range r.Containers {
		if c.Ran && c.Exit != 0 && c.Exit != -1 {
			return c, true
		}
	}
	return containerRun{}, false
}

func (r podRun) container(name string) containerRun {
	for _, c := range r.Containers {
		if c.Name == name {
			return c
		}
	}
	return containerRun{Name: name}
}

// image is what a container image carries: the PATH its processes get and the
// environment the test adds (GCS endpoint and credentials, in place of GKE's).
type image struct {
	path string
	env  []string
}

// podRunner runs a pod's containers as the kubelet would: init containers in order
// (a native sidecar, restartPolicy Always, is started and left running), then the main
// containers, each with only its image's tools on PATH, as the pod's user, with each
// emptyDir volume a fresh tmpfs at its mount path. A failed init container stops the pod.
type podRunner struct {
	images  func(ref string) (image, error)
	timeout time.Duration
}

func (p podRunner) run(name string, spec podSpec) (podRun, error) {
	start := time.Now()
	out := podRun{Pod: name}
	uid, gid := uint32(0), uint32(0)
	if u := spec.SecurityContext.RunAsUser; u != nil {
		uid = *u
	}
	if g := spec.SecurityContext.RunAsGroup; g != nil {
		gid = *g
	}
	fsGroup := gid
	if g := spec.SecurityContext.FSGroup; g != nil {
		fsGroup = *g
	}
	mounts, err := p.mountVolumes(spec, fsGroup)
	defer func() {
		for _, m := range mounts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}()
	if err != nil {
		return out, err
	}
	var sidecars []*exec.Cmd
	var sidecarOutputs []*bytes.Buffer
	defer func() {
		for i, cmd := range sidecars {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			out.Containers = append(out.Containers, containerRun{Name: spec.InitContainers[i].Name + " (sidecar)", Exit: -1, Output: tail(sidecarOutputs[i].String()), Ran: true})
		}
	}()
	all := append(append([]container{}, spec.InitContainers...), spec.Containers...)
	for i, c := range all {
		cmd, buf, err := p.command(c, uid, gid, fsGroup)
		if err != nil {
			return out, fmt.Errorf("container %s: %w", c.Name, err)
		}
		if i < len(spec.InitContainers) && c.RestartPolicy == "Always" {
			if err := cmd.Start(); err != nil {
				return out, fmt.Errorf("sidecar %s: %w", c.Name, err)
			}
			sidecars = append(sidecars, cmd)
			sidecarOutputs = append(sidecarOutputs, buf)
			continue
		}
		exit := runWithTimeout(cmd, p.timeout)
		out.Containers = append(out.Containers, containerRun{Name: c.Name, Exit: exit, Output: tail(buf.String()), Ran: true})
		if exit != 0 {
			break
		}
	}
	out.Seconds = time.Since(start).Seconds()
	return out, nil
}

// mountVolumes mounts a fresh tmpfs at every emptyDir's mount path, owned by the pod's
// fsGroup as the kubelet makes it.
func (p podRunner) mountVolumes(spec podSpec, fsGroup uint32) ([]string, error) {
	paths := map[string]string{}
	for _, c := range append(append([]container{}, spec.InitContainers...), spec.Containers...) {
		for _, m := range c.VolumeMounts {
			paths[m.Name] = m.MountPath
		}
	}
	var mounted []string
	for _, v := range spec.Volumes {
		if v.EmptyDir == nil {
			return mounted, fmt.Errorf("volume %s: only emptyDir volumes are supported", v.Name)
		}
		path := paths[v.Name]
		if path == "" {
			continue
		}
		if err := os.MkdirAll(path, 0o755); err != nil {
			return mounted, err
		}
		if err := syscall.Mount("tmpfs", path, "tmpfs", 0, fmt.Sprintf("mode=2775,gid=%d,size=512m", fsGroup)); err != nil {
			return mounted, fmt.Errorf("tmpfs at %s: %w", path, err)
		}
		mounted = append(mounted, path)
	}
	return mounted, nil
}

func (p podRunner) command(c container, uid, gid, fsGroup uint32) (*exec.Cmd, *bytes.Buffer, error) {
	img, err := p.images(c.Image)
	if err != nil {
		return nil, nil, err
	}
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 {
		return nil, nil, fmt.Errorf("no command (the image's entrypoint is not modelled)")
	}
	bin := argv[0]
	if !strings.Contains(bin, "/") {
		if bin, err = lookIn(img.path, bin); err != nil {
			return nil, nil, err
		}
	}
	env := []string{"PATH=" + img.path, "HOME=/", "HOSTNAME=" + c.Name}
	env = append(env, img.env...)
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	buf := &bytes.Buffer{}
	cmd := exec.Command(bin, argv[1:]...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.Stdout = buf
	cmd.Stderr = buf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{fsGroup}},
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	return cmd, buf, nil
}

// lookIn finds a command in the directories of an image's PATH only.
func lookIn(path, name string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		candidate := filepath.Join(dir, name)
		if st, err := os.Stat(candidate); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("%s: not found in the image's PATH %s", name, path)
}

// runWithTimeout runs cmd and returns its exit code; 137 when it was killed.
func runWithTimeout(cmd *exec.Cmd, timeout time.Duration) int {
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(cmd.Stderr, "cannot start: %v\n", err)
		return 127
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			return 0
		}
		if exitErr, ok := err.(*exec.ExitError); ok && exitErr.ExitCode() >= 0 {
			return exitErr.ExitCode()
		}
		return 137 // killed by a signal
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		fmt.Fprintf(cmd.Stdout, "\n[test: killed after %s]\n", timeout)
		return 137
	}
}

// tail keeps the end of a long output.
func tail(s string) string {
	const max = 6000
	if len(s) > max {
		return "..." + s[len(s)-max:]
	}
	return s
}
