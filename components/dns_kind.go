package components

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"

	"github.com/railgrid/railgrid-kcp/naming"
)

// The kind (kubeadm) CoreDNS this backend extends (naming.CoreDNSDeployment). The
// hosts ConfigMap (naming.SplitHorizonHostsConfigMap) is the only part that changes with
// the shards, and deleting it (destroy) removes every answer again; the Corefile
// ConfigMap (naming.SplitHorizonCorefileConfigMap) is mounted over naming.CorefilePath.
const (
	corefileHashAnnotation = "railgrid.io/corefile-sha256"
	SplitHorizonHostsKey   = "hosts"
	// Outside /etc/coredns: that is a read-only ConfigMap volume, in which the runtime
	// can create no mount point.
	splitHorizonMountPath = "/etc/railgrid-kcp"

	corefileMarkerBegin = "# railgrid-kcp split horizon: BEGIN"
	corefileMarkerEnd   = "# railgrid-kcp split horizon: END"
)

// coreDNSHosts is the kind split horizon: a hosts file in a ConfigMap of our own,
// mounted into CoreDNS and read by its hosts plugin (which re-reads the file by itself).
// kubeadm's ConfigMap is never written: the Corefile CoreDNS reads is a ConfigMap of our
// own (kubeadm's Corefile plus the hosts stanza): a patch of kubeadm's Deployment points
// kubeadm's config-volume at it. That ConfigMap name is the one field the patch takes
// from kubeadm, by force; nothing can be mounted over or beside the Corefile instead,
// because /etc/coredns is kubeadm's read-only ConfigMap volume, in which runc refuses a
// mount (with a subPath mount of our Corefile there, CoreDNS does not start). Everything
// else the patch adds (the hosts volume and its mount, a template annotation) is new,
// keyed by name or mount path.
//
// On destroy the hosts ConfigMap goes (every answer with it); the Corefile ConfigMap and
// the Deployment patch are retained: the pods mount the Corefile, and without it
// CoreDNS would have no configuration. The retained stanza then reads an absent hosts
// file (its volume is optional) and falls through.
//
// issuer, when set, is one more answer: the OIDC issuer's hostname and the ClusterIP of
// its Service (kind.issuerClusterIP). It is in the same file, so it is published with
// the shards' answers; kcp keeps serving meanwhile, and retries the issuer's discovery.
type coreDNSHosts struct {
	issuer *HostRecord
}

func (d coreDNSHosts) DeclareRecords(ctx *pulumi.Context, name string, records []HostRecord, answersAfter []pulumi.Resource, opts ...pulumi.ResourceOption) error {
	var lines []string
	for _, r := range records {
		lines = append(lines, fmt.Sprintf("%s %s", r.ClusterIP, r.Hostname))
	}
	if d.issuer != nil {
		lines = append(lines, fmt.Sprintf("%s %s", d.issuer.ClusterIP, d.issuer.Hostname))
	}
	if _, err := corev1.NewConfigMap(ctx, name+"-hosts", &corev1.ConfigMapArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.SplitHorizonHostsConfigMap), Namespace: pulumi.String(naming.NamespaceKubeSystem)},
		Data:     pulumi.StringMap{SplitHorizonHostsKey: pulumi.String(strings.Join(lines, "\n") + "\n")},
	}, append(append([]pulumi.ResourceOption{}, opts...), pulumi.DependsOn(answersAfter))...); err != nil {
		return err
	}

	// The Corefile and its mount serve every answer and do not wait for the shards: a
	// preview then knows their content, and adding a shard shows no change to them.
	// Until the hosts ConfigMap exists, the stanza reads an absent file and falls through.
	live, err := readConfigMap(ctx, name+"-corefile-live", naming.NamespaceKubeSystem, naming.CoreDNSConfigMap, opts...)
	if err != nil {
		return err
	}
	corefile := live.Data.MapIndex(pulumi.String(naming.CorefileKey)).ApplyT(withSplitHorizonHosts).(pulumi.StringOutput)
	retained := append(append([]pulumi.ResourceOption{}, opts...), pulumi.RetainOnDelete(true))
	corefileMap, err := corev1.NewConfigMap(ctx, name+"-corefile", &corev1.ConfigMapArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.SplitHorizonCorefileConfigMap), Namespace: pulumi.String(naming.NamespaceKubeSystem)},
		Data:     pulumi.StringMap{naming.CorefileKey: corefile},
	}, retained...)
	if err != nil {
		return err
	}
	_, err = appsv1.NewDeploymentPatch(ctx, name+"-coredns-volume", &appsv1.DeploymentPatchArgs{
		// Forced: the config-volume's ConfigMap name is kubeadm's field (see above).
		Metadata: &metav1.ObjectMetaPatchArgs{Name: pulumi.String(naming.CoreDNSDeployment), Namespace: pulumi.String(naming.NamespaceKubeSystem),
			Annotations: pulumi.StringMap{naming.AnnotationPatchForce: pulumi.String("true")}},
		Spec: &appsv1.DeploymentSpecPatchArgs{Template: &corev1.PodTemplateSpecPatchArgs{
			// A new Corefile rolls the pods at once, instead of waiting for the kubelet's
			// ConfigMap sync and CoreDNS's reload.
			Metadata: &metav1.ObjectMetaPatchArgs{Annotations: pulumi.StringMap{
				corefileHashAnnotation: corefile.ApplyT(func(c string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(c))) }).(pulumi.StringOutput),
			}},
			Spec: &corev1.PodSpecPatchArgs{
				Containers: corev1.ContainerPatchArray{&corev1.ContainerPatchArgs{
					Name: pulumi.String(naming.CoreDNSContainer),
					VolumeMounts: corev1.VolumeMountPatchArray{
						&corev1.VolumeMountPatchArgs{Name: pulumi.String(naming.SplitHorizonHostsConfigMap), MountPath: pulumi.String(splitHorizonMountPath), ReadOnly: pulumi.Bool(true)},
					},
				}},
				Volumes: corev1.VolumePatchArray{
					&corev1.VolumePatchArgs{
						Name: pulumi.String(naming.SplitHorizonHostsConfigMap),
						// Optional: CoreDNS keeps running when the ConfigMap is gone.
						ConfigMap: &corev1.ConfigMapVolumeSourcePatchArgs{Name: pulumi.String(naming.SplitHorizonHostsConfigMap), Optional: pulumi.Bool(true)},
					},
					// kubeadm's volume, its items (Corefile) kept, reading our ConfigMap. Not
					// optional: a missing Corefile must keep the pod from starting rather
					// than start CoreDNS on an empty file.
					&corev1.VolumePatchArgs{
						Name:      pulumi.String(naming.CoreDNSConfigVolume),
						ConfigMap: &corev1.ConfigMapVolumeSourcePatchArgs{Name: pulumi.String(naming.SplitHorizonCorefileConfigMap)},
					},
				},
			}}},
		// The provider diffs lists by position and kubeadm's own volume comes first, so the
		// patch would show a change on every run; the fields it adds are applied once.
	}, append(retained, pulumi.DependsOn([]pulumi.Resource{corefileMap}),
		pulumi.IgnoreChanges([]string{"spec.template.spec.containers", "spec.template.spec.volumes"}))...)
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
