package tests

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The names the config checks for collisions are the names the program declares:
// every Namespace, Service, StatefulSet and edge route of the stacks (the shipped ones,
// and variants with more shards) is among config.GeneratedObjects, and every object
// GeneratedObjects says the program declares is declared. The operator's Deployments
// and Services follow kcp-operator internal/resources/resources.go (see package
// naming); they are not declared by the program, so no run can show them.
func TestGeneratedNamesAreTheDeclaredNames(t *testing.T) {
	checked := map[string]bool{"Namespace": true, "Service": true, "StatefulSet": true, "TLSRoute": true, "HTTPRoute": true}
	for _, stack := range stacks {
		for _, shards := range [][]string{nil, {"beta", "gamma-2"}} {
			t.Run(fmt.Sprintf("%s+%d", stack, len(shards)), func(t *testing.T) {
				values := stackValues(t, stack)
				for i, name := range shards {
					addShard(values, name, name+".kcp.example.com", fmt.Sprintf("%s.%d", clusterIPPrefix(stack), 120+i))
				}
				rec, err := runValues(t, stack, values, mockstack.Options{})
				require.NoError(t, err)
				cfg, err := config.FromValues(encode(t, values))
				require.NoError(t, err)

				var declaredNames []string
				for _, res := range rec.Resources {
					kind := kubernetesKind(res.Type)
					if res.Read || !checked[kind] {
						continue
					}
					declaredNames = append(declaredNames, objectID(kind, metadataString(res, "namespace"), mockstack.MetadataName(res)))
				}
				var predicted []string
				listeners := map[string]bool{}
				for _, o := range cfg.GeneratedObjects() {
					switch {
					case o.Kind == "GatewayListener":
						listeners[o.Name] = true
					case o.CreatedBy == config.CreatedByProgram:
						predicted = append(predicted, objectID(o.Kind, o.Namespace, o.Name))
					}
				}
				sort.Strings(declaredNames)
				sort.Strings(predicted)
				require.Equal(t, predicted, declaredNames)
				require.Len(t, declaredNames, 4+3*len(cfg.Kcp.AllShards())+2*(len(cfg.Kcp.AllShards())+1),
					"4 namespaces, 3 etcd objects per shard, an owned Service and a route per exposed component")

				if stack == "gke" {
					got := map[string]bool{}
					gateway := inputs(object(t, rec, "Gateway", naming.EdgeGatewayName))
					for _, l := range get(t, gateway, "spec.listeners").([]any) {
						got[l.(map[string]any)["name"].(string)] = true
					}
					require.Equal(t, listeners, got)
				}
			})
		}
	}
}

func clusterIPPrefix(stack string) string {
	if stack == "gke" {
		return "34.118.224"
	}
	return "10.96.0"
}

// kubernetesKind is the Kind of a "kubernetes:<group/version>:<Kind>" type token.
func kubernetesKind(typ string) string {
	if !strings.HasPrefix(typ, "kubernetes:") {
		return ""
	}
	return typ[strings.LastIndex(typ, ":")+1:]
}

func metadataString(res mockstack.Resource, field string) string {
	meta, ok := res.Inputs["metadata"]
	if !ok || !meta.IsObject() {
		return ""
	}
	v, ok := meta.ObjectValue()[resource.PropertyKey(field)]
	if !ok || !v.IsString() {
		return ""
	}
	return v.StringValue()
}

func objectID(kind, namespace, name string) string { return kind + " " + namespace + "/" + name }
