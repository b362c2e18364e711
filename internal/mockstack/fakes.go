package mockstack

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/config/stackconfig"
	"github.com/railgrid/railgrid-kcp/naming"
)

// FakeMintTime is when the fake operator "minted" the hub kubeconfig; its certificate
// expires FakeMintTime + the configured validity.
var FakeMintTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// FakeKubeconfigMarker is in the fake client certificate's subject, so tests can look
// for the kubeconfig in places it must not appear.
const FakeKubeconfigMarker = "railgrid-kcp-mock-credential"

// KindCorefile is kubeadm's default Corefile as a kind cluster has it.
const KindCorefile = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
`

// Computed is what a fake gives for a value the cluster assigns at deployment, such as
// an object's UID: cmd/plan prints it as is (plan.ComputedPlaceholder).
const Computed = "<computed at deployment>"

func fakeState(args pulumi.MockResourceArgs, opts Options, validity time.Duration) (string, resource.PropertyMap, []string, error) {
	out := args.Inputs.Copy()
	var faked []string
	set := func(key string, value any) {
		out[resource.PropertyKey(key)] = resource.NewPropertyValue(value)
		faked = append(faked, key)
	}
	id := ""
	if args.Custom && !opts.DryRun {
		id = args.Name + "-id"
	}
	switch args.TypeToken {
	case "kubernetes:core/v1:Secret":
		if strings.HasPrefix(args.ID, naming.NamespaceKcp+"/"+naming.KubeconfigName) {
			kubeconfig, err := fakeKubeconfig(validity)
			if err != nil {
				return "", nil, nil, err
			}
			set("data", map[string]any{naming.KubeconfigSecretKey: base64.StdEncoding.EncodeToString(kubeconfig)})
		}
		// The API server gives a Secret the program creates its UID (the hub copy's Job
		// carries it), which no plan can know.
		if args.ReadRPC == nil {
			metadata := resource.PropertyMap{}
			if m, ok := args.Inputs["metadata"]; ok && m.IsObject() {
				metadata = m.ObjectValue().Copy()
			}
			metadata["uid"] = resource.NewStringProperty(Computed)
			out["metadata"] = resource.NewObjectProperty(metadata)
			faked = append(faked, "metadata")
		}
	case "kubernetes:core/v1:ConfigMap":
		if args.ID == naming.NamespaceKubeSystem+"/"+naming.CoreDNSConfigMap {
			set("data", map[string]any{naming.CorefileKey: KindCorefile})
		}
	case "kubernetes:core/v1:PersistentVolumeClaim":
		// A kept etcd claim, bound as the volume provisioner binds it.
		if args.ReadRPC != nil {
			set("spec", map[string]any{"volumeName": "pvc-fake-" + strings.ReplaceAll(args.ID, "/", "-")})
		}
	case "kubernetes:helm.sh/v3:Release":
		set("status", map[string]any{"status": "deployed", "revision": 1})
	case "random:index/randomId:RandomId":
		set("hex", "5eed0001")
		set("b64Std", "Xu0AAQ==")
		set("b64Url", "Xu0AAQ")
		set("dec", "1592590337")
	case "gcp:serviceaccount/account:Account":
		project := stringInput(args.Inputs, "project")
		email := fmt.Sprintf("%s@%s.iam.gserviceaccount.com", stringInput(args.Inputs, "accountId"), project)
		set("email", email)
		set("member", "serviceAccount:"+email)
		set("name", fmt.Sprintf("projects/%s/serviceAccounts/%s", project, email))
	case "gcp:storage/bucket:Bucket":
		set("url", "gs://"+stringInput(args.Inputs, "name"))
	}
	if args.ReadRPC != nil {
		id = args.ID
		// As the engine does: outputs a read asks to keep secret come back secret.
		for _, k := range args.ReadRPC.GetAdditionalSecretOutputs() {
			if v, ok := out[resource.PropertyKey(k)]; ok && !v.IsSecret() {
				out[resource.PropertyKey(k)] = resource.MakeSecret(v)
			}
		}
	}
	return id, out, faked, nil
}

func fakeInvoke(args pulumi.MockCallArgs, opts Options) (resource.PropertyMap, bool, error) {
	switch args.Token {
	case stackconfig.ReadStackOutputsToken:
		// The stack's own outputs of its last up (stackconfig.ReadPreviousShards).
		outputs := map[string]any{}
		if opts.Previous != nil {
			shards := map[string]any{}
			for name, e := range opts.Previous {
				shards[name] = map[string]any{"hostname": e.Hostname, "clusterIP": e.ClusterIP}
			}
			outputs[config.PreviousShardsOutput] = shards
		}
		return resource.NewPropertyMapFromMap(map[string]any{"name": stringInput(args.Args, "name"), "outputs": outputs}), true, nil
	case "gcp:container/getCluster:getCluster":
		project := stringInput(args.Args, "project")
		location := stringInput(args.Args, "location")
		name := stringInput(args.Args, "name")
		return resource.NewPropertyMapFromMap(map[string]any{
			"id":               fmt.Sprintf("projects/%s/locations/%s/clusters/%s", project, location, name),
			"name":             name,
			"endpoint":         "203.0.113.10",
			"masterAuths":      []any{map[string]any{"clusterCaCertificate": base64.StdEncoding.EncodeToString([]byte("fake cluster CA"))}},
			"servicesIpv4Cidr": opts.GKEServiceCIDR,
			"ipAllocationPolicies": []any{map[string]any{
				"servicesIpv4CidrBlock": opts.GKEServiceCIDR,
			}},
			"network": fmt.Sprintf("projects/%s/global/networks/railgrid", project),
		}), true, nil
	}
	return nil, false, fmt.Errorf("mockstack: no fake for invoke %s", args.Token)
}

func stringInput(m resource.PropertyMap, key string) string {
	v, ok := m[resource.PropertyKey(key)]
	if !ok {
		return ""
	}
	if v.IsSecret() {
		v = v.SecretValue().Element
	}
	if !v.IsString() {
		return ""
	}
	return v.StringValue()
}

// fakeKubeconfig is a kubeconfig as the operator writes it for a frontProxyRef target:
// the in-cluster front-proxy Service, kcp's server CA and an admin client certificate.
func fakeKubeconfig(validity time.Duration) ([]byte, error) {
	certs, err := mintCerts(validity)
	if err != nil {
		return nil, err
	}
	server := fmt.Sprintf("https://%s:%d", naming.OperatorServiceHost(naming.FrontProxyDeployment(naming.FrontProxyName)), naming.KcpPort)
	kubeconfig := strings.Join([]string{
		"apiVersion: v1",
		"kind: Config",
		"clusters:",
		"- name: default",
		"  cluster:",
		"    server: " + server + "/clusters/root",
		"    certificate-authority-data: " + base64.StdEncoding.EncodeToString(certs.caPEM),
		"contexts:",
		"- name: default",
		"  context: {cluster: default, user: default}",
		"current-context: default",
		"users:",
		"- name: default",
		"  user:",
		"    client-certificate-data: " + base64.StdEncoding.EncodeToString(certs.certPEM),
		"    client-key-data: " + base64.StdEncoding.EncodeToString(certs.keyPEM),
		"",
	}, "\n")
	return []byte(kubeconfig), nil
}
