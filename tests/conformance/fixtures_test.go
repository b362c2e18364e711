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
