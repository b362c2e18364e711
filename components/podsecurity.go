package components

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
)

// Pod Security admission labels and levels
// (https://kubernetes.io/docs/concepts/security/pod-security-admission/).
const (
	PodSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"
	PodSecurityWarnLabel    = "pod-security.kubernetes.io/warn"
	PodSecurityRestricted   = "restricted"
)

// NonRootUID runs every container this program defines. The official etcd image is
// distroless and declares no user, so the restricted level's runAsNonRoot needs a
// numeric user; 65532 is distroless's "nonroot".
const NonRootUID = 65532

// restrictedPodSecurity is the pod half of the restricted Pod Security Standard
// (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted):
// non-root, RuntimeDefault seccomp. fsGroup makes the volumes writable by that user.
func restrictedPodSecurity() *corev1.PodSecurityContextArgs {
	return &corev1.PodSecurityContextArgs{
		RunAsNonRoot:   pulumi.Bool(true),
		RunAsUser:      pulumi.Int(NonRootUID),
		RunAsGroup:     pulumi.Int(NonRootUID),
		FsGroup:        pulumi.Int(NonRootUID),
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

// resources requests cpu and memory and caps memory.
func resources(cpu, memory, memoryLimit string) *corev1.ResourceRequirementsArgs {
	return &corev1.ResourceRequirementsArgs{
		Requests: pulumi.StringMap{"cpu": pulumi.String(cpu), "memory": pulumi.String(memory)},
		Limits:   pulumi.StringMap{"memory": pulumi.String(memoryLimit)},
	}
}
