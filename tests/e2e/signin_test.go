//go:build linux

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/railgrid/railgrid-kcp/internal/testkit/pki"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

// The hub's Dex, as the e2e runs it: a pod on the real node in a namespace of its own,
// serving the issuer's name with a certificate from a CA of the run's own (which the
// stack file gives kcp in oidc.caCertificates), behind a Service at the fixed ClusterIP
// the kind split horizon answers the issuer's name with (kind.issuerClusterIP).

const (
	dexNamespace = "dex"
	dexName      = "dex"
	// dexPort is where Dex serves https in its pod; its Service serves 443.
	dexPort          = 5556
	dexTelemetryPort = 5558
	// dexIDTokenExpiry is short, so that the expired-token case waits little; kubelogin
	// signs in again whenever its cached token has expired.
	dexIDTokenExpiry = 10 * time.Second
	// dexOtherClient is a second client of the same Dex: its tokens are for another
	// audience.
	dexOtherClient = "another-client"
)

// signinUser is a user of the hub's Dex.
type signinUser struct {
	email, password string
	groups          []string
	emailUnverified bool
}

var (
	alice = signinUser{email: "alice@example.com", password: "alice-password", groups: []string{"ops", "devs"}}
	bob   = signinUser{email: "bob@example.com", password: "bob-password"}
	carol = signinUser{email: "carol@example.com", password: "carol-password", emailUnverified: true}
)

// hubDex is the hub's Dex: its CA, serving certificate and configuration.
type hubDex struct {
	issuer       string
	ca           *pki.CA
	serving      *pki.Cert
	clientID     string
	clientSecret string
	otherSecret  string
}

// newHubDex makes the Dex of the stack's issuer: a CA of the run's own and a serving
// certificate for the issuer's host, both valid for a year as an issuer's are: verify's
// certificates check reads the CA, and a day's life would be inside its threshold.
func newHubDex(issuer, clientID string) (*hubDex, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ca, err := pki.NewCA("railgrid-e2e-dex-ca", pki.Valid(now.Add(-time.Hour), now.Add(365*24*time.Hour)))
	if err != nil {
		return nil, err
	}
	serving, err := ca.ServerCert([]string{u.Hostname()})
	if err != nil {
		return nil, err
	}
	return &hubDex{issuer: issuer, ca: ca, serving: serving, clientID: clientID,
		clientSecret: randomWord(), otherSecret: randomWord()}, nil
}

// randomWord is a client secret: 16 random hex digits.
func randomWord() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// config is Dex's configuration in its pod.
func (d *hubDex) config() testenv.DexConfig {
	cfg := testenv.DexConfig{
		Issuer:           d.issuer,
		HTTPSAddress:     fmt.Sprintf("0.0.0.0:%d", dexPort),
		TLSCert:          "/etc/dex/tls/tls.crt",
		TLSKey:           "/etc/dex/tls/tls.key",
		TelemetryAddress: fmt.Sprintf("0.0.0.0:%d", dexTelemetryPort),
		Clients: []testenv.DexClient{
			{ID: d.clientID, Secret: d.clientSecret, Name: "the hub"},
			{ID: dexOtherClient, Secret: d.otherSecret, Name: "another application"},
		},
		IDTokenExpiry: dexIDTokenExpiry,
	}
	for _, u := range []signinUser{alice, bob, carol} {
		name := strings.Split(u.email, "@")[0]
		cfg.Users = append(cfg.Users, testenv.DexUser{Email: u.email, Username: name, UserID: name + "-id",
			Password: u.password, Groups: u.groups, EmailUnverified: u.emailUnverified})
	}
	return cfg
}

// deploy runs Dex in the cluster: its configuration and serving certificate as Secrets,
// a Deployment of Dex's image (its user 1001 and the restricted Pod Security level, as
// its chart runs it), and a Service at clusterIP, port 443. It returns once the pod is
// Ready through Dex's own readiness endpoint.
func (d *hubDex) deploy(ctx context.Context, c *cluster, image, clusterIP string) error {
	config, err := d.config().YAML()
	if err != nil {
		return err
	}
	kube := c.kube
	objects := []func() error{
		func() error {
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dexNamespace,
				Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.CoreV1().Secrets(dexNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dex-config"},
				Data: map[string][]byte{"config.yaml": config}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.CoreV1().Secrets(dexNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dex-tls"},
				Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": d.serving.CertPEM, "tls.key": d.serving.KeyPEM}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.AppsV1().Deployments(dexNamespace).Create(ctx, d.deployment(image), metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.CoreV1().Services(dexNamespace).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: dexName},
				Spec: corev1.ServiceSpec{ClusterIP: clusterIP, Selector: map[string]string{"app": dexName},
					Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(dexPort), AppProtocol: ptr("https")}}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objects {
		if err := create(); err != nil {
			return err
		}
	}
	return testenv.WaitFor(ctx, 2*time.Minute, nil, func() (bool, error) {
		dep, err := kube.AppsV1().Deployments(dexNamespace).Get(ctx, dexName, metav1.GetOptions{})
		return err == nil && dep.Status.ReadyReplicas == 1, nil
	})
}

func ptr[T any](v T) *T { return &v }

func (d *hubDex) deployment(image string) *appsv1.Deployment {
	labels := map[string]string{"app": dexName}
	user := int64(1001)
	secret := func(name string) corev1.VolumeSource {
		return corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: dexName},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr(false),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: &user, RunAsGroup: &user,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: dexName, Image: image,
						Args:  []string{"dex", "serve", "/etc/dex/config/config.yaml"},
						Ports: []corev1.ContainerPort{{Name: "https", ContainerPort: dexPort}, {Name: "telemetry", ContainerPort: dexTelemetryPort}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: "/healthz/ready", Port: intstr.FromString("telemetry")}}, PeriodSeconds: 2},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/dex/config", ReadOnly: true},
							{Name: "tls", MountPath: "/etc/dex/tls", ReadOnly: true}},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: secret("dex-config")}, {Name: "tls", VolumeSource: secret("dex-tls")}},
				},
			},
		},
	}
}

// dexFromHost reaches the hub's Dex from this machine: its Service's ClusterIP (routed
// to the node) with the issuer's name, trusting the run's Dex CA.
func (d *hubDex) fromHost(clusterIP string) (*testenv.Dex, error) {
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, net.JoinHostPort(clusterIP, "443"))
	}
	return testenv.DexAt(d.issuer, d.issuer, d.ca.PEM, dial)
}

// podNetClient runs kubectl (and through it kubelogin) on the pod network, where the
// cluster's DNS answers the issuer's and the shards' names, as in a pod.
type podNetClient struct {
	host    *testenv.TestHost
	kubectl string
	// dir holds the kubeconfigs, Dex's CA and kubelogin's token cache.
	dir string
}

// run runs kubectl with the kubeconfig; it returns what kubectl printed.
func (p podNetClient) run(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	cmd := p.host.Command(append([]string{p.kubectl, "--kubeconfig", kubeconfig}, args...)...)
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	cmd.Env = append(os.Environ(), "HOME="+p.dir)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// whoami is kubectl auth whoami's user and groups.
func (p podNetClient) whoami(ctx context.Context, kubeconfig string) (string, []string, error) {
	out, err := p.run(ctx, kubeconfig, "auth", "whoami", "-o", "json")
	if err != nil {
		return "", nil, fmt.Errorf("kubectl auth whoami: %v: %s", err, lastLineOf(out))
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string   `json:"username"`
				Groups   []string `json:"groups"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &review); err != nil {
		return "", nil, fmt.Errorf("kubectl auth whoami printed no review: %v: %s", err, out)
	}
	return review.Status.UserInfo.Username, review.Status.UserInfo.Groups, nil
}

func lastLineOf(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// userKubeconfig is the stack's userKubeconfig output made to work from a pod: its
// server is the in-cluster Service's name (clusterServer, with the workspace), the CA is
// kcp's, and the exec plugin signs in with the password grant as user, with the client
// secret, caching tokens in a directory of the test's own.
func userKubeconfig(output []byte, server string, kcpCA []byte, d *hubDex, user signinUser, clientID, clientSecret, cacheDir string) ([]byte, error) {
	cfg, err := clientcmd.Load(output)
	if err != nil {
		return nil, fmt.Errorf("the stack's userKubeconfig: %w", err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.Clusters[ctx.Cluster] == nil || cfg.AuthInfos[ctx.AuthInfo] == nil || cfg.AuthInfos[ctx.AuthInfo].Exec == nil {
		return nil, fmt.Errorf("the stack's userKubeconfig has no current context with a cluster and an exec user")
	}
	cluster, exec := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo].Exec
	cluster.Server, cluster.CertificateAuthorityData = server, kcpCA
	var args []string
	for _, a := range exec.Args {
		if strings.HasPrefix(a, "--oidc-client-id=") {
			a = "--oidc-client-id=" + clientID
		}
		args = append(args, a)
	}
	exec.Args = append(args, "--grant-type=password", "--username="+user.email, "--password="+user.password,
		"--oidc-client-secret="+clientSecret, "--token-cache-dir="+filepath.Join(cacheDir, clientID+"-"+user.email))
	exec.InteractiveMode = "Never"
	return clientcmd.Write(*cfg)
}

// tokenKubeconfig is a kubeconfig that presents a bearer token, with no exec plugin.
func tokenKubeconfig(server string, kcpCA []byte, token string) ([]byte, error) {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: token
clusters:
- name: kcp
  cluster:
    server: %s
    certificate-authority-data: %s
contexts:
- name: token
  context:
    cluster: kcp
    user: token
users:
- name: token
  user:
    token: %s
`, server, base64.StdEncoding.EncodeToString(kcpCA), token)), nil
}

// rbacForSignin lets alice and bob into the workspace (the access verb, without which
// kcp refuses every request there) and lets alice, not bob, read and write ConfigMaps in
// its default namespace.
func rbacForSignin(alice, bob string) ([]rbacv1.ClusterRole, []rbacv1.ClusterRoleBinding, rbacv1.RoleBinding) {
	roles := []rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: "e2e-workspace-access"},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/"}, Verbs: []string{"access"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "e2e-configmaps"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update", "delete"}}}},
	}
	users := []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: alice}, {Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: bob}}
	bindings := []rbacv1.ClusterRoleBinding{{ObjectMeta: metav1.ObjectMeta{Name: "e2e-workspace-access"},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-workspace-access"}, Subjects: users}}
	write := rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-configmaps", Namespace: "default"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-configmaps"},
		Subjects: users[:1]}
	return roles, bindings, write
}

// The hub's Dex of the e2e serves its configuration: its clients and users, run as a
// process on loopback (the e2e runs the same configuration in a pod), and alice's token
// has her groups. It catches a configuration Dex refuses without a cluster.
func TestTheE2EHubDexConfigurationServes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Dex")
	}
	var exe testenv.Executables
	bin := exe.Find("dex", "")
	exe.Require(t, "the hub Dex test", `eval "$(hack/build-tools.sh env dex)"`, envSkip)
	d, err := newHubDex("https://dex.kcp.localhost", "railgrid")
	if err != nil {
		t.Fatal(err)
	}
	cfg := d.config()
	cfg.HTTPSAddress, cfg.TLSCert, cfg.TLSKey, cfg.TelemetryAddress = "", "", "", ""
	ctx := t.Context()
	dex := testenv.StartDex(t, ctx, bin, t.TempDir(), "hub-config", cfg)
	for _, c := range []testenv.DexClient{{ID: d.clientID, Secret: d.clientSecret}, {ID: dexOtherClient, Secret: d.otherSecret}} {
		token, err := dex.PasswordGrant(ctx, c, alice.email, alice.password, "email", "groups")
		if err != nil {
			t.Fatalf("client %s: %v", c.ID, err)
		}
		claims, err := dex.VerifiedClaims(ctx, token)
		if err != nil || claims.Email != alice.email || !slices.Equal(claims.Groups, alice.groups) {
			t.Errorf("client %s: claims %+v (%v)", c.ID, claims, err)
		}
	}
}
