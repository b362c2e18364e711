package components

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
)

// The kind (kubeadm) CoreDNS this backend extends.
const (
	CoreDNSNamespace  = "kube-system"
	CoreDNSConfigMap  = "coredns"
	CoreDNSDeployment = "coredns"
	CoreDNSContainer  = "coredns"

	// SplitHorizonHostsConfigMap holds the answers; it is the only part that changes
	// with the shards, and deleting it (destroy) removes every answer again.
	SplitHorizonHostsConfigMap = "railgrid-kcp-hosts"
	SplitHorizonHostsKey       = "hosts"
	splitHorizonMountPath      = "/etc/coredns/railgrid-kcp"

	corefileMarkerBegin = "# railgrid-kcp split horizon: BEGIN"
	corefileMarkerEnd   = "# railgrid-kcp split horizon: END"
)

// coreDNSHosts is the kind split horizon: a hosts file in a ConfigMap of our own,
// mounted into CoreDNS and read by its hosts plugin (which re-reads the file by itself).
// The Corefile and the CoreDNS Deployment are patched once, idempotently, to read that
// file; the patch is retained on destroy because the Corefile is kubeadm's and removing
// the field would leave CoreDNS without configuration. With the ConfigMap gone, the
// retained stanza reads an empty file and falls through.
type coreDNSHosts struct{}

func (coreDNSHosts) DeclareRecords(ctx *pulumi.Context, name string, records []HostRecord, opts ...pulumi.ResourceOption) error {
	var lines []string
	for _, r := range records {
		lines = append(lines, fmt.Sprintf("%s %s", r.ClusterIP, r.Hostname))
	}
	if _, err := corev1.NewConfigMap(ctx, name+"-hosts", &corev1.ConfigMapArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(SplitHorizonHostsConfigMap), Namespace: pulumi.String(CoreDNSNamespace)},
		Data:     pulumi.StringMap{SplitHorizonHostsKey: pulumi.String(strings.Join(lines, "\n") + "\n")},
	}, opts...); err != nil {
		return err
	}

	live, err := corev1.GetConfigMap(ctx, name+"-corefile-live", pulumi.ID(CoreDNSNamespace+"/"+CoreDNSConfigMap), nil, opts...)
	if err != nil {
		return err
	}
	corefile := live.Data.MapIndex(pulumi.String("Corefile")).ApplyT(withSplitHorizonHosts).(pulumi.StringOutput)
	retained := append(append([]pulumi.ResourceOption{}, opts...), pulumi.RetainOnDelete(true))
	if _, err := corev1.NewConfigMapPatch(ctx, name+"-corefile", &corev1.ConfigMapPatchArgs{
		Metadata: &metav1.ObjectMetaPatchArgs{
			Name:      pulumi.String(CoreDNSConfigMap),
			Namespace: pulumi.String(CoreDNSNamespace),
			// kubeadm owns data.Corefile; taking it over needs a forced apply.
			Annotations: pulumi.StringMap{"pulumi.com/patchForce": pulumi.String("true")},
		},
		Data: pulumi.StringMap{"Corefile": corefile},
	}, retained...); err != nil {
		return err
	}
	_, err = appsv1.NewDeploymentPatch(ctx, name+"-coredns-volume", &appsv1.DeploymentPatchArgs{
		Metadata: &metav1.ObjectMetaPatchArgs{Name: pulumi.String(CoreDNSDeployment), Namespace: pulumi.String(CoreDNSNamespace)},
		Spec: &appsv1.DeploymentSpecPatchArgs{Template: &corev1.PodTemplateSpecPatchArgs{Spec: &corev1.PodSpecPatchArgs{
			Containers: corev1.ContainerPatchArray{&corev1.ContainerPatchArgs{
				Name: pulumi.String(CoreDNSContainer),
				VolumeMounts: corev1.VolumeMountPatchArray{&corev1.VolumeMountPatchArgs{
					Name: pulumi.String(SplitHorizonHostsConfigMap), MountPath: pulumi.String(splitHorizonMountPath), ReadOnly: pulumi.Bool(true),
				}},
			}},
			Volumes: corev1.VolumePatchArray{&corev1.VolumePatchArgs{
				Name: pulumi.String(SplitHorizonHostsConfigMap),
				// Optional: CoreDNS keeps running when the ConfigMap is gone.
				ConfigMap: &corev1.ConfigMapVolumeSourcePatchArgs{Name: pulumi.String(SplitHorizonHostsConfigMap), Optional: pulumi.Bool(true)},
			}},
		}}},
		// The provider diffs lists by position and kubeadm's own volume comes first, so the
		// patch would show a change on every run; the fields it adds are applied once.
	}, append(retained, pulumi.IgnoreChanges([]string{"spec.template.spec.containers", "spec.template.spec.volumes"}))...)
	return err
}

// withSplitHorizonHosts adds the hosts stanza to the main server block of a Corefile,
// once: a Corefile that already has it is returned unchanged.
func withSplitHorizonHosts(corefile string) (string, error) {
	if strings.Contains(corefile, corefileMarkerBegin) {
		return corefile, nil
	}
	lines := strings.Split(corefile, "\n")
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), ".:53") && strings.HasSuffix(strings.TrimSpace(line), "{") {
			stanza := []string{
				"    " + corefileMarkerBegin,
				"    hosts " + splitHorizonMountPath + "/" + SplitHorizonHostsKey + " {",
				"        fallthrough",
				"    }",
				"    " + corefileMarkerEnd,
			}
			out := append(append(append([]string{}, lines[:i+1]...), stanza...), lines[i+1:]...)
			if strings.Contains(corefile, "\n    hosts ") || strings.Contains(corefile, "\thosts ") {
				return "", fmt.Errorf("the CoreDNS Corefile already uses the hosts plugin, which may appear once per server block")
			}
			return strings.Join(out, "\n"), nil
		}
	}
	return "", fmt.Errorf("the CoreDNS Corefile has no .:53 server block to add the split-horizon hosts to")
}
