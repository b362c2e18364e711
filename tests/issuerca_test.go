package tests

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/naming"
)

// issuerCAChain is an issuer's CA chain as a stack config gives it in
// oidc.caCertificates: the PEM text of a root CA (internal/testpki), then of an
// intermediate CA the root issued.
var issuerCAChain = newIssuerCAChain()

func newIssuerCAChain() string {
	root, err := pki.NewCA("Railgrid hub issuer CA")
	if err != nil {
		panic(err)
	}
	intermediate, _, err := root.Issue(&x509.Certificate{
		Subject: pkix.Name{CommonName: "Railgrid hub issuer intermediate CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	if err != nil {
		panic(err)
	}
	return string(root.PEM) + string(intermediate)
}

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
			values := withIssuerCA(t, stack, issuerCAChain)
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
			require.Equal(t, issuerCAChain, string(decoded), "exactly the PEM text of the config")

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
