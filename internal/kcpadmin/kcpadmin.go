// Package kcpadmin gives an admin on a laptop a kubeconfig that plain kubectl uses
// against the stack's kcp: it reads the operator's admin credential (kcp-admin in
// system:kcp:admin) through the user's kube context, forwards 127.0.0.1 to the front
// proxy's Service as `kubectl port-forward` does, and writes a kubeconfig for that
// forward, mode 0600, outside any git checkout. cmd/kcpadmin is its command; an
// end-to-end test can call Run in-process.
package kcpadmin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/errtext"
	"github.com/railgrid/railgrid-kcp/internal/verify"
	"github.com/railgrid/railgrid-kcp/naming"
)

// DefaultTimeout bounds each step before the forward is handed over: reading the
// credential, starting the forward and the check through it.
const DefaultTimeout = time.Minute

// Options are the inputs of Run.
type Options struct {
	// Config is the stack's validated config, Stack its name (kind, gke): the name goes
	// into the default file name and the kubeconfig's entries.
	Config *config.Config
	Stack  string
	// RESTConfig reaches the cluster with the user's kube context. Kube and Dial default
	// to clients of it; tests set them instead.
	RESTConfig *rest.Config
	Kube       kubernetes.Interface
	Dial       PodDialer
	// Output is the kubeconfig file; "" is DefaultKubeconfigPath(Stack).
	Output string
	// WorkDir is where the command runs: an Output inside its git checkout is refused.
	// "" is the current directory.
	WorkDir string
	// LocalPort is the forward's port on 127.0.0.1; 0 takes a free one.
	LocalPort int
	// Timeout bounds each step before the forward is handed over (DefaultTimeout).
	Timeout time.Duration
	// PodCheck and Retry tune how the forward follows the front proxy's pods (see
	// Forward); zero keeps the defaults.
	PodCheck, Retry time.Duration
	// Log receives progress lines; nothing secret is ever written to it.
	Log io.Writer
	// Now is the clock the certificate's expiry is checked against (time.Now).
	Now func() time.Time
}

// Session is a running admin forward and the kubeconfig written for it.
type Session struct {
	// KubeconfigPath is the file written (absolute), mode 0600.
	KubeconfigPath string
	// LocalAddress is the forward's address, 127.0.0.1:<port>, and Server the
	// kubeconfig's server URL on it.
	LocalAddress string
	Server       string
	// ServerName is the kubeconfig's tls-server-name: the name on the front proxy's
	// serving certificate.
	ServerName string
	// Secret is where the credential was read (namespace/name); Service the Service
	// forwarded (namespace/name:port).
	Secret  string
	Service string
	// Certificate names the client certificate (subject and issuer); ExpiresAt is when
	// it, and so the kubeconfig, stops working.
	Certificate string
	ExpiresAt   time.Time
	// User and Groups are who kcp said the kubeconfig is, asked through the forward.
	User   string
	Groups []string

	forwarding *Forwarding
}

// Pod is the front-proxy pod the forward currently leads to.
func (s *Session) Pod() string { return s.forwarding.Pod() }

// Done is closed once the forward has stopped.
func (s *Session) Done() <-chan struct{} { return s.forwarding.Done() }

// Close stops the forward. The kubeconfig stays: it is valid until ExpiresAt, for
// anyone who can read it and reach the front proxy.
func (s *Session) Close() { s.forwarding.Close() }

// ForwardedService is the Service the admin forward leads to: the front proxy's owned
// Service (the one cmd/verify's hub-credential check reaches too), its kcp port.
func ForwardedService() (namespace, service string, port int) {
	return naming.NamespaceKcp, naming.OwnedServiceName(naming.FrontProxyName), naming.KcpPort
}

// Run reads the admin credential, starts the forward, checks through it that kcp sees
// the credential as kcp-admin, and only then writes the kubeconfig. The forward runs
// until ctx ends or Session.Close. A bad output path is refused before the cluster is
// asked anything.
func Run(ctx context.Context, o Options) (*Session, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	path := o.Output
	if path == "" {
		var err error
		if path, err = DefaultKubeconfigPath(o.Stack); err != nil {
			return nil, err
		}
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := RefuseInsideCheckout(path, o.WorkDir); err != nil {
		return nil, err
	}

	step, cancel := context.WithTimeout(ctx, o.Timeout)
	cred, err := ReadCredential(step, o.Kube, o.Config, o.Now())
	cancel()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "kcpadmin: credential from Secret %s (hub.remintGeneration %d): %s, valid until %s\n",
		cred.Secret, o.Config.Hub.RemintGeneration, cred.Describe(), cred.Leaf.NotAfter.UTC().Format(time.RFC3339))

	namespace, service, port := ForwardedService()
	forwarding, err := StartForward(ctx, Forward{
		Kube: o.Kube, Dial: o.Dial, Namespace: namespace, Service: service, Port: port,
		LocalPort: o.LocalPort, PodCheck: o.PodCheck, Retry: o.Retry, Log: o.Log, StartTimeout: o.Timeout,
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "kcpadmin: forwarding %s to Service %s/%s port %d (pod %s)\n", forwarding.Addr(), namespace, service, port, forwarding.Pod())

	s, err := o.finish(ctx, cred, forwarding, path)
	if err != nil {
		forwarding.Close()
		return nil, err
	}
	s.Service = fmt.Sprintf("%s/%s:%d", namespace, service, port)
	return s, nil
}

// finish builds the kubeconfig for the forward, asks kcp through it who it is, and
// writes it.
func (o *Options) finish(ctx context.Context, cred *Credential, forwarding *Forwarding, path string) (*Session, error) {
	data, err := AdminKubeconfig(cred, o.Stack, forwarding.Addr())
	if err != nil {
		return nil, err
	}
	step, cancel := context.WithTimeout(ctx, o.Timeout)
	user, err := WhoAmI(step, data)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig for the forward does not work: %w", err)
	}
	if user.Username != naming.KubeconfigUsername || !slices.Contains(user.Groups, naming.KubeconfigAdminGroup) {
		return nil, fmt.Errorf("kcp sees user %q in groups [%s] through the forward, want %q in %s: the Kubeconfig object was changed outside the program; %s",
			user.Username, strings.Join(user.Groups, ", "), naming.KubeconfigUsername, naming.KubeconfigAdminGroup, verify.RemintHint)
	}
	fmt.Fprintf(o.Log, "kcpadmin: kcp sees user %q in groups [%s] through the forward\n", user.Username, strings.Join(user.Groups, ", "))
	if err := WriteKubeconfig(path, data); err != nil {
		return nil, err
	}
	server := url.URL{Scheme: "https", Host: forwarding.Addr(), Path: cred.Server.Path}
	return &Session{
		KubeconfigPath: path,
		LocalAddress:   forwarding.Addr(),
		Server:         server.String(),
		ServerName:     cred.ServerName,
		Secret:         cred.Secret,
		Certificate:    cred.Describe(),
		ExpiresAt:      cred.Leaf.NotAfter,
		User:           user.Username,
		Groups:         user.Groups,
		forwarding:     forwarding,
	}, nil
}

func (o *Options) complete() error {
	switch {
	case o.Config == nil:
		return errors.New("kcpadmin: Config is required")
	case o.Stack == "":
		return errors.New("kcpadmin: Stack is required")
	case o.LocalPort < 0 || o.LocalPort > 65535:
		return fmt.Errorf("kcpadmin: local port %d is not 0 (a free port) or 1-65535", o.LocalPort)
	}
	if o.Kube == nil || o.Dial == nil {
		if o.RESTConfig == nil {
			return errors.New("kcpadmin: RESTConfig, or Kube and Dial, are required")
		}
		if o.Kube == nil {
			kube, err := kubernetes.NewForConfig(o.RESTConfig)
			if err != nil {
				return err
			}
			o.Kube = kube
		}
		if o.Dial == nil {
			o.Dial = SPDYPodDialer(o.RESTConfig)
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// WhoAmI asks kcp who a kubeconfig is, the way kubectl reads it (clientcmd) and sends
// it (client-go): a SelfSubjectReview in the workspace of its server URL.
func WhoAmI(ctx context.Context, kubeconfig []byte) (authenticationv1.UserInfo, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("kubeconfig: %s", errtext.FirstLine(err.Error()))
	}
	cfg.UserAgent = "railgrid-kcp-kcpadmin"
	cfg.Timeout = 20 * time.Second
	user, err := verify.ReviewSelf(ctx, cfg)
	if err != nil {
		return user, describeKcpError(err, cfg.TLSClientConfig.ServerName)
	}
	return user, nil
}

// describeKcpError says what a failed request to the front proxy means.
func describeKcpError(err error, serverName string) error {
	var verifyErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case apierrors.IsUnauthorized(err):
		return errors.New("the front proxy answered 401 Unauthorized: it did not accept the client certificate (it must be issued by kcp's root-client-ca and be valid)")
	case apierrors.IsForbidden(err):
		return fmt.Errorf("the front proxy answered 403 Forbidden: %s", errtext.FirstLine(err.Error()))
	case errors.As(err, &verifyErr), errors.As(err, &unknownCA), errors.As(err, &hostname):
		return fmt.Errorf("TLS: the front proxy's certificate is not verified for %s by the operator's CA: %s", serverName, errtext.FirstLine(err.Error()))
	}
	return fmt.Errorf("request through the forward failed: %s", errtext.FirstLine(err.Error()))
}
