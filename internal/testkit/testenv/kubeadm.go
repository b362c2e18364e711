package testenv

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// KubeadmCoreDNSDeployment is kube-system/coredns as kubeadm creates it on a kind v1.34
// node: the object the kind stack patches, so that the tests patch what a real cluster has.
const KubeadmCoreDNSDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  replicas: 2
  selector:
    matchLabels:
      k8s-app: kube-dns
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 1
  template:
    metadata:
      labels:
        k8s-app: kube-dns
    spec:
      priorityClassName: system-cluster-critical
      serviceAccountName: coredns
      dnsPolicy: Default
      nodeSelector:
        kubernetes.io/os: linux
      tolerations:
        - key: CriticalAddonsOnly
          operator: Exists
        - key: node-role.kubernetes.io/control-plane
          effect: NoSchedule
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                labelSelector:
                  matchExpressions:
                    - key: k8s-app
                      operator: In
                      values: ["kube-dns"]
                topologyKey: kubernetes.io/hostname
      containers:
        - name: coredns
          image: registry.k8s.io/coredns/coredns:v1.12.1
          imagePullPolicy: IfNotPresent
          args: ["-conf", "/etc/coredns/Corefile"]
          resources:
            limits:
              memory: 170Mi
            requests:
              cpu: 100m
              memory: 70Mi
          volumeMounts:
            - name: config-volume
              mountPath: /etc/coredns
              readOnly: true
          ports:
            - name: dns
              containerPort: 53
              protocol: UDP
            - name: dns-tcp
              containerPort: 53
              protocol: TCP
            - name: metrics
              containerPort: 9153
              protocol: TCP
          livenessProbe:
            httpGet:
              path: /health
              port: 8080
              scheme: HTTP
            initialDelaySeconds: 60
            timeoutSeconds: 5
            successThreshold: 1
            failureThreshold: 5
          readinessProbe:
            httpGet:
              path: /ready
              port: 8181
              scheme: HTTP
          securityContext:
            allowPrivilegeEscalation: false
            capabilities:
              add: ["NET_BIND_SERVICE"]
              drop: ["ALL"]
            readOnlyRootFilesystem: true
      volumes:
        - name: config-volume
          configMap:
            name: coredns
            items:
              - key: Corefile
                path: Corefile
`

// KubeadmCoreDNSRBAC is the ClusterRole and binding kubeadm gives CoreDNS's
// ServiceAccount: its kubernetes plugin lists and watches Services, EndpointSlices,
// Pods and Namespaces.
const KubeadmCoreDNSRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [nodes]
  verbs: [get]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:coredns
subjects:
- kind: ServiceAccount
  name: coredns
  namespace: kube-system
`

// KubeadmKubeDNSService is the kube-dns Service kind (kubeadm) and GKE clusters have;
// %s is its ClusterIP, the tenth address of the Service range.
const KubeadmKubeDNSService = `apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
    kubernetes.io/cluster-service: "true"
    kubernetes.io/name: CoreDNS
spec:
  selector:
    k8s-app: kube-dns
  clusterIP: %s
  ports:
  - name: dns
    port: 53
    protocol: UDP
    targetPort: 53
  - name: dns-tcp
    port: 53
    protocol: TCP
    targetPort: 53
  - name: metrics
    port: 9153
    protocol: TCP
    targetPort: 9153
`

// CreateKubeadmCoreDNS creates what kubeadm installs for the cluster's DNS, with
// kubeadm's field manager as on a kind node: the kube-dns Service at clusterDNS, the
// RBAC, the ServiceAccount, the ConfigMap with corefile, and the Deployment.
func CreateKubeadmCoreDNS(ctx context.Context, kube kubernetes.Interface, clusterDNS, corefile string) error {
	var svc corev1.Service
	if err := yaml.Unmarshal(fmt.Appendf(nil, KubeadmKubeDNSService, clusterDNS), &svc); err != nil {
		return err
	}
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	docs := strings.Split(KubeadmCoreDNSRBAC, "\n---\n")
	if err := yaml.Unmarshal([]byte(docs[0]), &role); err != nil {
		return err
	}
	if err := yaml.Unmarshal([]byte(docs[1]), &binding); err != nil {
		return err
	}
	var deploy appsv1.Deployment
	if err := yaml.Unmarshal([]byte(KubeadmCoreDNSDeployment), &deploy); err != nil {
		return err
	}
	const ns = "kube-system"
	opts := metav1.CreateOptions{FieldManager: "kubeadm"}
	for _, step := range []struct {
		what   string
		create func() error
	}{
		{"Service kube-dns", func() error { _, err := kube.CoreV1().Services(ns).Create(ctx, &svc, opts); return err }},
		{"ClusterRole system:coredns", func() error { _, err := kube.RbacV1().ClusterRoles().Create(ctx, &role, opts); return err }},
		{"ClusterRoleBinding system:coredns", func() error {
			_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &binding, opts)
			return err
		}},
		{"ServiceAccount coredns", func() error {
			_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "coredns"}}, opts)
			return err
		}},
		{"ConfigMap coredns", func() error {
			_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "coredns"}, Data: map[string]string{"Corefile": corefile}}, opts)
			return err
		}},
		{"Deployment coredns", func() error { _, err := kube.AppsV1().Deployments(ns).Create(ctx, &deploy, opts); return err }},
	} {
		if err := step.create(); err != nil {
			return fmt.Errorf("creating %s: %w", step.what, err)
		}
	}
	return nil
}

// KubeadmCoreDNSImage is the image of kubeadm's CoreDNS Deployment.
func KubeadmCoreDNSImage() string {
	for _, line := range strings.Split(KubeadmCoreDNSDeployment, "\n") {
		if img, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok {
			return img
		}
	}
	panic("kubeadm's CoreDNS Deployment names no image")
}
