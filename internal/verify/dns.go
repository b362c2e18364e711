package verify

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// PodSpec is a short-lived probe: one container that runs Command (or, without it, the
// image's entrypoint with Args) and exits.
type PodSpec struct {
	Image   string
	Command []string
	Args    []string
	// Name is the probe's role, the container's name and the start of the Pod's
	// (dnscheck when empty).
	Name string
	// Namespace is where the Pod runs (the runner's namespace when empty): a probe that
	// mounts a Secret runs beside it.
	Namespace string
	// Files are mounted read-only, readable by the probe's user only.
	Files []PodFile
	// MemoryLimit and CPULimit are the container's limits (32Mi and 100m when empty).
	MemoryLimit, CPULimit string
}

// PodFile is one key of a Secret or a ConfigMap, mounted at Dir/Key.
type PodFile struct {
	Dir                    string
	Secret, ConfigMap, Key string
}

// PodRunner runs a probe Pod inside the cluster and returns what it printed. It must
// remove the Pod before returning, whatever happened.
type PodRunner interface {
	Run(ctx context.Context, spec PodSpec) (logs string, err error)
}

// Markers around each hostname's nslookup output.
const (
	dnsBeginMarker = "@@@ begin "
	dnsEndMarker   = "@@@ end "
)

// dnsScript resolves every argument with nslookup (A records), each between markers, and
// always exits 0 so that an unresolvable name is reported per host, not as a pod failure.
const dnsScript = `for h in "$@"; do echo "` + dnsBeginMarker + `$h"; nslookup -type=A "$h" 2>&1; echo "` + dnsEndMarker + `$h rc=$?"; done`

// DNSProbe is the probe Pod that resolves hosts from inside the cluster.
func DNSProbe(image string, hosts []string) PodSpec {
	return PodSpec{Image: image, Command: append([]string{"/bin/sh", "-c", dnsScript, "dnscheck"}, hosts...)}
}

// checkSplitHorizon resolves every shard hostname from a Pod inside the cluster; each
// must answer exactly the ClusterIP of the shard's owned Service, never the edge. The
// hub and providers follow these names with client certificates, which a TLS-terminating
// edge strips. It asks again until every answer is right or the check's time is up: on
// kind the answers reach CoreDNS through a ConfigMap volume, which the kubelet updates
// up to a minute or more after `up` wrote it.
func checkSplitHorizon(ctx context.Context, o *Options) []Result {
	return poll(ctx, o.Interval, func(ctx context.Context) []Result { return resolveShardHostnames(ctx, o) })
}

// resolveShardHostnames is one attempt of checkSplitHorizon: one probe Pod.
func resolveShardHostnames(ctx context.Context, o *Options) []Result {
	shards := o.Config.Kcp.AllShards()
	hosts := make([]string, len(shards))
	for i, s := range shards {
		hosts[i] = s.Hostname
	}
	logs, runErr := o.Pods.Run(ctx, DNSProbe(o.DNSCheckImage, hosts))
	answers := parseNslookup(logs)

	out := make([]Result, 0, len(shards))
	for _, s := range shards {
		item := s.Hostname
		svcProblem := ownedServiceProblem(ctx, o.Kube, s)
		ans, found := answers[s.Hostname]
		switch {
		case !found && runErr != nil:
			out = append(out, fail(CheckSplitHorizon, item, "DNS probe pod failed: %v", runErr))
		case !found:
			out = append(out, fail(CheckSplitHorizon, item, "DNS probe printed no answer for this name"))
		case len(ans.ips) == 0:
			out = append(out, fail(CheckSplitHorizon, item, "does not resolve inside the cluster (%s); want %s, the ClusterIP of Service %s", ans.reason(), s.ClusterIP, ownedService(s)))
		case len(ans.ips) != 1 || ans.ips[0] != s.ClusterIP:
			out = append(out, fail(CheckSplitHorizon, item, "resolves to %s inside the cluster, want only %s (the ClusterIP of Service %s): the answer is not the split-horizon record, so in-cluster clients reach the edge and lose their client certificate (401)",
				strings.Join(ans.ips, ", "), s.ClusterIP, ownedService(s)))
		case svcProblem != "":
			out = append(out, fail(CheckSplitHorizon, item, "resolves to %s, but %s", s.ClusterIP, svcProblem))
		default:
			out = append(out, pass(CheckSplitHorizon, item, "resolves to %s, the ClusterIP of Service %s", s.ClusterIP, ownedService(s)))
		}
	}
	return out
}

func ownedService(s config.NamedShard) string {
	return naming.NamespaceKcp + "/" + naming.OwnedServiceName(s.Name)
}

// ownedServiceProblem checks that the owned Service exists with the configured ClusterIP.
func ownedServiceProblem(ctx context.Context, kube kubernetes.Interface, s config.NamedShard) string {
	svc, err := kube.CoreV1().Services(naming.NamespaceKcp).Get(ctx, naming.OwnedServiceName(s.Name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("Service %s does not exist", ownedService(s))
	case err != nil:
		return fmt.Sprintf("Service %s cannot be read: %v", ownedService(s), err)
	case svc.Spec.ClusterIP != s.ClusterIP:
		return fmt.Sprintf("Service %s has ClusterIP %s, not the configured %s", ownedService(s), svc.Spec.ClusterIP, s.ClusterIP)
	}
	return ""
}

type nslookupAnswer struct {
	ips    []string
	errors []string
	rc     string
}

func (a nslookupAnswer) reason() string {
	parts := slices.Clone(a.errors)
	if a.rc != "" && a.rc != "0" {
		parts = append(parts, "nslookup exit status "+a.rc)
	}
	if len(parts) == 0 {
		return "no A record"
	}
	return strings.Join(parts, "; ")
}

var (
	addressLine = regexp.MustCompile(`^Address(?:\s+\d+)?:\s*(\S+)`)
	rcSuffix    = regexp.MustCompile(` rc=(\d+)$`)
)

// parseNslookup reads the probe's output: per host, the IPv4 addresses nslookup answered
// (busybox and bind formats) and any error lines. Addresses before the first "Name:"
// line are the DNS server's, and those under a search-domain expansion of the host
// belong to another name; both are skipped.
func parseNslookup(logs string) map[string]nslookupAnswer {
	out := map[string]nslookupAnswer{}
	var (
		host    string
		cur     nslookupAnswer
		inHost  bool
		pastHdr bool
	)
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, dnsBeginMarker):
			host, cur, inHost, pastHdr = strings.TrimPrefix(line, dnsBeginMarker), nslookupAnswer{}, true, false
		case strings.HasPrefix(line, dnsEndMarker) && inHost:
			if m := rcSuffix.FindStringSubmatch(line); m != nil {
				cur.rc = m[1]
			}
			out[host] = cur
			inHost = false
		case !inHost || line == "":
		case strings.HasPrefix(line, "Name:"):
			// Answers follow; those for a search-domain expansion of the host
			// (host.<search domain>) are not answers for the host itself.
			name := strings.TrimSpace(strings.TrimPrefix(line, "Name:"))
			pastHdr = !strings.HasPrefix(name, host+".") || name == host+"."
		case strings.HasPrefix(line, "**") || strings.Contains(line, "can't find") || strings.Contains(line, "NXDOMAIN") || strings.Contains(line, "timed out"):
			cur.errors = append(cur.errors, strings.Trim(line, "* "))
		case pastHdr:
			if m := addressLine.FindStringSubmatch(line); m != nil {
				if ip, err := netip.ParseAddr(m[1]); err == nil && ip.Is4() && !slices.Contains(cur.ips, ip.String()) {
					cur.ips = append(cur.ips, ip.String())
				}
			}
		}
	}
	return out
}

// KubePodRunner runs probe Pods with a Kubernetes client.
type KubePodRunner struct {
	Client    kubernetes.Interface
	Namespace string
	// PollInterval between reads of the Pod's phase (default 1s).
	PollInterval time.Duration
	// DeleteTimeout bounds the clean-up, which runs even when ctx has ended (default 30s).
	DeleteTimeout time.Duration
	// Customize, when set, changes each Pod before it is created (a test points a name
	// at another address with hostAliases, for example).
	Customize func(*corev1.Pod)
}

const probeContainer = "dnscheck"

func (s PodSpec) container() string {
	if s.Name != "" {
		return s.Name
	}
	return probeContainer
}

// Run creates the Pod (restartPolicy Never, unprivileged, no service account token),
// waits until it has finished, reads its logs and deletes it, also when ctx ends first
// or anything fails.
func (r *KubePodRunner) Run(ctx context.Context, spec PodSpec) (string, error) {
	interval := r.PollInterval
	if interval <= 0 {
		interval = time.Second
	}
	deleteTimeout := r.DeleteTimeout
	if deleteTimeout <= 0 {
		deleteTimeout = 30 * time.Second
	}
	namespace := r.Namespace
	if spec.Namespace != "" {
		namespace = spec.Namespace
	}
	pods := r.Client.CoreV1().Pods(namespace)
	pod := probePod(namespace, spec)
	if r.Customize != nil {
		r.Customize(pod)
	}
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create pod %s/%s: %w", namespace, pod.Name, err)
	}
	name := created.Name
	defer func() {
		// A fresh context: the clean-up must run after a timeout too.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
		defer cancel()
		grace := int64(0)
		bg := metav1.DeletePropagationBackground
		_ = pods.Delete(dctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace, PropagationPolicy: &bg})
	}()

	var (
		last    *corev1.Pod
		lastErr error
	)
	for {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = p
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				break
			}
		} else if ctx.Err() == nil {
			lastErr = err
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			state := podState(last)
			if last == nil && lastErr != nil {
				state = "cannot read the pod: " + lastErr.Error()
			}
			return "", fmt.Errorf("pod %s/%s did not finish in time (%s)", namespace, name, state)
		case <-t.C:
		}
	}
	limit := int64(64 << 10)
	raw, err := pods.GetLogs(name, &corev1.PodLogOptions{Container: spec.container(), LimitBytes: &limit}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("read logs of pod %s/%s: %w", namespace, name, err)
	}
	if last.Status.Phase == corev1.PodFailed {
		return string(raw), fmt.Errorf("pod %s/%s failed (%s)", namespace, name, podState(last))
	}
	return string(raw), nil
}

func probePod(namespace string, spec PodSpec) *corev1.Pod {
	no := false
	yes := true
	nobody := int64(65534)
	deadline := int64(600)
	grace := int64(0)
	readable := int32(0o440) // the probe's group (fsGroup) reads, nobody else
	memory, cpu := spec.MemoryLimit, spec.CPULimit
	if memory == "" {
		memory = "32Mi"
	}
	if cpu == "" {
		cpu = "100m"
	}
	container := spec.container()
	var (
		volumes []corev1.Volume
		mounts  []corev1.VolumeMount
	)
	for i, f := range spec.Files {
		items := []corev1.KeyToPath{{Key: f.Key, Path: f.Key}}
		v := corev1.Volume{Name: fmt.Sprintf("file-%d", i)}
		if f.Secret != "" {
			v.Secret = &corev1.SecretVolumeSource{SecretName: f.Secret, Items: items, DefaultMode: &readable}
		} else {
			v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: f.ConfigMap}, Items: items, DefaultMode: &readable}
		}
		volumes = append(volumes, v)
		mounts = append(mounts, corev1.VolumeMount{Name: v.Name, MountPath: f.Dir, ReadOnly: true})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "railgrid-kcp-" + container + "-" + utilrand.String(5),
			Namespace: namespace,
			Labels: map[string]string{
				"app.kubernetes.io/name":       "railgrid-kcp-verify",
				"app.kubernetes.io/component":  container,
				"app.kubernetes.io/managed-by": "railgrid-kcp-verify",
			},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			ActiveDeadlineSeconds:         &deadline, // a safety net if the clean-up never runs
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				RunAsUser:      &nobody,
				RunAsGroup:     &nobody,
				FSGroup:        &nobody,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Volumes: volumes,
			Containers: []corev1.Container{{
				Name:         container,
				Image:        spec.Image,
				Command:      spec.Command,
				Args:         spec.Args,
				VolumeMounts: mounts,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
				},
			}},
		},
	}
}

// podState describes where a Pod is stuck, for error messages.
func podState(p *corev1.Pod) string {
	if p == nil {
		return "pod status unknown"
	}
	state := "phase " + orUnknown(string(p.Status.Phase))
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			state += ", container " + w.Reason
			if w.Message != "" {
				state += ": " + w.Message
			}
		}
		if t := cs.State.Terminated; t != nil {
			state += fmt.Sprintf(", container exited %d", t.ExitCode)
			if t.Reason != "" {
				state += " (" + t.Reason + ")"
			}
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			state += ", unschedulable: " + c.Message
		}
	}
	return state
}
