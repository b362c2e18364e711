//go:build linux

package snapshots

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The parts of a pod spec the runner uses, decoded from the program's objects.
type envVar struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `json:"fieldPath"`
		} `json:"fieldRef"`
	} `json:"valueFrom,omitempty"`
}

type volumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly"`
}

type container struct {
	Name          string        `json:"name"`
	Image         string        `json:"image"`
	Command       []string      `json:"command"`
	Args          []string      `json:"args"`
	Env           []envVar      `json:"env"`
	RestartPolicy string        `json:"restartPolicy"`
	VolumeMounts  []volumeMount `json:"volumeMounts"`

	SecurityContext struct {
		ReadOnlyRootFilesystem bool `json:"readOnlyRootFilesystem"`
	} `json:"securityContext"`
}

type podSpec struct {
	InitContainers  []container `json:"initContainers"`
	Containers      []container `json:"containers"`
	SecurityContext struct {
		RunAsUser  *uint32 `json:"runAsUser"`
		RunAsGroup *uint32 `json:"runAsGroup"`
		FSGroup    *uint32 `json:"fsGroup"`
	} `json:"securityContext"`
	Volumes []volume `json:"volumes"`
}

type volume struct {
	Name                  string    `json:"name"`
	EmptyDir              *struct{} `json:"emptyDir,omitempty"`
	PersistentVolumeClaim *struct {
		ClaimName string `json:"claimName"`
	} `json:"persistentVolumeClaim,omitempty"`
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

// image is a container image unpacked: its root filesystem and the environment its
// configuration sets (PATH).
type image struct {
	root string
	env  []string
}

// podRunner runs a pod's containers as the kubelet and the runtime would: init
// containers in order (a native sidecar, restartPolicy Always, is started and left
// running), then the main containers, each in its image's root filesystem, as the pod's
// user, in a mount namespace of its own (see runContainer): a container that declares
// readOnlyRootFilesystem gets every mount read-only except its volume mounts and the
// pod's /dev/shm. Each emptyDir volume is a fresh tmpfs shared by the pod's containers;
// a claim is the directory claims names for it. A failed init container stops the pod.
type podRunner struct {
	images  func(ref string) (image, error)
	timeout time.Duration
	dir     string // holds each pod's volumes
	// hosts is the /etc/hosts every container gets, as the kubelet mounts one.
	hosts string
	// claims are the directories of the volume claims, by claim name.
	claims map[string]string
}

func (p podRunner) run(name string, spec podSpec) (podRun, error) {
	start := time.Now()
	out := podRun{Pod: name}
	uid, gid, fsGroup := podIDs(spec)
	volumes, mounts, err := p.mountVolumes(name, spec, fsGroup)
	pod := name
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
		cmd, buf, err := p.command(pod, c, uid, gid, fsGroup, volumes)
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

// runningPod is a pod of one long-running container (an etcd member), started in the
// background.
type runningPod struct {
	name    string
	cmd     *exec.Cmd
	out     *bytes.Buffer
	mounts  []string
	stopped bool
}

// start starts a pod of one container and returns while it runs.
func (p podRunner) start(name string, spec podSpec) (*runningPod, error) {
	if len(spec.InitContainers) > 0 || len(spec.Containers) != 1 {
		return nil, fmt.Errorf("pod %s: start runs one container and no init containers", name)
	}
	uid, gid, fsGroup := podIDs(spec)
	volumes, mounts, err := p.mountVolumes(name, spec, fsGroup)
	r := &runningPod{name: name, mounts: mounts}
	if err != nil {
		r.unmount()
		return nil, err
	}
	cmd, buf, err := p.command(name, spec.Containers[0], uid, gid, fsGroup, volumes)
	if err != nil {
		r.unmount()
		return nil, err
	}
	r.cmd, r.out = cmd, buf
	if err := cmd.Start(); err != nil {
		r.unmount()
		return nil, err
	}
	return r, nil
}

// stop ends the pod as the kubelet does, SIGTERM then SIGKILL after the grace period,
// and returns its output.
func (r *runningPod) stop() string {
	if r.stopped {
		return r.out.String()
	}
	r.stopped = true
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	r.unmount()
	return r.out.String()
}

func (r *runningPod) unmount() {
	for _, m := range r.mounts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	r.mounts = nil
}

// podIDs are the pod's user, group and fsGroup (root, and the group, when unset).
func podIDs(spec podSpec) (uid, gid, fsGroup uint32) {
	if u := spec.SecurityContext.RunAsUser; u != nil {
		uid = *u
	}
	if g := spec.SecurityContext.RunAsGroup; g != nil {
		gid = *g
	}
	fsGroup = gid
	if g := spec.SecurityContext.FSGroup; g != nil {
		fsGroup = *g
	}
	return uid, gid, fsGroup
}

// shmVolume is the key of the pod's /dev/shm among its volumes: the runtime gives every
// pod a writable /dev/shm of its own, apart from any container's root filesystem.
const shmVolume = "/dev/shm"

// mountVolumes mounts a fresh tmpfs for every emptyDir of the pod (owned by the pod's
// fsGroup, as the kubelet makes it) and for its /dev/shm, in the pod's directory, and
// creates the containers' mount points, which a read-only root would not let the
// container create. It returns the source directory of each volume by name.
func (p podRunner) mountVolumes(pod string, spec podSpec, fsGroup uint32) (map[string]string, []string, error) {
	var mounted []string
	sources := map[string]string{}
	declared := map[string]bool{}
	for _, v := range spec.Volumes {
		switch {
		case v.EmptyDir != nil:
			declared[v.Name] = true
		case v.PersistentVolumeClaim != nil:
			dir, ok := p.claims[v.PersistentVolumeClaim.ClaimName]
			if !ok {
				return sources, mounted, fmt.Errorf("volume %s: no claim %s", v.Name, v.PersistentVolumeClaim.ClaimName)
			}
			sources[v.Name] = dir
		default:
			return sources, mounted, fmt.Errorf("volume %s: only emptyDir and claim volumes are supported", v.Name)
		}
	}
	for _, c := range append(append([]container{}, spec.InitContainers...), spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if _, claim := sources[m.Name]; !declared[m.Name] && !claim {
				return sources, mounted, fmt.Errorf("container %s mounts %s, which the pod does not declare", c.Name, m.Name)
			}
		}
	}
	options := map[string]string{shmVolume: "mode=1777,size=64m"} // as the runtime mounts it
	for name := range declared {
		options[name] = fmt.Sprintf("mode=2775,gid=%d,size=512m", fsGroup)
	}
	for name, opts := range options {
		dir := filepath.Join(p.dir, pod, "volumes", name)
		if name == shmVolume {
			dir = filepath.Join(p.dir, pod, "shm")
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return sources, mounted, err
		}
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
			return sources, mounted, fmt.Errorf("tmpfs for volume %s: %w", name, err)
		}
		mounted = append(mounted, dir)
		sources[name] = dir
	}
	return sources, mounted, nil
}

// command is the container's process: this test binary, re-executed in a new mount
// namespace to set up the container's root filesystem, mounts and user (runContainer),
// which then executes the container's command. The environment is the runtime's (HOME,
// HOSTNAME the pod's name), the image's, then the container's, with $(VAR) in the
// command expanded from the container's variables as the kubelet expands them.
func (p podRunner) command(pod string, c container, uid, gid, fsGroup uint32, volumes map[string]string) (*exec.Cmd, *bytes.Buffer, error) {
	img, err := p.images(c.Image)
	if err != nil {
		return nil, nil, err
	}
	vars := map[string]string{}
	var containerEnv []string
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
				return nil, nil, fmt.Errorf("env %s: only values and the pod's metadata.name are supported", e.Name)
			}
			value = pod
		}
		vars[e.Name] = value
		containerEnv = append(containerEnv, e.Name+"="+value)
	}
	var argv []string
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		argv = append(argv, expandVars(a, vars))
	}
	if len(argv) == 0 {
		return nil, nil, fmt.Errorf("no command (the image's entrypoint is not modelled)")
	}
	env := append([]string{"HOME=/", "HOSTNAME=" + pod}, img.env...)
	env = append(env, containerEnv...)
	cs := containerSpec{
		Root: img.root, Hosts: p.hosts,
		UID: uid, GID: gid, Groups: []uint32{fsGroup},
		ReadOnlyRoot: c.SecurityContext.ReadOnlyRootFilesystem,
		Mounts:       []mountSpec{{Source: volumes[shmVolume], Target: shmVolume}},
		Argv:         argv, Env: env,
	}
	for _, m := range c.VolumeMounts {
		cs.Mounts = append(cs.Mounts, mountSpec{Source: volumes[m.Name], Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	raw, err := json.Marshal(cs)
	if err != nil {
		return nil, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	buf := &bytes.Buffer{}
	cmd := exec.Command(self)
	cmd.Env = []string{envContainer + "=" + string(raw)}
	cmd.Dir = "/"
	cmd.Stdout = buf
	cmd.Stderr = buf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Unshareflags: syscall.CLONE_NEWNS,
		Setpgid:      true,
		Pdeathsig:    syscall.SIGKILL,
	}
	return cmd, buf, nil
}

// envContainer holds the containerSpec of a re-executed test binary that is to become
// one container.
const envContainer = "RAILGRID_SNAPSHOTS_CONTAINER"

// expandVars replaces $(NAME) with the container's variable NAME, leaves a reference to
// an unknown variable as it is, and turns $$ into $, as the kubelet does.
func expandVars(s string, vars map[string]string) string {
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			out.WriteByte(s[i])
			continue
		}
		if s[i+1] == '$' {
			out.WriteByte('$')
			i++
			continue
		}
		if s[i+1] == '(' {
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				if v, ok := vars[s[i+2:i+2+end]]; ok {
					out.WriteString(v)
					i += 2 + end
					continue
				}
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

// containerSpec is what runContainer sets up before it executes the container's command.
type containerSpec struct {
	// Root is the image's unpacked root filesystem; Hosts the file mounted at /etc/hosts.
	Root         string      `json:"root"`
	Hosts        string      `json:"hosts"`
	UID          uint32      `json:"uid"`
	GID          uint32      `json:"gid"`
	Groups       []uint32    `json:"groups"`
	ReadOnlyRoot bool        `json:"readOnlyRoot"`
	Mounts       []mountSpec `json:"mounts"`
	Argv         []string    `json:"argv"`
	Env          []string    `json:"env"`
}

type mountSpec struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly"`
}

// runContainer becomes one container, as the runtime makes it, in the mount namespace
// that the runner unshared for it (private: nothing here is seen outside): it mounts the
// image's root filesystem with each volume at its mount path and, for a read-only root
// filesystem, makes every mount read-only (mount_setattr(2), recursive) and then its
// volume mounts writable again, and changes its root to it. Then it drops to the pod's
// user and groups, which also drops every capability, and executes the command. It
// returns only on failure.
func runContainer(raw string) int {
	// The parent-death signal is the calling thread's and is cleared by setuid: it is
	// set again on the thread that executes the command.
	runtime.LockOSThread()
	var c containerSpec
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintf(os.Stderr, "[test: container spec: %v]\n", err)
		return 126
	}
	if err := c.enter(); err != nil {
		fmt.Fprintf(os.Stderr, "[test: setting up the container: %v]\n", err)
		return 126
	}
	err := syscall.Exec(c.Argv[0], c.Argv, c.Env)
	fmt.Fprintf(os.Stderr, "[test: exec %s: %v]\n", c.Argv[0], err)
	return 127
}

// enter makes this process the container: the image's root filesystem mounted on
// itself, with what the runtime adds (a /dev of the usual devices, /proc, the pod's
// /dev/shm, /etc/hosts) and the volume mounts; all of it read-only but the volumes and
// /dev/shm when the container asks for a read-only root; then chroot(2) into it.
func (c *containerSpec) enter() error {
	root := c.Root
	if err := syscall.Mount(root, root, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("binding the image's root: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", filepath.Join(root, "dev"), "tmpfs", syscall.MS_NOSUID, "mode=755,size=64k"); err != nil {
		return fmt.Errorf("/dev: %w", err)
	}
	for _, dev := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if err := bindFile("/dev/"+dev, filepath.Join(root, "dev", dev)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o555); err != nil {
		return err
	}
	if err := syscall.Mount("proc", filepath.Join(root, "proc"), "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("/proc: %w", err)
	}
	if c.Hosts != "" {
		if err := bindFile(c.Hosts, filepath.Join(root, "etc", "hosts")); err != nil {
			return err
		}
	}
	for _, m := range c.Mounts {
		target := filepath.Join(root, m.Target)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount(m.Source, target, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding %s at %s: %w", m.Source, m.Target, err)
		}
	}
	if c.ReadOnlyRoot {
		if err := unix.MountSetattr(unix.AT_FDCWD, root, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("making the root filesystem read-only: %w", err)
		}
	}
	for _, m := range c.Mounts {
		attr := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		if m.ReadOnly {
			attr = &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, filepath.Join(root, m.Target), 0, attr); err != nil {
			return fmt.Errorf("mount %s: %w", m.Target, err)
		}
	}
	if err := syscall.Chroot(root); err != nil {
		return fmt.Errorf("chroot %s: %w", root, err)
	}
	if err := syscall.Chdir("/"); err != nil {
		return err
	}
	if !strings.Contains(c.Argv[0], "/") {
		found, err := lookIn(envValue(c.Env, "PATH"), c.Argv[0])
		if err != nil {
			return err
		}
		c.Argv[0] = found
	}
	groups := make([]int, 0, len(c.Groups))
	for _, g := range c.Groups {
		groups = append(groups, int(g))
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(int(c.GID)); err != nil {
		return fmt.Errorf("setgid: %w", err)
	}
	if err := syscall.Setuid(int(c.UID)); err != nil {
		return fmt.Errorf("setuid: %w", err)
	}
	return unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0)
}

// bindFile mounts the file src at target, creating an empty file there to mount on.
func bindFile(src, target string) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	if f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o644); err == nil {
		f.Close()
	} else {
		return err
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding %s at %s: %w", src, target, err)
	}
	return nil
}

func envValue(env []string, name string) string {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, name+"="); ok {
			return v
		}
	}
	return ""
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
