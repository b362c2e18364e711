package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// LoadCRDs reads every CustomResourceDefinition in the YAML (and JSON) files under dir,
// recursively, multi-document, in path order. Any other document is an error: a
// directory of upstream CRDs that holds something else is not what the test thinks.
func LoadCRDs(dir string) ([]*unstructured.Unstructured, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var crds []*unstructured.Unstructured
	for _, path := range files {
		docs, err := ReadDocuments(path)
		if err != nil {
			return nil, err
		}
		for i, doc := range docs {
			if doc.GetKind() != "CustomResourceDefinition" || doc.GetAPIVersion() != "apiextensions.k8s.io/v1" {
				return nil, fmt.Errorf("%s: document %d is a %s %s, not an apiextensions.k8s.io/v1 CustomResourceDefinition",
					path, i+1, doc.GetAPIVersion(), doc.GetKind())
			}
			crds = append(crds, doc)
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition in %s", dir)
	}
	return crds, nil
}

// ReadDocuments decodes every non-empty document of a YAML or JSON file.
func ReadDocuments(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := yamlutil.NewYAMLOrJSONDecoder(f, 64<<10)
	var out []*unstructured.Unstructured
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(doc) > 0 {
			out = append(out, &unstructured.Unstructured{Object: doc})
		}
	}
}

// CRDKind is "<group>/<Kind>" of the kind a CRD defines, the key tests select CRDs by.
func CRDKind(crd *unstructured.Unstructured) string {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	return group + "/" + kind
}

// WaitEstablished waits until the API server has established every CRD named, for at
// most timeout; it stops early if server (when not nil) exits, and a timeout names the
// CRDs still pending.
func WaitEstablished(ctx context.Context, dyn dynamic.Interface, server *Process, timeout time.Duration, names ...string) error {
	pending := names
	var listErr error
	err := WaitFor(ctx, timeout, server, func() (bool, error) {
		list, err := dyn.Resource(crdResource).List(ctx, metav1.ListOptions{})
		if err != nil {
			listErr = err // a busy server may fail a list; the next poll asks again
			return false, nil
		}
		listErr = nil
		established := map[string]bool{}
		for _, item := range list.Items {
			established[item.GetName()] = conditionTrue(&item, "Established")
		}
		pending = nil
		for _, name := range names {
			if !established[name] {
				pending = append(pending, name)
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		pending = append([]string(nil), pending...)
		sort.Strings(pending)
		if listErr != nil {
			err = fmt.Errorf("%w; last list: %v", err, listErr)
		}
		return fmt.Errorf("CRDs not established (%w): %s", err, strings.Join(pending, ", "))
	}
	return nil
}

func conditionTrue(obj *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, cond := range conds {
		m, ok := cond.(map[string]any)
		if ok && m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}
