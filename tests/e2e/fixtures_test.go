//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// fieldManager is the field manager of everything the test itself writes.
const fieldManager = "railgrid-e2e"

// zones are the topology.kubernetes.io/zone values of the three fake nodes.
var zones = []string{"zone-a", "zone-b", "zone-c"}

// prepareCluster gives the bare control plane what a fresh kind cluster has and what the
// kind stack expects to find: three Ready nodes over three zones, the StorageClass
// "standard", kubeadm's CoreDNS ConfigMap and Deployment, and the placement of Envoy's
// proxy pods on the kwok nodes (testenv.InstallEnvoyProxyPlacement: no Envoy binary is
// built here, while Envoy Gateway's control plane in the same namespace runs on the real
// node). The stack's charts install cert-manager, Envoy Gateway, the kcp-operator, their
// namespaces and their CRDs. With certManagerPresent (the second machine), the test
// installs what a cluster with cert-manager has for its controller, which runs as a
// process: the cert-manager namespace and cert-manager's CRDs.
func prepareCluster(t *testing.T, ctx context.Context, c *cluster, crdsDir string, certManagerPresent bool) {
	t.Helper()
	start := time.Now()
	c.certManagerPresent = certManagerPresent
	kube := c.kube
	for i, zone := range zones {
		name := fmt.Sprintf("e2e-node-%d", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"kubernetes.io/hostname":        name,
				"kubernetes.io/os":              "linux",
				"kubernetes.io/arch":            "amd64",
				"topology.kubernetes.io/zone":   zone,
				"topology.kubernetes.io/region": "e2e",
				kwokNodeLabel:                   kwokNodeLabelValue,
			},
		}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
			t.Fatalf("creating node %s: %v", name, err)
		}
	}
	retain := corev1.PersistentVolumeReclaimRetain
	immediate := storagev1.VolumeBindingImmediate
	if _, err := kube.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "standard"},
		Provisioner:       "kubernetes.io/no-provisioner",
		ReclaimPolicy:     &retain,
		VolumeBindingMode: &immediate,
	}, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
		t.Fatalf("creating StorageClass standard: %v", err)
	}
	if err := testenv.InstallEnvoyProxyPlacement(ctx, kube, map[string]string{kwokNodeLabel: kwokNodeLabelValue}); err != nil {
		t.Fatal(err)
	}

	var crdNames []string
	if certManagerPresent {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: naming.NamespaceCertManager}},
			metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
			t.Fatalf("creating namespace %s: %v", naming.NamespaceCertManager, err)
		}
		kinds := map[string]bool{}
		for _, k := range certManagerKinds {
			kinds[k] = true
		}
		crds, err := selectCRDs(crdsDir, kinds)
		if err != nil {
			t.Fatalf("reading the upstream CRDs (set %s to another directory): %v", testenv.EnvCRDsDir, err)
		}
		for _, crd := range crds {
			if _, err := c.dyn.Resource(crdGVR).Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
				t.Fatalf("installing CRD %s: %v", crd.GetName(), err)
			}
			crdNames = append(crdNames, crd.GetName())
		}
		if err := testenv.WaitEstablished(ctx, c.dyn, c.apiserver, 2*time.Minute, crdNames...); err != nil {
			t.Fatal(err)
		}
	}

	// kubeadm's CoreDNS, written with kubeadm's field manager like on a kind node; it
	// runs on the real node and is the cluster's DNS.
	if err := testenv.CreateKubeadmCoreDNS(ctx, kube, clusterDNSIP(t, c), mockstack.KindCorefile); err != nil {
		t.Fatal(err)
	}

	// The real node must run pods before anything else can be tested: CoreDNS rolling
	// out proves it (kwok's nodes are Ready once kwok has seen them).
	if err := testenv.WaitFor(ctx, 2*time.Minute, nil, func() (bool, error) {
		if err := c.running(); err != nil {
			return false, err
		}
		d, err := kube.AppsV1().Deployments(naming.NamespaceKubeSystem).Get(ctx, naming.CoreDNSDeployment, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return deploymentReady(d.Generation, d.Status, d.Spec.Replicas), nil
	}); err != nil {
		t.Fatalf("kube-system/coredns did not roll out on the real node: %v\n%s", err, testenv.PodProblems(ctx, c.kube, naming.NamespaceKubeSystem))
	}
	t.Logf("cluster prepared in %s: the real node and %d kwok nodes in zones %v, StorageClass standard, CoreDNS, the Envoy proxies' placement, %d CRDs",
		time.Since(start).Round(time.Millisecond), len(zones), zones, len(crdNames))
}

func deploymentReady(generation int64, st appsv1.DeploymentStatus, replicas *int32) bool {
	want := int32(1)
	if replicas != nil {
		want = *replicas
	}
	return st.ObservedGeneration >= generation && st.UpdatedReplicas == want && st.ReadyReplicas == want &&
		st.AvailableReplicas == want && st.Replicas == want
}

// certManagerKinds are the kinds of the CRDs cert-manager's controller watches.
var certManagerKinds = []string{
	"cert-manager.io/Certificate", "cert-manager.io/CertificateRequest", "cert-manager.io/Issuer", "cert-manager.io/ClusterIssuer",
	"acme.cert-manager.io/Order", "acme.cert-manager.io/Challenge",
}

// selectCRDs reads the CRDs of the given kinds ("<group>/<Kind>") from the cert-manager,
// Gateway API and Envoy Gateway folders of dir; a kind none of them defines is an error.
func selectCRDs(dir string, kinds map[string]bool) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	found := map[string]bool{}
	for _, folder := range []string{"cert-manager", "gateway-api", "envoy-gateway"} {
		crds, err := testenv.LoadCRDs(filepath.Join(dir, folder))
		if err != nil {
			return nil, err
		}
		for _, crd := range crds {
			if k := testenv.CRDKind(crd); kinds[k] {
				found[k] = true
				out = append(out, crd)
			}
		}
	}
	var missing []string
	for k := range kinds {
		if !found[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		return nil, fmt.Errorf("no CRD in %s for %s", dir, strings.Join(missing, ", "))
	}
	return out, nil
}

// volumeBinder plays the storage provisioner of the StorageClass "standard": for every
// pending claim of that class it creates a directory under the cluster's dir and a
// hostPath PersistentVolume of it reserved for the claim (claimRef), which the PV
// controller then binds and the real node mounts. The directory is writable by all, as a
// provisioner's volume is for a pod's non-root user (etcd runs as one).
type volumeBinder struct {
	mu      sync.Mutex
	created []string
	paused  atomic.Bool // holds claims Pending, as a slow provisioner does (killed-up)
}

func startVolumeBinder(t *testing.T, ctx context.Context, c *cluster) *volumeBinder {
	b := &volumeBinder{}
	t.Cleanup(poll(ctx, 300*time.Millisecond, func(ctx context.Context) {
		if b.paused.Load() {
			return // nothing is bound while paused
		}
		if err := b.sync(ctx, c); err != nil && ctx.Err() == nil {
			t.Logf("volume binder: %v", err)
		}
	}))
	return b
}

// poll calls step every interval, in a goroutine of its own, until ctx ends or stop is
// called. stop waits for a step in progress to return; calling it again does nothing.
// The parts of the cluster the test plays itself (volume binder, request approver) and
// its watchers (finalizer lifter, upgrade order) run on it.
func poll(ctx context.Context, every time.Duration, step func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			step(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (b *volumeBinder) sync(ctx context.Context, c *cluster) error {
	claims, err := c.kube.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, pvc := range claims.Items {
		if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "standard" || pvc.Spec.VolumeName != "" ||
			pvc.Status.Phase != corev1.ClaimPending || pvc.DeletionTimestamp != nil {
			continue
		}
		name := "e2e-pv-" + string(pvc.UID)
		size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if size.IsZero() {
			size = resource.MustParse("1Gi")
		}
		dir := filepath.Join(c.dir, "volumes", string(pvc.UID))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			return err
		}
		hostPath := corev1.HostPathDirectory
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"railgrid.io/e2e-volume": "true"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
				AccessModes:                   pvc.Spec.AccessModes,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              "standard",
				ClaimRef: &corev1.ObjectReference{
					APIVersion: "v1", Kind: "PersistentVolumeClaim",
					Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
				},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: dir, Type: &hostPath,
				}},
			},
		}
		if _, err := c.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return fmt.Errorf("creating %s for %s/%s: %w", name, pvc.Namespace, pvc.Name, err)
		}
		b.mu.Lock()
		b.created = append(b.created, pvc.Namespace+"/"+pvc.Name)
		b.mu.Unlock()
	}
	return nil
}
