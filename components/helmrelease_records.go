package components

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/railgrid/railgrid-kcp/naming"
)

// Helm's storage driver (the default, "secret") keeps one Secret per release revision,
// labelled owner=helm, name=<release>, status=<status>. A Helm client killed while it
// installs, upgrades or rolls back leaves its revision in a pending status, and Helm
// then refuses every later install ("cannot re-use a name that is still in use") and
// upgrade ("another operation (install/upgrade/rollback) is in progress") of the release
// (pulumi-kubernetes #2054 and #1727: the Release resource does not recover from it).
var interruptedHelmStatuses = map[string]bool{"pending-install": true, "pending-upgrade": true, "pending-rollback": true}

// newHelmRecordRepair registers the hook that removes the revision records an
// interrupted Helm operation left pending, just before the engine installs or upgrades
// the release again. The engine calls it only when it is about to create or update the
// release (never in a preview), and by then the stack's lock is held: no other
// operation of this stack can be in flight on the release. Only pending records of the
// release being installed are removed; its objects and its deployed revisions stay, and
// Helm adopts the objects (they carry the release's ownership annotations).
func newHelmRecordRepair(ctx *pulumi.Context, access clusterAccess) (pulumi.ResourceOption, error) {
	hook, err := ctx.RegisterResourceHook(naming.HelmRecordRepairHook, func(args *pulumi.ResourceHookArgs) error {
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
