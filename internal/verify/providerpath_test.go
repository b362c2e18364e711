package verify_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/internal/providerprobe"
	"github.com/railgrid/railgrid-kcp/internal/testkit/verifytest"
	"github.com/railgrid/railgrid-kcp/internal/verify"
)

const sliceURL = "https://kcp-alpha.example.com/services/apiexport/" + verifytest.ProbeProviderCluster + "/widgets"

// The probe runs beside the hub with the hub Secret's kubeconfig and kcp's CA, told the
// placement shard, its public hostname and every shard's URL; each of its checks becomes
// a result that names the URL it followed.
func TestProviderPathPassesWhenTheProbeFollowsTheSliceURL(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	results := f.run(t, verify.CheckProviderPath)
	requireAll(t, results, verify.StatusPass)
	var items []string
	for _, r := range results {
		items = append(items, r.Item)
	}
	if !slices.Equal(items, providerprobe.ProviderPathChecks) {
		t.Errorf("items %v, want the probe's checks in order %v", items, providerprobe.ProviderPathChecks)
	}
	requireStatus(t, results, "endpoint-slice", verify.StatusPass, "at "+sliceURL+": APIExportEndpointSlice widgets lists "+sliceURL,
		"client certificate CN=kcp-admin,O=system:kcp:admin")
	requireStatus(t, results, "list", verify.StatusPass, "at "+sliceURL+"/clusters/*/apis/probe.railgrid.dev/v1/widgets: lists 1 Widget(s)")

	if len(f.probe.Specs) != 1 {
		t.Fatalf("want one probe Pod, got %d", len(f.probe.Specs))
	}
	spec := f.probe.Specs[0]
	if spec.Image != verifytest.ProviderImage || spec.Namespace != "railgrid-system" || len(spec.Command) != 0 {
		t.Errorf("probe Pod %s in %q with command %v, want the provider image in the hub's namespace with its own entrypoint", spec.Image, spec.Namespace, spec.Command)
	}
	args := strings.Join(spec.Args, " ")
	for _, want := range []string{
		"-kubeconfig /var/run/railgrid-kcp/hub/admin.kubeconfig", "-ca-file /var/run/railgrid-kcp/ca/ca.crt",
		"-steps provider-path", "-shard alpha", "-shard-hostname kcp-alpha.example.com", "-name-prefix railgrid-verify",
		"-want-user kcp-admin", "-want-groups system:kcp:admin",
		"-shard-url root=https://kcp-root.example.com", "-shard-url alpha=https://kcp-alpha.example.com",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("probe args %q lack %q", args, want)
		}
	}
	if len(spec.Files) != 2 || spec.Files[0] != (verify.PodFile{Dir: "/var/run/railgrid-kcp/hub", Secret: "railgrid-kcp", Key: "admin.kubeconfig"}) ||
		spec.Files[1].Dir != "/var/run/railgrid-kcp/ca" || spec.Files[1].Key != "ca.crt" || spec.Files[1].ConfigMap == "" {
		t.Errorf("probe files %+v, want the hub Secret's key and a CA ConfigMap", spec.Files)
	}
	requireCAConfigMapGone(t, f)
}

// The CA the probe trusts is the one the hub kubeconfig carries (the stack's
// kcpRootServerCA), in a ConfigMap made for the run and deleted after it.
func requireCAConfigMapGone(t *testing.T, f *fixture) {
	t.Helper()
	if len(f.probe.CAs) == 0 || f.probe.CAs[0] != string(f.cluster.CA.PEM) {
		t.Errorf("the probe Pod's CA ConfigMap held %q, want the hub kubeconfig's CA", f.probe.CAs)
	}
	cms, err := f.cluster.Kube.CoreV1().ConfigMaps("railgrid-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 0 {
		t.Errorf("%d ConfigMap(s) left in the hub's namespace", len(cms.Items))
	}
}

// A slice URL on a port only the edge answers: the probe fails the check and does not
// run what needs the URL; the check fails each of them, with the probe's error.
func TestProviderPathFailsWhenTheSliceURLIsWrong(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bad := "https://kcp-alpha.example.com:8443/services/apiexport/" + verifytest.ProbeProviderCluster + "/widgets"
	f.probe.Err = errors.New("pod railgrid-system/railgrid-kcp-provider-probe-x failed (phase Failed, container exited 1)")
	f.probe.Edit = func(step string, lines []providerprobe.Line) []providerprobe.Line {
		for i := range lines {
			switch lines[i].Check {
			case providerprobe.CheckEndpointSlice:
				lines[i].Result, lines[i].URL = providerprobe.Fail, bad
				lines[i].Message = ""
				lines[i].Error = `APIExportEndpointSlice widgets advertises "` + bad + `" names port 8443`
			case providerprobe.CheckCreate, providerprobe.CheckList, providerprobe.CheckWatch:
				lines[i].Result, lines[i].URL = providerprobe.NotRun, ""
				lines[i].Message = "not run: it needs what endpoint-slice would have made"
			}
		}
		return lines
	}
	results := f.run(t, verify.CheckProviderPath)
	requireFail(t, results, "endpoint-slice", "at "+bad, "names port 8443")
	for _, item := range []string{"create", "list", "watch"} {
		requireFail(t, results, item, "not run: it needs what endpoint-slice would have made")
	}
	requireOthersPass(t, results, "endpoint-slice", "create", "list", "watch")
	requireCAConfigMapGone(t, f)
}

// A probe that stops half-way (the Pod was killed, the binary crashed): every check it
// did not report fails, saying why, with the end of its log when it reported nothing.
func TestProviderPathFailsForEveryCheckTheProbeNeverReported(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.probe.Err = errors.New("pod railgrid-system/railgrid-kcp-provider-probe-x failed (phase Failed, container exited 2 (Error))")
	f.probe.Edit = func(step string, lines []providerprobe.Line) []providerprobe.Line { return lines[:3] }
	results := f.run(t, verify.CheckProviderPath)
	if len(results) != len(providerprobe.ProviderPathChecks) {
		t.Fatalf("want one result per probe check, got %s", dump(results))
	}
	for _, check := range providerprobe.ProviderPathChecks[3:] {
		requireFail(t, results, check, "the probe Pod failed: pod railgrid-system/railgrid-kcp-provider-probe-x failed", "exited 2")
	}
	requireOthersPass(t, results, providerprobe.ProviderPathChecks[3:]...)

	f.probe.Edit = func(string, []providerprobe.Line) []providerprobe.Line { return nil }
	f.probe.Noise = "provider-probe: -kubeconfig /var/run/railgrid-kcp/hub/admin.kubeconfig: the user has no inline client certificate and key\n"
	results = f.run(t, verify.CheckProviderPath)
	requireFail(t, results, "workspaces", "exited 2", "its log ends: provider-probe: -kubeconfig", "no inline client certificate")
}

// Lines that are not the probe's (client-go's warnings in the same log) are ignored.
func TestProviderPathReadsTheReportAmidOtherOutput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.probe.Noise = "W1203 12:00:00.000000       1 warnings.go:70] some warning\n{\"not\":\"a line\"}\n"
	requireAll(t, f.run(t, verify.CheckProviderPath), verify.StatusPass)
}

// Without an image the check cannot run: it is reported skipped, with the reason, and
// never passed; no Pod is started.
func TestProviderPathIsSkippedWithoutAnImage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.opts.ProviderImage = ""
	results := f.run(t, verify.CheckProviderPath, verify.CheckHubCredential)
	requireStatus(t, results, "provider probe", verify.StatusSkip, "no provider-probe image given")
	requireStatus(t, results, "hub credential from a pod", verify.StatusSkip, "no provider-probe image given")
	requireStatus(t, results, credentialItem, verify.StatusPass) // the port-forward still runs
	if len(f.probe.Specs) != 0 {
		t.Errorf("%d probe Pod(s) started without an image", len(f.probe.Specs))
	}
	if verify.Passed(results, false) != true || verify.Summarize(results).Skip != 2 {
		t.Errorf("summary %+v", verify.Summarize(results))
	}
}

// hub-credential from a pod: the probe's SelfSubjectReviews through the front proxy and
// at each shard's public URL, each a result naming the URL and what kcp saw.
func TestHubCredentialFromAPodAsksTheFrontProxyAndEveryShard(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	results := f.run(t, verify.CheckHubCredential)
	for _, url := range []string{inClusterRoot, "https://kcp-root.example.com/clusters/root", "https://kcp-alpha.example.com/clusters/root"} {
		requireStatus(t, results, "SelfSubjectReview from a pod at "+url, verify.StatusPass,
			`kcp sees user "kcp-admin" in groups [system:kcp:admin, system:authenticated]`)
	}
	if len(f.probe.Specs) != 1 || !slices.Contains(f.probe.Specs[0].Args, "hub-identity") {
		t.Fatalf("probe Pods %+v, want one running hub-identity", f.probe.Specs)
	}

	f = newFixture(t)
	f.probe.Edit = func(step string, lines []providerprobe.Line) []providerprobe.Line {
		for i := range lines {
			if lines[i].Check == providerprobe.ShardCheck("alpha") {
				lines[i].Result = providerprobe.Fail
				lines[i].Error = `SelfSubjectReview: Unauthorized`
				lines[i].Identity, lines[i].Message = "", ""
			}
		}
		return lines
	}
	results = f.run(t, verify.CheckHubCredential)
	requireFail(t, results, "SelfSubjectReview from a pod at https://kcp-alpha.example.com/clusters/root", "Unauthorized",
		"still failing when the check timed out")
	if len(f.probe.Specs) < 2 {
		t.Errorf("a failing answer was not asked again (%d probe Pods)", len(f.probe.Specs))
	}
}

// The real runner starts the provider probe in the hub's namespace with the files
// mounted read-only for the probe's group only, the probe's own limits, and reads the
// probe container's log; it deletes the Pod afterwards.
func TestKubePodRunnerMountsTheProbeFiles(t *testing.T) {
	t.Parallel()
	kube, tr := newPodClient(corev1.PodSucceeded, "")
	runner := &verify.KubePodRunner{Client: kube, Namespace: "default", PollInterval: 5 * time.Millisecond}
	_, err := runner.Run(context.Background(), verify.PodSpec{
		Image: verifytest.ProviderImage, Args: []string{"-steps", "hub-identity"}, Name: verify.ProviderProbeContainer,
		Namespace: "railgrid-system", MemoryLimit: "128Mi", CPULimit: "500m",
		Files: []verify.PodFile{
			{Dir: "/var/run/railgrid-kcp/hub", Secret: "railgrid-kcp", Key: "admin.kubeconfig"},
			{Dir: "/var/run/railgrid-kcp/ca", ConfigMap: "ca", Key: "ca.crt"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.created) != 1 || len(tr.deleted) != 1 || tr.deleted[0] != tr.created[0].Name {
		t.Fatalf("created %d, deleted %v", len(tr.created), tr.deleted)
	}
	pod := tr.created[0]
	c := pod.Spec.Containers[0]
	if pod.Namespace != "railgrid-system" || c.Name != "provider-probe" || !strings.HasPrefix(pod.Name, "railgrid-kcp-provider-probe-") {
		t.Errorf("pod %s/%s container %s", pod.Namespace, pod.Name, c.Name)
	}
	if len(c.Command) != 0 || !slices.Equal(c.Args, []string{"-steps", "hub-identity"}) {
		t.Errorf("command %v args %v, want the image's entrypoint with the args", c.Command, c.Args)
	}
	if c.Resources.Limits.Memory().String() != "128Mi" || c.Resources.Limits.Cpu().String() != "500m" {
		t.Errorf("limits %v", c.Resources.Limits)
	}
	if len(c.VolumeMounts) != 2 || !c.VolumeMounts[0].ReadOnly || c.VolumeMounts[0].MountPath != "/var/run/railgrid-kcp/hub" || c.VolumeMounts[1].MountPath != "/var/run/railgrid-kcp/ca" {
		t.Errorf("mounts %+v", c.VolumeMounts)
	}
	v := pod.Spec.Volumes
	if len(v) != 2 || v[0].Secret == nil || v[0].Secret.SecretName != "railgrid-kcp" || v[0].Secret.Items[0].Key != "admin.kubeconfig" ||
		*v[0].Secret.DefaultMode != 0o440 || v[1].ConfigMap == nil || v[1].ConfigMap.Name != "ca" {
		t.Errorf("volumes %+v", v)
	}
	sc := pod.Spec.SecurityContext
	if sc.FSGroup == nil || *sc.FSGroup != *sc.RunAsUser || *pod.Spec.AutomountServiceAccountToken || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("security: pod %+v, container %+v", sc, c.SecurityContext)
	}
}
