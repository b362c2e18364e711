package kcpadmin_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/kcpadmin"
	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/naming"
)

// frontProxyHost is the in-cluster name the operator's kubeconfig uses and the front
// proxy's serving certificate carries.
var frontProxyHost = naming.OperatorServiceHost(naming.FrontProxyDeployment(naming.FrontProxyName))

// kcpCerts are kcp's certificates as the operator has cert-manager make them, from the
// tests' PKI: root-ca signs root-client-ca, which signs the Kubeconfig's client
// certificate; the client certificate's Secret holds the leaf followed by root-client-ca
// (cert-manager's CA issuer appends the issuing chain up to, not including, the
// self-signed root). root-server-ca signs the front proxy's serving certificate.
// otherClientCA stands for a client CA that signed nothing of this installation.
type kcpCerts struct {
	rootCA, clientCA, requestHeaderCA, serverCA, otherClientCA *pki.CA
	// adminLeaf is the client certificate alone, adminChain the leaf and root-client-ca as
	// the operator's kubeconfig carries it, adminKey its key.
	adminLeaf, adminChain, adminKey []byte
	serving                         tls.Certificate
}

func newKcpCerts(t *testing.T) *kcpCerts {
	t.Helper()
	p := &kcpCerts{rootCA: pki.MustCA(t, "root-ca")}
	p.clientCA = p.rootCA.MustIntermediate(t, "root-client-ca")
	p.requestHeaderCA = p.rootCA.MustIntermediate(t, "root-requestheader-client-ca")
	p.serverCA = pki.MustCA(t, "root-server-ca")
	p.otherClientCA = pki.MustCA(t, "root-front-proxy-client-ca")

	admin := p.clientCA.MustClientCert(t, naming.KubeconfigUsername, []string{naming.KubeconfigAdminGroup})
	p.adminLeaf, p.adminKey = admin.CertPEM, admin.KeyPEM
	p.adminChain = append(append([]byte{}, p.adminLeaf...), p.clientCA.PEM...)
	p.serving = p.serverCA.MustServerCert(t, []string{frontProxyHost, "kcp.localhost"}, pki.CommonName("kcp-front-proxy")).MustTLS(t)
	return p
}

// operatorKubeconfig is the kubeconfig the kcp-operator writes for a Kubeconfig object
// that targets the FrontProxy (kcp-operator internal/resources/kubeconfig/secret.go):
// clusters "base" and "default", the current context "default" on the root workspace,
// the server CA, and the client certificate chain and key.
func operatorKubeconfig(t *testing.T, p *kcpCerts) []byte {
	t.Helper()
	server := fmt.Sprintf("https://%s:%d", frontProxyHost, naming.KcpPort)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["base"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.serverCA.PEM}
	kc.Clusters["default"] = &clientcmdapi.Cluster{Server: server + "/clusters/root", CertificateAuthorityData: p.serverCA.PEM}
	kc.AuthInfos[naming.KubeconfigUsername] = &clientcmdapi.AuthInfo{ClientCertificateData: p.adminChain, ClientKeyData: p.adminKey}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "default", AuthInfo: naming.KubeconfigUsername}
	kc.Contexts["base"] = &clientcmdapi.Context{Cluster: "base", AuthInfo: naming.KubeconfigUsername}
	kc.CurrentContext = "default"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fakeFrontProxy serves TLS as kcp-front-proxy does: it requests, not requires, a client
// certificate (the API server's tls.RequestClientCert), lists advertised in the
// handshake as the acceptable client CAs (tls.Config.ClientCAs: the subjects the
// CertificateRequest carries), and authenticates a presented certificate the way kcp's
// x509 authenticator does, against --client-ca-file (root-client-ca) with the rest of the
// presented chain as intermediates. A SelfSubjectReview answers who the client is; any
// other request answers 200 with the user, or 401.
type fakeFrontProxy struct {
	*httptest.Server

	mu        sync.Mutex
	presented []int // per request, how many certificates the client presented
}

func newFakeFrontProxy(t *testing.T, p *kcpCerts, advertised ...*pki.CA) *fakeFrontProxy {
	t.Helper()
	clientCAFile := p.clientCA.Pool()
	f := &fakeFrontProxy{}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var chain []*x509.Certificate
		if r.TLS != nil {
			chain = r.TLS.PeerCertificates
		}
		f.mu.Lock()
		f.presented = append(f.presented, len(chain))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if len(chain) == 0 || verifyClient(chain, clientCAFile) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`)
			return
		}
		groups := `"` + strings.Join(append(slices.Clone(chain[0].Subject.Organization), "system:authenticated"), `","`) + `"`
		if r.Method == http.MethodPost && r.URL.Path == "/clusters/root/apis/authentication.k8s.io/v1/selfsubjectreviews" {
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"kind":"SelfSubjectReview","apiVersion":"authentication.k8s.io/v1","metadata":{},"status":{"userInfo":{"username":%q,"groups":[%s]}}}`, chain[0].Subject.CommonName, groups)
			return
		}
		fmt.Fprintf(w, `{"username":%q}`, chain[0].Subject.CommonName)
	}))
	var pool *x509.CertPool
	if len(advertised) > 0 {
		pool = x509.NewCertPool()
		for _, ca := range advertised {
			pool.AddCert(ca.Cert)
		}
	}
	f.TLS = &tls.Config{Certificates: []tls.Certificate{p.serving}, ClientAuth: tls.RequestClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	f.StartTLS()
	t.Cleanup(f.Close)
	return f
}

func verifyClient(chain []*x509.Certificate, roots *x509.CertPool) error {
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err
}

// lastPresented is how many certificates the client presented in the last request.
func (f *fakeFrontProxy) lastPresented(t *testing.T) int {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.presented) == 0 {
		t.Fatal("the front proxy got no request")
	}
	return f.presented[len(f.presented)-1]
}

// frontProxyLabels select the front proxy's pods, as the owned Service does.
var frontProxyLabels = map[string]string{"app.kubernetes.io/component": "front-proxy", "app.kubernetes.io/instance": naming.FrontProxyName}

// frontProxyPod is a Running pod of the front proxy, Ready or not.
func frontProxyPod(name string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: naming.NamespaceKcp, Name: name, Labels: frontProxyLabels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "kcp-front-proxy", Ports: []corev1.ContainerPort{{Name: "https", ContainerPort: int32(naming.KcpPort)}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

// newCluster is a fake cluster with the owned front-proxy Service, the given pods and
// objects (such as the operator's Secret).
func newCluster(objects ...runtime.Object) *kubefake.Clientset {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: naming.NamespaceKcp, Name: naming.OwnedServiceName(naming.FrontProxyName)},
		Spec: corev1.ServiceSpec{
			Selector: frontProxyLabels,
			Ports: []corev1.ServicePort{
				{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(naming.KcpPort))},
				{Name: "https-kcp", Port: int32(naming.KcpPort), TargetPort: intstr.FromInt32(int32(naming.KcpPort))},
			},
		},
	}
	return kubefake.NewClientset(append([]runtime.Object{svc}, objects...)...)
}

// operatorSecret is the Secret the operator writes for the Kubeconfig object of cfg's
// re-mint generation.
func operatorSecret(cfg *config.Config, kubeconfig []byte) *corev1.Secret {
	namespace, name := kcpadmin.CredentialSecret(cfg)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data:       map[string][]byte{kcpadmin.OperatorKubeconfigKey: kubeconfig},
	}
}

// kindConfig is the repository's kind stack config.
func kindConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.ParseStackFile("../../Pulumi.kind.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
