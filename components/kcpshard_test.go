package components

import (
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
)

// serverMocks records each resource's inputs and the names of what it depends on.
type serverMocks struct {
	mu        sync.Mutex
	inputs    map[string]resource.PropertyMap
	dependsOn map[string][]string
}

func (m *serverMocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inputs[args.Name] = args.Inputs
	var deps []string
	for _, urn := range args.RegisterRPC.GetDependencies() {
		deps = append(deps, resource.URN(urn).Name())
	}
	sort.Strings(deps)
	m.dependsOn[args.Name] = deps
	return args.Name + "-id", args.Inputs, nil
}

func (m *serverMocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return args.Args, nil
}

// A shard is built from its named inputs alone, with no Config: its Shard object carries
// the image, replicas, hostname, auth and etcd endpoints it was given, joins the root
// shard it was given, and waits for that root shard, its etcd and the operator release;
// its owned Service has the ClusterIP it was given.
func TestAShardIsBuiltFromItsNamedInputsAlone(t *testing.T) {
	mocks := &serverMocks{inputs: map[string]resource.PropertyMap{}, dependsOn: map[string][]string{}}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		// Stand-ins for what the shard is created after.
		ns, err := corev1.NewNamespace(ctx, "kcp-system", &corev1.NamespaceArgs{})
		if err != nil {
			return err
		}
		release, err := NewHelmRelease(ctx, "operator-release", &HelmReleaseArgs{Chart: pulumi.String("kcp-operator")})
		if err != nil {
			return err
		}
		sts, err := appsv1.NewStatefulSet(ctx, "etcd-beta", &appsv1.StatefulSetArgs{})
		if err != nil {
			return err
		}
		rootObject, err := newKcpObject(ctx, "root", kcpapi.KindRootShard, "root", struct{}{}, nil)
		if err != nil {
			return err
		}
		_, err = NewKcpShard(ctx, "shard-beta", &KcpShardArgs{
			KcpServerArgs: KcpServerArgs{
				Image:     &kcpapi.ImageSpec{Repository: "example.org/kcp", Tag: "v9.9.9"},
				Auth:      &kcpapi.AuthSpec{ServiceAccount: &kcpapi.ServiceAccountAuthentication{Enabled: true}},
				Hostname:  "beta.kcp.example.org",
				ClusterIP: "10.0.0.9",
				Replicas:  2,
				Operator:  &KcpOperator{Release: release, KcpNamespace: ns},
			},
			Name:      "beta",
			Etcd:      &EtcdCluster{Shard: "beta", Endpoints: []string{"http://etcd-beta-0:2379"}, StatefulSet: sts},
			RootShard: &KcpRootShard{KcpServer: KcpServer{Name: "root", Object: rootObject}},
		})
		return err
	}, pulumi.WithMocks("railgrid-kcp", "test", mocks))
	if err != nil {
		t.Fatal(err)
	}

	spec := mocks.inputs["shard-beta"]["spec"]
	want := resource.NewPropertyValue(map[string]interface{}{
		"image":     map[string]interface{}{"repository": "example.org/kcp", "tag": "v9.9.9"},
		"replicas":  2,
		"extraArgs": []interface{}{"--feature-gates=CacheAPIs=true,WorkspaceMounts=true", "--shard-virtual-workspace-url=https://beta.kcp.example.org"},
		"certificateTemplates": map[string]interface{}{
			"server": map[string]interface{}{"spec": map[string]interface{}{"dnsNames": []interface{}{"beta.kcp.example.org"}}},
		},
		"auth":      map[string]interface{}{"serviceAccount": map[string]interface{}{"enabled": true}},
		"etcd":      map[string]interface{}{"endpoints": []interface{}{"http://etcd-beta-0:2379"}},
		"rootShard": map[string]interface{}{"ref": map[string]interface{}{"name": "root"}},
	})
	if !spec.DeepEquals(want) {
		t.Errorf("the Shard's spec:\n got %v\nwant %v", spec, want)
	}
	if got, want := mocks.dependsOn["shard-beta"], []string{"etcd-beta", "operator-release", "root"}; !slices.Equal(got, want) {
		t.Errorf("the Shard waits for %v, want %v", got, want)
	}
	clusterIP := mocks.inputs["shard-beta-service"]["spec"].ObjectValue()["clusterIP"]
	if !clusterIP.IsString() || clusterIP.StringValue() != "10.0.0.9" {
		t.Errorf("the owned Service's clusterIP is %v, want 10.0.0.9", clusterIP)
	}
}
