package components

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"

	"github.com/railgrid/railgrid-kcp/naming"
)

// What every pod spec this program defines shares (etcd's members, the GKE snapshot and
// restore-drill jobs): the restricted Pod Security Standard, and the requests and the
// memory cap of each container.

// restrictedPodSecurity is the pod half of the restricted Pod Security Standard
// (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted):
// non-root, RuntimeDefault seccomp. fsGroup makes the volumes writable by that user.
func restrictedPodSecurity() *corev1.PodSecurityContextArgs {
	return &corev1.PodSecurityContextArgs{
		RunAsNonRoot:   pulumi.Bool(true),
		RunAsUser:      pulumi.Int(naming.NonRootUID),
		RunAsGroup:     pulumi.Int(naming.NonRootUID),
		FsGroup:        pulumi.Int(naming.NonRootUID),
		SeccompProfile: &corev1.SeccompProfileArgs{Type: pulumi.String("RuntimeDefault")},
	}
}

// restrictedContainerSecurity is the container half: no privilege escalation and every
// capability dropped. Beyond the standard, the root filesystem is read-only, as the
// kcp-operator runs kcp's containers: whatever a container writes goes to a volume that
// its pod spec names (etcd's data volume, the jobs' emptyDirs).
func restrictedContainerSecurity() *corev1.SecurityContextArgs {
	return &corev1.SecurityContextArgs{
		AllowPrivilegeEscalation: pulumi.Bool(false),
		Capabilities:             &corev1.CapabilitiesArgs{Drop: pulumi.StringArray{pulumi.String("ALL")}},
		ReadOnlyRootFilesystem:   pulumi.Bool(true),
	}
}

// containerResources requests cpu and memory and caps memory.
func containerResources(cpu, memory, memoryLimit string) *corev1.ResourceRequirementsArgs {
	return &corev1.ResourceRequirementsArgs{
		Requests: pulumi.StringMap{"cpu": pulumi.String(cpu), "memory": pulumi.String(memory)},
		Limits:   pulumi.StringMap{"memory": pulumi.String(memoryLimit)},
	}
}
