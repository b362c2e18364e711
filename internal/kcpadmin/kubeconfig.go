package kcpadmin

import (
	"fmt"
	"net"
	"net/url"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigName is what the admin kubeconfig calls its cluster, user and context:
// railgrid-kcp-<stack>-kcp-admin, so that it can sit beside other kubeconfigs in
// KUBECONFIG without a clash.
func KubeconfigName(stack string) string { return "railgrid-kcp-" + stack + "-kcp-admin" }

// AdminKubeconfig is the kubeconfig plain kubectl uses on this machine: the front proxy
// at localAddr (the forward) with the operator's path, verified with the operator's CA
// under the name its serving certificate carries (tls-server-name, since the forward's
// address is not on the certificate), as the operator's client certificate.
//
// The certificate-data is the chain exactly as the operator wrote it. client-go, and so
// kubectl, presents it whatever client CAs the front proxy's handshake lists, because it
// answers the server's certificate request through tls.Config.GetClientCertificate.
func AdminKubeconfig(cred *Credential, stack, localAddr string) ([]byte, error) {
	if _, _, err := net.SplitHostPort(localAddr); err != nil {
		return nil, fmt.Errorf("local address %q: %w", localAddr, err)
	}
	server := url.URL{Scheme: "https", Host: localAddr, Path: cred.Server.Path}
	name := KubeconfigName(stack)
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   server.String(),
		TLSServerName:            cred.ServerName,
		CertificateAuthorityData: cred.CAData,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cred.CertData,
		ClientKeyData:         cred.KeyData,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return clientcmd.Write(*kc)
}
