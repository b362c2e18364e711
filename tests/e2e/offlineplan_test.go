//go:build linux

package e2e

import (
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
	"github.com/railgrid/railgrid-kcp/naming"
)

// rendered is the offline plan of the stack's current config.
type rendered struct {
	cfg     *config.Config
	values  map[string]string
	rec     *mockstack.Recording
	objects []plan.Object
}

// render runs the composition under mocks for the stack's current config file, as
// cmd/plan does.
func (s *e2eStack) render() rendered {
	s.t.Helper()
	values, err := config.ReadStackFile(s.cfgFile)
	if err != nil {
		s.t.Fatalf("reading %s: %v", s.cfgFile, err)
	}
	cfg, err := config.ParseStackFile(s.cfgFile)
	if err != nil {
		s.t.Fatalf("the e2e stack config is invalid: %v", err)
	}
	rec, err := mockstack.RunConfig(stackName, values, mockstack.Options{})
	if err != nil {
		s.t.Fatalf("rendering the offline plan: %v", err)
	}
	return rendered{cfg: cfg, values: values, rec: rec, objects: plan.KubernetesObjects(rec)}
}

// urnOf returns the URN of the declared Kubernetes object of a kind and metadata name.
func (r rendered) urnOf(kind, name string) string {
	for _, o := range r.objects {
		if o.Manifest["kind"] == kind && !o.Patch && mockstack.MetadataName(o.Resource) == name {
			return o.Resource.URN
		}
	}
	return ""
}

// releaseURN is the URN of the kcp-operator Helm release.
func (r rendered) releaseURN() string { return r.releaseURNOf(naming.OperatorReleaseName) }

// releaseURNOf is the URN of the Helm release of that name, or "" if the plan has none.
func (r rendered) releaseURNOf(name string) string {
	for _, res := range r.rec.ByType("kubernetes:helm.sh/v3:Release") {
		if v, ok := res.Inputs["name"]; ok && v.IsString() && v.StringValue() == name {
			return res.URN
		}
	}
	return ""
}
