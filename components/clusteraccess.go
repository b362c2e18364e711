package components

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// clusterAccess is how the program itself reaches the cluster its Kubernetes provider
// manages, with the same kubeconfig and context: the resource hooks use it (the Helm
// record repair, helmrelease_records.go, and the kcp rollout waits, kcprollout.go).
type clusterAccess func() (*rest.Config, error)

// kubeconfigContext reaches the cluster as the provider does when it is given a
// context and, optionally, a kubeconfig file: without one, the default loading rules
// ($KUBECONFIG, then ~/.kube/config).
func kubeconfigContext(file, name string) clusterAccess {
	return func() (*rest.Config, error) {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = file
		return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
	}
}

// kubeconfigText reaches the cluster with a kubeconfig the program wrote itself.
func kubeconfigText(kubeconfig string) clusterAccess {
	return func() (*rest.Config, error) { return clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig)) }
}
