package components

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// HelmRecordRepairHook is the name of the resource hook that runs before every Helm
// release of the stack is installed or upgraded.
const HelmRecordRepairHook = "railgrid-kcp-helm-interrupted-records"

// Helm's storage driver (the default, "secret") keeps one Secret per release revision,
// labelled owner=helm, name=<release>, status=<status>. A Helm client killed while it
// installs, upgrades or rolls back leaves its revision in a pending status, and Helm
// then refuses every later install ("cannot re-use a name that is still in use") and
// upgrade ("another operation (install/upgrade/rollback) is in progress") of the release
// (pulumi-kubernetes #2054 and #1727: the Release resource does not recover from it).
var interruptedHelmStatuses = map[string]bool{"pending-install": true, "pending-upgrade": true, "pending-rollback": true}

// clusterAccess is how the program itself reaches the cluster its Kubernetes provider
// manages: the same kubeconfig and context. Only the Helm record repair uses it.
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

// newHelmRecordRepair registers the hook that removes the revision records an
// interrupted Helm operation left pending, just before the engine installs or upgrades
// the release again. The engine calls it only when it is about to create or update the
// release (never in a preview), and by then the stack's lock is held: no other
// operation of this stack can be in flight on the release. Only pending records of the
// release being installed are removed; its objects and its deployed revisions stay, and
// Helm adopts the objects (they carry the release's ownership annotations).
func newHelmRecordRepair(ctx *pulumi.Context, access clusterAccess) (pulumi.ResourceOption, error) {
	hook, err := ctx.RegisterResourceHook(HelmRecordRepairHook, func(args *pulumi.ResourceHookArgs) error {
		name, namespace := stringInput(args.NewInputs, "name"), stringInput(args.NewInputs, "namespace")
		if name == "" || namespace == "" {
			return fmt.Errorf("%s: the Helm release's inputs have no name or namespace", args.URN)
		}
		cfg, err := access()
		if err != nil {
			return fmt.Errorf("reaching the cluster to check Helm release %s/%s: %w", namespace, name, err)
		}
		client, err := corev1client.NewForConfig(cfg)
		if err != nil {
			return err
		}
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		removed, err := RemoveInterruptedHelmRecords(c, client.Secrets(namespace), name)
		if err != nil {
			return fmt.Errorf("Helm release %s/%s: %w", namespace, name, err)
		}
		if len(removed) > 0 {
			_ = ctx.Log.Warn(fmt.Sprintf("Helm release %s/%s: removed the record(s) %s that an interrupted Helm operation left pending; the objects stay and are adopted by this install",
				namespace, name, strings.Join(removed, ", ")), nil)
		}
		return nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return pulumi.ResourceHooks(&pulumi.ResourceHookBinding{
		BeforeCreate: []*pulumi.ResourceHook{hook},
		BeforeUpdate: []*pulumi.ResourceHook{hook},
	}), nil
}

// RemoveInterruptedHelmRecords deletes the revision records of the Helm release that
// are in a pending status and returns their names with their status. Each delete is
// conditional on the record's UID, so a record written again meanwhile is kept.
func RemoveInterruptedHelmRecords(ctx context.Context, secrets corev1client.SecretInterface, release string) ([]string, error) {
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + release})
	if err != nil {
		return nil, fmt.Errorf("listing its revision records: %w", err)
	}
	var removed []string
	for _, record := range list.Items {
		status := record.Labels["status"]
		if !interruptedHelmStatuses[status] {
			continue
		}
		if err := secrets.Delete(ctx, record.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &record.UID}}); err != nil {
			return removed, fmt.Errorf("removing its %s record %s: %w", status, record.Name, err)
		}
		removed = append(removed, fmt.Sprintf("%s (%s)", record.Name, status))
	}
	sort.Strings(removed)
	return removed, nil
}

// stringInput reads a string input of a hook's property map, through secrets and
// output values.
func stringInput(props resource.PropertyMap, key string) string {
	v, ok := props[resource.PropertyKey(key)]
	for ok {
		switch {
		case v.IsString():
			return v.StringValue()
		case v.IsSecret():
			v = v.SecretValue().Element
		case v.IsOutput() && v.OutputValue().Known:
			v = v.OutputValue().Element
		default:
			ok = false
		}
	}
	return ""
}
