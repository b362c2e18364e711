package components

import (
	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// What the components take from the config, derived in this one place: the composition
// (kcpplatform.go) and the platforms hand the results to the components as typed args,
// so no component reads the config itself.

// etcdImage is the pinned official etcd image: the members and the jobs that snapshot
// and restore them run it.
func etcdImage(cfg *config.Config) string {
	return config.EtcdImage(cfg.Versions.Etcd)
}

// kcpImage is the one pinned kcp image every kcp object uses.
func kcpImage(cfg *config.Config) *kcpapi.ImageSpec {
	return &kcpapi.ImageSpec{Repository: config.KcpImageRepository, Tag: cfg.Versions.Kcp}
}

// kcpResources size every kcp server's container (config.KcpResources: no CPU limit).
func kcpResources(cfg *config.Config) *kcpapi.ResourceRequirements {
	r := cfg.Kcp.Resources
	return &kcpapi.ResourceRequirements{
		Requests: map[string]string{"cpu": r.CPU, "memory": r.Memory},
		Limits:   map[string]string{"memory": r.MemoryLimit},
	}
}

// kcpAuth is the authentication every shard and the front proxy share: service-account
// tokens and the hub's OIDC issuer with the claims and prefixes the hub relies on.
func kcpAuth(cfg *config.Config) *kcpapi.AuthSpec {
	oidc := &kcpapi.OIDCConfiguration{
		IssuerURL:      cfg.OIDC.IssuerURL,
		ClientID:       cfg.OIDC.ClientID,
		GroupsClaim:    config.FixedGroupsClaim,
		UsernameClaim:  config.FixedUsernameClaim,
		GroupsPrefix:   config.FixedGroupsPrefix,
		UsernamePrefix: config.FixedUsernamePrefix,
	}
	// kcp reads the issuer's CA only from --oidc-ca-file, which the operator sets from
	// caFileRef (not from caBundleSecretRef), on every component that validates tokens:
	// the Secret the program owns (oidc.caCertificates) or one made by hand (oidc.caSecret).
	switch ca := cfg.OIDC.CASecret; {
	case cfg.HasIssuerCACertificates():
		oidc.CAFileRef = &kcpapi.SecretKeyRef{Name: naming.OIDCIssuerCASecret, Key: naming.OIDCIssuerCAKey}
	case ca != nil:
		oidc.CAFileRef = &kcpapi.SecretKeyRef{Name: ca.Name, Key: ca.Key}
	}
	return &kcpapi.AuthSpec{
		ServiceAccount: &kcpapi.ServiceAccountAuthentication{Enabled: true},
		OIDC:           oidc,
	}
}
