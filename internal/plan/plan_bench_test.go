package plan_test

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/plan"
)

// benchmarkPlan measures what `go run ./cmd/plan -stack <stack>` does after start-up:
// run the composition under mocks and render every Kubernetes object as YAML.
func benchmarkPlan(b *testing.B, stack string) {
	path := filepath.Join("..", "..", "Pulumi."+stack+".yaml")
	b.ReportAllocs()
	for b.Loop() {
		rec, err := mockstack.RunStackFile(stack, path, mockstack.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := plan.WriteYAML(io.Discard, rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPlanKind(b *testing.B) { benchmarkPlan(b, "kind") }

func BenchmarkPlanGKE(b *testing.B) { benchmarkPlan(b, "gke") }
