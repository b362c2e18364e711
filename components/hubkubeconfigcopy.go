package components

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"gopkg.in/yaml.v3"

	batchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	rbacv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/rbac/v1"

	"github.com/railgrid/railgrid-kcp/naming"
)

// How the hub's Secret gets the operator's kubeconfig, and gets it again after each
// renewal. The operator re-writes its kubeconfig Secret when cert-manager renews the
// client certificate, in kcp-system; the hub reads another Secret, in its own namespace,
// under another key. A pod in kcp-system mounts the operator's Secret next to a
// kustomization whose secretGenerator names the hub's Secret and key, and kubectl's
// built-in kustomize applies it, server-side, under its own field manager: kubectl's
// own image and nothing else, no shell and no parsing, and the kubeconfig is in no
// object but the two Secrets. The field manager is not kubectl's default, "kubectl",
// whose fields the Kubernetes provider takes over on its next update of the object. `pulumi up` runs the copy once per credential as a Job and
// waits for it; a CronJob repeats it. The hub's Secret, as Pulumi declares it, holds no
// data, so a renewal changes nothing Pulumi compares: a preview stays clean.

// HubCopyArgs say when and with what the hub's kubeconfig is copied.
type HubCopyArgs struct {
	// Schedule is the CronJob's schedule (hub.copySchedule).
	Schedule string
	// Image is kubectl's image (config.HubCopyImage).
	Image string
}

// hubCopyTarget is what one copy reads and writes.
type hubCopyTarget struct {
	// minted is the operator's kubeconfig Secret in NamespaceKcp.
	minted string
	// hubNamespace, secretName and secretKey are the hub's Secret.
	hubNamespace     pulumi.StringInput
	secretName       string
	secretKey        string
	remintGeneration int
}

// kustomization is the copy's kustomization: the hub's Secret from the operator's
// kubeconfig, under the name and key the hub reads, with no hash suffix.
func (t hubCopyTarget) kustomization() pulumi.StringOutput {
	return t.hubNamespace.ToStringOutput().ApplyT(func(ns string) (string, error) {
		k := kustomization{APIVersion: "kustomize.config.k8s.io/v1beta1", Kind: "Kustomization", Namespace: ns,
			SecretGenerator: []secretGenerator{{Name: t.secretName, Type: "Opaque",
				Files: []string{t.secretKey + "=" + naming.KubeconfigSecretKey}}}}
		k.GeneratorOptions.DisableNameSuffixHash = true
		out, err := yaml.Marshal(k)
		return string(out), err
	}).(pulumi.StringOutput)
}

// kustomization and secretGenerator are the part of kustomize's Kustomization the copy
// uses (kustomize.config.k8s.io/v1beta1).
type kustomization struct {
	APIVersion       string `yaml:"apiVersion"`
	Kind             string `yaml:"kind"`
	Namespace        string `yaml:"namespace"`
	GeneratorOptions struct {
		DisableNameSuffixHash bool `yaml:"disableNameSuffixHash"`
	} `yaml:"generatorOptions"`
	SecretGenerator []secretGenerator `yaml:"secretGenerator"`
}

type secretGenerator struct {
	Name string `yaml:"name"`
	Type string `yaml:"type"`
	// Files are key=file pairs, the file relative to the kustomization.
	Files []string `yaml:"files"`
}

// hubCopy is what declareHubCopy declared.
type hubCopy struct {
	job     *batchv1.Job
	cronJob *batchv1.CronJob
}

// declareHubCopy declares the copy's identity (a ServiceAccount allowed to read and
// patch the hub's Secret and nothing else), its kustomization, the Job of this
// credential and the CronJob. hubSecretUID ties the Job to the hub's Secret: a Secret
// made again (deleted by hand, then restored by an up) gets a new UID, which replaces
// the Job, so the up fills it again.
func declareHubCopy(ctx *pulumi.Context, name string, c HubCopyArgs, t hubCopyTarget, hubSecretUID pulumi.StringOutput, opts ...pulumi.ResourceOption) (*hubCopy, error) {
	meta := func(namespace pulumi.StringInput) *metav1.ObjectMetaArgs {
		return &metav1.ObjectMetaArgs{Name: pulumi.String(naming.HubCopy), Namespace: namespace}
	}
	sa, err := corev1.NewServiceAccount(ctx, name+"-copy", &corev1.ServiceAccountArgs{
		Metadata: meta(pulumi.String(naming.NamespaceKcp)),
	}, opts...)
	if err != nil {
		return nil, err
	}
	role, err := rbacv1.NewRole(ctx, name+"-copy", &rbacv1.RoleArgs{
		Metadata: meta(t.hubNamespace),
		Rules: rbacv1.PolicyRuleArray{&rbacv1.PolicyRuleArgs{
			ApiGroups:     pulumi.StringArray{pulumi.String("")},
			Resources:     pulumi.StringArray{pulumi.String("secrets")},
			ResourceNames: pulumi.StringArray{pulumi.String(t.secretName)},
			// create: a server-side apply makes the Secret again when it was deleted
			// (the API server authorizes that create by the name, so resourceNames holds).
			Verbs: pulumi.StringArray{pulumi.String("get"), pulumi.String("patch"), pulumi.String("create")},
		}},
	}, opts...)
	if err != nil {
		return nil, err
	}
	binding, err := rbacv1.NewRoleBinding(ctx, name+"-copy", &rbacv1.RoleBindingArgs{
		Metadata: meta(t.hubNamespace),
		RoleRef: &rbacv1.RoleRefArgs{ApiGroup: pulumi.String("rbac.authorization.k8s.io"), Kind: pulumi.String("Role"),
			Name: role.Metadata.Name().Elem()},
		Subjects: rbacv1.SubjectArray{&rbacv1.SubjectArgs{Kind: pulumi.String("ServiceAccount"),
			Name: sa.Metadata.Name().Elem(), Namespace: pulumi.String(naming.NamespaceKcp)}},
	}, opts...)
	if err != nil {
		return nil, err
	}
	kustomization, err := corev1.NewConfigMap(ctx, name+"-copy", &corev1.ConfigMapArgs{
		Metadata: meta(pulumi.String(naming.NamespaceKcp)),
		Data:     pulumi.StringMap{naming.HubCopyKustomizationKey: t.kustomization()},
	}, opts...)
	if err != nil {
		return nil, err
	}
	identity := append(append([]pulumi.ResourceOption{}, opts...), pulumi.DependsOn([]pulumi.Resource{sa, binding, kustomization}))
	pod := hubCopyPod(c.Image, t.minted, kustomization.Metadata.Name().Elem(), sa.Metadata.Name().Elem())
	// A change of the CronJob (a re-mint's new Secret) deletes it first, which deletes
	// its Jobs and pods and waits until they are gone: a run of the previous spec, which
	// mounts the previous credential, cannot then land after the up's copy of the new
	// one. The up's Job runs after that.
	cronJob, err := batchv1.NewCronJob(ctx, name+"-copy", &batchv1.CronJobArgs{
		Metadata: meta(pulumi.String(naming.NamespaceKcp)),
		Spec: &batchv1.CronJobSpecArgs{
			Schedule:                   pulumi.String(c.Schedule),
			ConcurrencyPolicy:          pulumi.String("Forbid"),
			StartingDeadlineSeconds:    pulumi.Int(300),
			SuccessfulJobsHistoryLimit: pulumi.Int(1),
			FailedJobsHistoryLimit:     pulumi.Int(3),
			JobTemplate: &batchv1.JobTemplateSpecArgs{Spec: &batchv1.JobSpecArgs{
				// No retry: the next run is the retry, and a failure stays visible.
				BackoffLimit:          pulumi.Int(0),
				ActiveDeadlineSeconds: pulumi.Int(300),
				Template:              &corev1.PodTemplateSpecArgs{Spec: pod},
			}},
		},
	}, append(identity, pulumi.ReplaceOnChanges([]string{"spec"}), pulumi.DeleteBeforeReplace(true))...)
	if err != nil {
		return nil, err
	}
	job, err := batchv1.NewJob(ctx, name+"-copy-mint", &batchv1.JobArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.HubCopyJob(t.remintGeneration)), Namespace: pulumi.String(naming.NamespaceKcp),
			// A Job that failed is made again by the next up, which would otherwise wait
			// on it for ever.
			Annotations: pulumi.StringMap{naming.AnnotationReplaceUnready: pulumi.String("true")}},
		Spec: &batchv1.JobSpecArgs{
			// A few tries for an API server that is briefly away; then the up fails,
			// saying why.
			BackoffLimit:          pulumi.Int(3),
			ActiveDeadlineSeconds: pulumi.Int(300),
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Annotations: pulumi.StringMap{naming.AnnotationHubSecretUID: hubSecretUID}},
				Spec:     pod,
			},
		},
	}, append(identity, pulumi.DependsOn([]pulumi.Resource{cronJob}), pulumi.DeleteBeforeReplace(true))...)
	if err != nil {
		return nil, err
	}
	return &hubCopy{job: job, cronJob: cronJob}, nil
}

// hubCopyPod runs kubectl on the copy's kustomization, under the restricted Pod
// Security Standard with a read-only root filesystem: the kustomization and the
// operator's kubeconfig are one projected volume, so kustomize finds the file next to
// the kustomization, as it requires; kubectl's cache goes to an emptyDir.
func hubCopyPod(image, minted string, kustomization, serviceAccount pulumi.StringInput) *corev1.PodSpecArgs {
	const copyDir, cacheDir = "/copy", "/cache"
	return &corev1.PodSpecArgs{
		RestartPolicy:      pulumi.String("Never"),
		ServiceAccountName: serviceAccount,
		SecurityContext:    restrictedPodSecurity(),
		Containers: corev1.ContainerArray{&corev1.ContainerArgs{
			Name:  pulumi.String("copy"),
			Image: pulumi.String(image),
			Command: pulumi.ToStringArray([]string{"/bin/kubectl", "apply", "--server-side", "--force-conflicts",
				"--field-manager=" + naming.HubCopy, "--cache-dir=" + cacheDir, "-k", copyDir}),
			Resources:       containerResources("10m", "64Mi", "256Mi"),
			SecurityContext: restrictedContainerSecurity(),
			VolumeMounts: corev1.VolumeMountArray{
				&corev1.VolumeMountArgs{Name: pulumi.String("copy"), MountPath: pulumi.String(copyDir), ReadOnly: pulumi.Bool(true)},
				&corev1.VolumeMountArgs{Name: pulumi.String("cache"), MountPath: pulumi.String(cacheDir)},
			},
		}},
		Volumes: corev1.VolumeArray{
			&corev1.VolumeArgs{Name: pulumi.String("copy"), Projected: &corev1.ProjectedVolumeSourceArgs{
				// Readable by the pod's user and group only: the kubeconfig is a credential.
				DefaultMode: pulumi.Int(0o440),
				Sources: corev1.VolumeProjectionArray{
					&corev1.VolumeProjectionArgs{ConfigMap: &corev1.ConfigMapProjectionArgs{Name: kustomization}},
					&corev1.VolumeProjectionArgs{Secret: &corev1.SecretProjectionArgs{Name: pulumi.String(minted),
						Items: corev1.KeyToPathArray{&corev1.KeyToPathArgs{Key: pulumi.String(naming.KubeconfigSecretKey), Path: pulumi.String(naming.KubeconfigSecretKey)}}}},
				},
			}},
			emptyDir("cache"),
		},
	}
}
