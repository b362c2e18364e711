package tests

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The users' kubeconfig, as each stack exports it: kcp's root workspace through the
// front proxy's public URL, and a user who signs in through kubelogin with the stack's
// issuer and client ID. No secret and no key in it, and not a Pulumi secret.
func TestUserKubeconfigSignsInWithOIDCThroughTheFrontProxy(t *testing.T) {
	want := map[string]struct {
		server   string
		serverCA bool
	}{
		// kind: the edge passes kcp's own certificate through, at the host port
		// kind/cluster.yaml maps it to.
		"kind": {server: "https://kcp.localhost:8443/clusters/root", serverCA: true},
		// gke: the Gateway presents a public certificate on 443.
		"gke": {server: "https://kcp.railgrid.example.com/clusters/root"},
	}
	for _, stack := range stacks {
		t.Run(stack, func(t *testing.T) {
			rec, cfg := runStack(t, stack), shippedConfig(t, stack)
			out := userKubeconfig(t, rec)
			kc, err := clientcmd.Load([]byte(out))
			require.NoError(t, err)
			require.Equal(t, naming.UserKubeconfigCluster(stack), kc.CurrentContext)
			ctx := kc.Contexts[kc.CurrentContext]
			require.NotNil(t, ctx)
			cluster, user := kc.Clusters[ctx.Cluster], kc.AuthInfos[ctx.AuthInfo]
			require.NotNil(t, cluster)
			require.NotNil(t, user)
			require.Len(t, kc.Clusters, 1)
			require.Len(t, kc.AuthInfos, 1)
			require.Equal(t, want[stack].server, cluster.Server)
			require.False(t, cluster.InsecureSkipTLSVerify)
			if want[stack].serverCA {
				ca := rec.Outputs["kcpRootServerCA"]
				require.True(t, ca.Known)
				require.NotEmpty(t, ca.Value)
				require.Equal(t, ca.Value, string(cluster.CertificateAuthorityData), "kcp's CA, the output kcpRootServerCA")
			} else {
				require.Empty(t, cluster.CertificateAuthorityData, "a public certificate: the system's trust store")
			}

			require.NotNil(t, user.Exec, "an exec credential plugin")
			require.Equal(t, "client.authentication.k8s.io/v1", user.Exec.APIVersion)
			require.Equal(t, "kubectl", user.Exec.Command)
			require.Equal(t, []string{"oidc-login", "get-token",
				"--oidc-issuer-url=" + cfg.OIDC.IssuerURL, "--oidc-client-id=" + cfg.OIDC.ClientID,
				"--oidc-extra-scope=email", "--oidc-extra-scope=groups"}, user.Exec.Args)
			require.EqualValues(t, "IfAvailable", user.Exec.InteractiveMode)
			require.NotEmpty(t, user.Exec.InstallHint)
			requireNoCredential(t, out)
		})
	}
}

// With the issuer's CA in the config, kubelogin gets it too.
func TestUserKubeconfigCarriesTheIssuerCAForKubelogin(t *testing.T) {
	for _, stack := range stacks {
		rec, err := runValues(t, stack, withIssuerCA(t, stack, issuerCAChain), mockstack.Options{})
		require.NoError(t, err)
		out := userKubeconfig(t, rec)
		kc, err := clientcmd.Load([]byte(out))
		require.NoError(t, err)
		user := kc.AuthInfos[naming.UserKubeconfigUser(stack)]
		require.NotNil(t, user)
		var caData []string
		for _, arg := range user.Exec.Args {
			if v, ok := strings.CutPrefix(arg, "--certificate-authority-data="); ok {
				caData = append(caData, v)
			}
		}
		require.Len(t, caData, 1, "%s: %v", stack, user.Exec.Args)
		decoded, err := base64.StdEncoding.DecodeString(caData[0])
		require.NoError(t, err)
		require.Equal(t, issuerCAChain, string(decoded))
		requireNoCredential(t, out)
	}
}

// userKubeconfig is the output userKubeconfig of a run: known, not secret, a string.
func userKubeconfig(t *testing.T, rec *mockstack.Recording) string {
	t.Helper()
	out, ok := rec.Outputs["userKubeconfig"]
	require.True(t, ok, "no output userKubeconfig")
	require.True(t, out.Known)
	require.False(t, out.Secret, "userKubeconfig holds no secret and is not a Pulumi secret")
	text, ok := out.Value.(string)
	require.True(t, ok, "userKubeconfig is %T", out.Value)
	return text
}

// requireNoCredential fails if a kubeconfig holds anything that authenticates by itself.
func requireNoCredential(t *testing.T, text string) {
	t.Helper()
	kc, err := clientcmd.Load([]byte(text))
	require.NoError(t, err)
	for name, u := range kc.AuthInfos {
		require.Empty(t, u.ClientCertificateData, name)
		require.Empty(t, u.ClientKeyData, name)
		require.Empty(t, u.ClientCertificate, name)
		require.Empty(t, u.ClientKey, name)
		require.Empty(t, u.Token, name)
		require.Empty(t, u.TokenFile, name)
		require.Empty(t, u.Username, name)
		require.Empty(t, u.Password, name)
		require.Nil(t, u.AuthProvider, name)
		require.Empty(t, u.Exec.Env, name)
		for _, arg := range u.Exec.Args {
			for _, flag := range []string{"--oidc-client-secret", "--password", "--username"} {
				require.False(t, strings.HasPrefix(arg, flag), "%s: %s", name, arg)
			}
		}
	}
	require.NotContains(t, text, "PRIVATE KEY")
	require.NotContains(t, text, base64.StdEncoding.EncodeToString([]byte("-----BEGIN PRIVATE KEY")))
	require.NotContains(t, text, mockstack.FakeKubeconfigMarker)
}

// kind/cluster.yaml maps the edge's NodePort (kind.gatewayNodePort's default) to the
// host port the users' kubeconfig names.
func TestKindClusterMapsTheEdgeToTheUsersPort(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "kind", "cluster.yaml"))
	require.NoError(t, err)
	var cluster struct {
		Nodes []struct {
			ExtraPortMappings []struct {
				ContainerPort int `yaml:"containerPort"`
				HostPort      int `yaml:"hostPort"`
			} `yaml:"extraPortMappings"`
		} `yaml:"nodes"`
	}
	require.NoError(t, yaml.Unmarshal(data, &cluster))
	var mapped []string
	for _, n := range cluster.Nodes {
		for _, m := range n.ExtraPortMappings {
			mapped = append(mapped, fmt.Sprintf("%d->%d", m.ContainerPort, m.HostPort))
		}
	}
	require.True(t, slices.Contains(mapped, fmt.Sprintf("%d->%d", config.DefaultKindGatewayNodePort, naming.KindEdgeHostPort)), "%v", mapped)
}
