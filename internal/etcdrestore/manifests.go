package etcdrestore

import (
	"bytes"
	"encoding/json"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"
)

// Manifests are the Jobs as YAML documents for `kubectl apply -f -`, after a comment
// header (each line of header gets a "# ").
func Manifests(jobs []*batchv1.Job, header []string) ([]byte, error) {
	var out bytes.Buffer
	for _, line := range header {
		fmt.Fprintf(&out, "# %s\n", line)
	}
	for _, job := range jobs {
		doc, err := cleanYAML(job)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", job.Name, err)
		}
		out.WriteString("---\n")
		out.Write(doc)
	}
	return out.Bytes(), nil
}

// cleanYAML is an object as YAML without what the API server fills in (status, and the
// creation timestamps the Go types write as null).
func cleanYAML(obj any) ([]byte, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	dropNulls(m)
	return yaml.Marshal(m)
}

// dropNulls removes null values at every depth (an empty object stays: emptyDir: {}).
func dropNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			dropNulls(e)
		}
	case []any:
		for _, e := range t {
			dropNulls(e)
		}
	}
}
