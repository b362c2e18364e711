package providerprobe

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The kcp objects the probe makes and reads, typed with the json names of kcp's API at
// the version the program pins (kcp's Go SDK is not served by the Go module proxy, so
// its types are not imported). Each is sent as unstructured through one helper,
// toUnstructured.
var (
	gvrWorkspace                = schema.GroupVersionResource{Group: "tenancy.kcp.io", Version: "v1alpha1", Resource: "workspaces"}
	gvrShard                    = schema.GroupVersionResource{Group: "core.kcp.io", Version: "v1alpha1", Resource: "shards"}
	gvrAPIResourceSchema        = schema.GroupVersionResource{Group: "apis.kcp.io", Version: "v1alpha1", Resource: "apiresourceschemas"}
	gvrAPIExport                = schema.GroupVersionResource{Group: "apis.kcp.io", Version: "v1alpha2", Resource: "apiexports"}
	gvrAPIBinding               = schema.GroupVersionResource{Group: "apis.kcp.io", Version: "v1alpha2", Resource: "apibindings"}
	gvrAPIExportEndpointSlice   = schema.GroupVersionResource{Group: "apis.kcp.io", Version: "v1alpha1", Resource: "apiexportendpointslices"}
	gvrCRD                      = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gvrClusterCachedResource    = schema.GroupVersionResource{Group: "cache.kcp.io", Version: "v1alpha1", Resource: "clustercachedresources"}
	gvrCachedResourceEndpoints  = schema.GroupVersionResource{Group: "cache.kcp.io", Version: "v1alpha1", Resource: "clustercachedresourceendpointslices"}
	kindClusterCachedEndpoints  = "ClusterCachedResourceEndpointSlice"
	shardAnnotation             = "core.kcp.io/shard"
	shardNameLabel              = "name"
	workspacePhaseReady         = "Ready"
	bindingPhaseBound           = "Bound"
	clusterCachedResourceReady  = "Ready"
	logicalClusterAnnotationKey = "kcp.io/cluster"
)

// workspace is tenancy.kcp.io/v1alpha1 Workspace.
type workspace struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              workspaceSpec   `json:"spec"`
	Status            workspaceStatus `json:"status,omitempty"`
}

type workspaceSpec struct {
	// Location.Selector matches the labels of kcp's Shard objects; every shard labels
	// its own Shard name=<shard name> when it registers.
	Location *workspaceLocation `json:"location,omitempty"`
	// Cluster is the logical cluster the workspace is stored under, set by kcp.
	Cluster string `json:"cluster,omitempty"`
	URL     string `json:"URL,omitempty"`
}

type workspaceLocation struct {
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

type workspaceStatus struct {
	Phase      string      `json:"phase,omitempty"`
	Conditions []condition `json:"conditions,omitempty"`
}

type condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// kcpShard is core.kcp.io/v1alpha1 Shard, as far as the probe reads it.
type kcpShard struct {
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		BaseURL             string `json:"baseURL"`
		ExternalURL         string `json:"externalURL,omitempty"`
		VirtualWorkspaceURL string `json:"virtualWorkspaceURL,omitempty"`
	} `json:"spec"`
}

// apiResourceSchema is apis.kcp.io/v1alpha1 APIResourceSchema. Its name must be
// <prefix>.<plural>.<group>.
type apiResourceSchema struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              apiResourceSchemaSpec `json:"spec"`
}

type apiResourceSchemaSpec struct {
	Group    string                     `json:"group"`
	Names    resourceNames              `json:"names"`
	Scope    string                     `json:"scope"`
	Versions []apiResourceSchemaVersion `json:"versions"`
}

type resourceNames struct {
	Plural   string `json:"plural"`
	Singular string `json:"singular"`
	Kind     string `json:"kind"`
	ListKind string `json:"listKind"`
}

type apiResourceSchemaVersion struct {
	Name    string `json:"name"`
	Served  bool   `json:"served"`
	Storage bool   `json:"storage"`
	// Schema is the version's OpenAPI v3 schema (openAPIV3Schema in a CRD).
	Schema json.RawMessage `json:"schema"`
}

// apiExport is apis.kcp.io/v1alpha2 APIExport.
type apiExport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              apiExportSpec `json:"spec"`
}

type apiExportSpec struct {
	Resources []exportedResource `json:"resources"`
}

type exportedResource struct {
	Name    string          `json:"name"`
	Group   string          `json:"group"`
	Schema  string          `json:"schema"`
	Storage resourceStorage `json:"storage"`
}

// resourceStorage is exactly one of CRD (objects stored in the consumers' workspaces)
// or Virtual (served from the endpoint slice Reference names).
type resourceStorage struct {
	CRD     *struct{}       `json:"crd,omitempty"`
	Virtual *virtualStorage `json:"virtual,omitempty"`
}

type virtualStorage struct {
	Reference    typedReference `json:"reference"`
	IdentityHash string         `json:"identityHash"`
}

type typedReference struct {
	APIGroup string `json:"apiGroup"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
}

// apiBinding is apis.kcp.io/v1alpha2 APIBinding.
type apiBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              apiBindingSpec `json:"spec"`
	Status            struct {
		Phase      string      `json:"phase,omitempty"`
		Conditions []condition `json:"conditions,omitempty"`
	} `json:"status,omitempty"`
}

type apiBindingSpec struct {
	Reference bindingReference `json:"reference"`
}

type bindingReference struct {
	Export *exportReference `json:"export"`
}

// exportReference names an APIExport by workspace path and name.
type exportReference struct {
	Path string `json:"path,omitempty"`
	Name string `json:"name"`
}

// endpointSlice is what the probe reads of an APIExportEndpointSlice (apis.kcp.io/v1alpha1)
// or a ClusterCachedResourceEndpointSlice (cache.kcp.io/v1alpha1): both list one URL
// per shard in status.endpoints.
type endpointSlice struct {
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            struct {
		Endpoints  []endpoint  `json:"endpoints,omitempty"`
		Conditions []condition `json:"conditions,omitempty"`
	} `json:"status,omitempty"`
}

type endpoint struct {
	URL string `json:"url"`
}

// customResourceDefinition is apiextensions.k8s.io/v1 CustomResourceDefinition, with one
// version.
type customResourceDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              crdSpec `json:"spec"`
	Status            struct {
		Conditions []condition `json:"conditions,omitempty"`
	} `json:"status,omitempty"`
}

type crdSpec struct {
	Group    string        `json:"group"`
	Names    resourceNames `json:"names"`
	Scope    string        `json:"scope"`
	Versions []crdVersion  `json:"versions"`
}

type crdVersion struct {
	Name    string    `json:"name"`
	Served  bool      `json:"served"`
	Storage bool      `json:"storage"`
	Schema  crdSchema `json:"schema"`
}

type crdSchema struct {
	OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema"`
}

// clusterCachedResource is cache.kcp.io/v1alpha1 ClusterCachedResource: it replicates
// the cluster-scoped objects of one resource of its workspace into kcp's cache server.
type clusterCachedResource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Group    string `json:"group"`
		Version  string `json:"version"`
		Resource string `json:"resource"`
	} `json:"spec"`
	Status struct {
		IdentityHash string      `json:"identityHash,omitempty"`
		Phase        string      `json:"phase,omitempty"`
		Conditions   []condition `json:"conditions,omitempty"`
	} `json:"status,omitempty"`
}

// clusterCachedResourceEndpointSlice is cache.kcp.io/v1alpha1
// ClusterCachedResourceEndpointSlice: it names the ClusterCachedResource and the
// APIExport whose bindings make a shard list its replication URL.
type clusterCachedResourceEndpointSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		ClusterCachedResource struct {
			Name string `json:"name"`
		} `json:"clusterCachedResource"`
		Export exportReference `json:"export"`
	} `json:"spec"`
}

// toUnstructured turns a typed object into what the dynamic client sends, through its
// JSON (the schemas are raw JSON, which only encoding/json writes as it is).
func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %v", obj, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("encoding %T: %v", obj, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// fromUnstructured reads an object the dynamic client returned into a typed one.
func fromUnstructured(u *unstructured.Unstructured, into any) error {
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(data, into)
}

func typeMeta(gvr schema.GroupVersionResource, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: gvr.GroupVersion().String(), Kind: kind}
}

// conditionsText lists conditions that are not True, for messages.
func conditionsText(conds []condition) string {
	var out string
	for _, c := range conds {
		if c.Status == "True" {
			continue
		}
		if out != "" {
			out += "; "
		}
		out += fmt.Sprintf("%s=%s", c.Type, c.Status)
		if c.Reason != "" {
			out += " (" + c.Reason
			if c.Message != "" {
				out += ": " + c.Message
			}
			out += ")"
		}
	}
	if out == "" {
		return "no condition is False"
	}
	return out
}
