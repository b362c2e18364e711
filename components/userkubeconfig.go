package components

import (
	"encoding/base64"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"gopkg.in/yaml.v3"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The kubeconfig a stack exports for its users (output userKubeconfig): kcp's root
// workspace through the front proxy's public URL, and a user who signs in with the hub's
// OIDC issuer through kubelogin, run by kubectl as its oidc-login plugin. It holds no
// secret: no client secret, no token, no key; kubelogin gets the token when kubectl asks.

// UserKubeconfigArgs is what the users' kubeconfig is made of.
type UserKubeconfigArgs struct {
	// Stack names the cluster, user and context (naming.UserKubeconfigCluster).
	Stack string
	// Access is the front proxy as users reach it (Platform.UserAccess).
	Access UserAccess
	// IssuerURL and ClientID are the hub's (oidc.issuerURL, oidc.clientID): kcp accepts
	// tokens of that issuer for that audience only.
	IssuerURL, ClientID string
	// IssuerCA is the issuer's CA chain (oidc.caCertificates), for kubelogin; empty: the
	// system's trust store.
	IssuerCA string
}

// kubeloginScopes are the scopes kubelogin asks for beside openid: kcp takes the user
// name from the email claim and the groups from the groups claim (config.FixedUsernameClaim,
// config.FixedGroupsClaim), and Dex puts neither in a token unless asked.
var kubeloginScopes = []string{config.FixedUsernameClaim, config.FixedGroupsClaim}

// kubeloginArgs are the arguments kubectl runs `kubectl oidc-login` with (kubelogin
// v1.34.0's get-token flags; tools/kubelogin pins that version).
func kubeloginArgs(a UserKubeconfigArgs) []string {
	args := []string{"oidc-login", "get-token", "--oidc-issuer-url=" + a.IssuerURL, "--oidc-client-id=" + a.ClientID}
	for _, scope := range kubeloginScopes {
		args = append(args, "--oidc-extra-scope="+scope)
	}
	if a.IssuerCA != "" {
		args = append(args, "--certificate-authority-data="+base64.StdEncoding.EncodeToString([]byte(a.IssuerCA)))
	}
	return args
}

// kubeconfig v1, the fields this kubeconfig sets, as kubectl reads them.
type (
	userKubeconfigFile struct {
		APIVersion     string                  `yaml:"apiVersion"`
		Kind           string                  `yaml:"kind"`
		Clusters       []userKubeconfigCluster `yaml:"clusters"`
		Users          []userKubeconfigUser    `yaml:"users"`
		Contexts       []userKubeconfigContext `yaml:"contexts"`
		CurrentContext string                  `yaml:"current-context"`
	}
	userKubeconfigCluster struct {
		Name    string `yaml:"name"`
		Cluster struct {
			Server                   string `yaml:"server"`
			CertificateAuthorityData string `yaml:"certificate-authority-data,omitempty"`
		} `yaml:"cluster"`
	}
	userKubeconfigUser struct {
		Name string `yaml:"name"`
		User struct {
			Exec userKubeconfigExec `yaml:"exec"`
		} `yaml:"user"`
	}
	userKubeconfigExec struct {
		APIVersion      string   `yaml:"apiVersion"`
		Command         string   `yaml:"command"`
		Args            []string `yaml:"args"`
		InstallHint     string   `yaml:"installHint"`
		InteractiveMode string   `yaml:"interactiveMode"`
	}
	userKubeconfigContext struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster string `yaml:"cluster"`
			User    string `yaml:"user"`
		} `yaml:"context"`
	}
)

// kubeloginInstallHint is what kubectl prints when it cannot run the plugin.
const kubeloginInstallHint = "kubectl oidc-login is kubelogin (github.com/int128/kubelogin): put its binary on PATH as kubectl-oidc_login"

// userKubeconfigText is the kubeconfig, with serverCA (PEM; empty: none) as the cluster's CA.
func userKubeconfigText(a UserKubeconfigArgs, serverCA string) (string, error) {
	cluster, user := naming.UserKubeconfigCluster(a.Stack), naming.UserKubeconfigUser(a.Stack)
	c := userKubeconfigCluster{Name: cluster}
	c.Cluster.Server = a.Access.Server + naming.RootWorkspacePath
	if serverCA != "" {
		c.Cluster.CertificateAuthorityData = base64.StdEncoding.EncodeToString([]byte(serverCA))
	}
	u := userKubeconfigUser{Name: user}
	// IfAvailable: kubelogin may open a browser or ask on the terminal when kubectl has one.
	u.User.Exec = userKubeconfigExec{APIVersion: "client.authentication.k8s.io/v1", Command: "kubectl", Args: kubeloginArgs(a),
		InstallHint: kubeloginInstallHint, InteractiveMode: "IfAvailable"}
	ctx := userKubeconfigContext{Name: cluster}
	ctx.Context.Cluster, ctx.Context.User = cluster, user
	var out strings.Builder
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	err := enc.Encode(userKubeconfigFile{APIVersion: "v1", Kind: "Config",
		Clusters: []userKubeconfigCluster{c}, Users: []userKubeconfigUser{u}, Contexts: []userKubeconfigContext{ctx}, CurrentContext: cluster})
	return out.String(), err
}

// newUserKubeconfig is the users' kubeconfig as an output: known once the server's CA is,
// on a platform that needs one.
func newUserKubeconfig(a UserKubeconfigArgs) pulumi.StringOutput {
	if a.Access.ServerCA == nil {
		return pulumi.String("").ToStringOutput().ApplyT(func(string) (string, error) { return userKubeconfigText(a, "") }).(pulumi.StringOutput)
	}
	return a.Access.ServerCA.ToStringOutput().ApplyT(func(ca string) (string, error) { return userKubeconfigText(a, ca) }).(pulumi.StringOutput)
}
