package components

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
)

// readIdentity is what a read of a Kubernetes object declares as its inputs: its
// apiVersion, kind, name and namespace. Why: the engine compares a read's inputs on
// refresh, and a read declared with none (corev1.GetSecret and the like take no inputs)
// stores none, while the Kubernetes provider answers the refresh with the live object's
// fields as inputs, so every `pulumi refresh --expect-no-changes` failed on every read.
// Given the object's identity, the provider prunes the live object to exactly those
// fields, which stay the same as long as it is the same object.
func readIdentity(apiVersion, kind, namespace, name string) pulumi.Map {
	return pulumi.Map{
		"apiVersion": pulumi.String(apiVersion),
		"kind":       pulumi.String(kind),
		"metadata":   pulumi.Map{"name": pulumi.String(name), "namespace": pulumi.String(namespace)},
	}
}

// readSecret reads a Secret, declaring its identity (readIdentity).
func readSecret(ctx *pulumi.Context, name, namespace, object string, opts ...pulumi.ResourceOption) (*corev1.Secret, error) {
	var s corev1.Secret
	err := ctx.ReadResource("kubernetes:core/v1:Secret", name, pulumi.ID(namespace+"/"+object), readIdentity("v1", "Secret", namespace, object), &s, opts...)
	return &s, err
}

// readConfigMap reads a ConfigMap, declaring its identity (readIdentity).
func readConfigMap(ctx *pulumi.Context, name, namespace, object string, opts ...pulumi.ResourceOption) (*corev1.ConfigMap, error) {
	var c corev1.ConfigMap
	err := ctx.ReadResource("kubernetes:core/v1:ConfigMap", name, pulumi.ID(namespace+"/"+object), readIdentity("v1", "ConfigMap", namespace, object), &c, opts...)
	return &c, err
}

// readPersistentVolumeClaim reads a claim, declaring its identity (readIdentity).
func readPersistentVolumeClaim(ctx *pulumi.Context, name, namespace, object string, opts ...pulumi.ResourceOption) (*corev1.PersistentVolumeClaim, error) {
	var c corev1.PersistentVolumeClaim
	err := ctx.ReadResource("kubernetes:core/v1:PersistentVolumeClaim", name, pulumi.ID(namespace+"/"+object), readIdentity("v1", "PersistentVolumeClaim", namespace, object), &c, opts...)
	return &c, err
}
