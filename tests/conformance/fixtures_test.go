package conformance

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
)

var (
	namespaceGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	getOptions   = metav1.GetOptions{}
)

// decodeOne decodes a single YAML document.
func decodeOne(doc string) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := yamlutil.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096).Decode(&m); err != nil {
		return nil, fmt.Errorf("decoding fixture: %w\n%s", err, doc)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// kubeDNSService is the kube-dns Service kind (kubeadm) and GKE clusters have, at the
// tenth address of the Service range (%s).
const kubeDNSService = `apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
    kubernetes.io/cluster-service: "true"
    kubernetes.io/name: CoreDNS
spec:
  clusterIP: %s
  selector:
    k8s-app: kube-dns
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

// kubeadmCoreDNSConfigMap is kube-system/coredns as kubeadm creates it; the test sets
// its Corefile to mockstack.KindCorefile.
const kubeadmCoreDNSConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns
  namespace: kube-system
data:
  Corefile: ""
`
