package tests

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

// withIssuerCA is a shipped stack's config with the issuer's CA chain as PEM text.
func withIssuerCA(t *testing.T, stack, pemText string) map[string]any {
	t.Helper()
	values := stackValues(t, stack)
	setIn(values, "oidc", "caCertificates", pemText)
	return values
}

// The issuer's CA chain given in the config becomes a Secret of the program's in
// kcp-system holding exactly that text, every kcp server's caFileRef names it, and every
// kcp object waits for it.
func TestIssuerCACertificatesBecomeTheSecretEveryKcpServerReads(t *testing.T) {
	for _, stack := range stacks {
		t.Run(stack, func(t *testing.T) {
			values := withIssuerCA(t, stack, issuerCAs.chain)
			rec, err := runValues(t, stack, values, mockstack.Options{})
			require.NoError(t, err)
			secret := object(t, rec, "Secret", naming.OIDCIssuerCASecret)
			require.Equal(t, naming.NamespaceKcp, getString(t, inputs(secret), "metadata.namespace"))
			require.Equal(t, "Opaque", getString(t, inputs(secret), "type"))
			data := secret.Inputs["data"]
			if data.IsSecret() {
				data = data.SecretValue().Element
			}
			require.True(t, data.IsObject())
			require.Len(t, data.ObjectValue(), 1, "one key")
			encoded := data.ObjectValue()[naming.OIDCIssuerCAKey]
			require.True(t, encoded.IsString(), "key %s", naming.OIDCIssuerCAKey)
			decoded, err := base64.StdEncoding.DecodeString(encoded.StringValue())
			require.NoError(t, err)
			require.Equal(t, issuerCAs.chain, string(decoded), "exactly the PEM text of the config")

			cfg, err := config.FromValues(encode(t, values))
			require.NoError(t, err)
			objects := kcpObjects(t, rec, cfg)
			require.Len(t, objects, 2+len(cfg.Kcp.Shards))
			for name, obj := range objects {
				require.Equal(t, naming.OIDCIssuerCASecret, getString(t, obj, "spec.auth.oidc.caFileRef.name"), name)
				require.Equal(t, naming.OIDCIssuerCAKey, getString(t, obj, "spec.auth.oidc.caFileRef.key"), name)
			}
			servers := [][2]string{{"RootShard", naming.RootShardName}, {"FrontProxy", naming.FrontProxyName}}
			for _, s := range cfg.Kcp.Shards {
				servers = append(servers, [2]string{"Shard", s.Name})
			}
			for _, server := range servers {
				obj := object(t, rec, server[0], server[1])
				require.Contains(t, obj.Dependencies, secret.URN, "%s %s waits for the issuer's CA Secret it mounts", server[0], server[1])
			}
		})
	}
}

// Without oidc.caCertificates there is no such Secret; with oidc.caSecret, caFileRef
// names the Secret made by hand and the program declares none.
func TestIssuerCASecretIsTheProgramsOnlyWithCACertificates(t *testing.T) {
	for _, stack := range stacks {
		_, declared := runStack(t, stack).KubernetesObject("Secret", naming.OIDCIssuerCASecret)
		require.False(t, declared, "%s: the shipped stack gives no CA", stack)
	}
	values := stackValues(t, "kind")
	setIn(values, "oidc", "caSecret", map[string]any{"name": "hub-issuer-ca"})
	rec, err := runValues(t, "kind", values, mockstack.Options{})
	require.NoError(t, err)
	_, declared := rec.KubernetesObject("Secret", naming.OIDCIssuerCASecret)
	require.False(t, declared)
	require.Equal(t, "hub-issuer-ca", getString(t, inputs(object(t, rec, "RootShard", naming.RootShardName)), "spec.auth.oidc.caFileRef.name"))
}

// A CA chain with Windows line ends, as a file copied from another system has them, is
// PEM all the same.
func TestIssuerCACertificatesWithCRLFAreTaken(t *testing.T) {
	crlf := strings.ReplaceAll(issuerCAs.chain, "\n", "\r\n")
	_, err := config.FromValues(encode(t, withIssuerCA(t, "gke", crlf)))
	require.NoError(t, err)
}

// A refused CA text is summarised in the error, and a private key pasted with it shows
// nowhere in it.
func TestRefusedIssuerCAIsSummarisedAndShowsNoKey(t *testing.T) {
	_, err := config.FromValues(encode(t, withIssuerCA(t, "kind", issuerCAs.withKey)))
	require.Error(t, err)
	msg := err.Error()
	require.Contains(t, msg, fmt.Sprintf("%s:oidc.caCertificates = %q", config.Project, pemShown(issuerCAs.withKey, "CERTIFICATE", "PRIVATE KEY")))
	for _, line := range strings.Split(strings.TrimSpace(issuerCAs.key), "\n") {
		if !strings.HasPrefix(line, "-----") {
			require.NotContains(t, msg, line, "a line of the private key")
		}
	}
	require.NotContains(t, msg, strings.Split(issuerCAs.root, "\n")[1], "a line of the certificate")
	require.Less(t, len(msg), 1000, "a summary, not the text")
}
