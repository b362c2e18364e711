package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"sort"

	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/railgrid/railgrid-kcp/components/kcpapi"
)

// The operator.kcp.io resources the stand-in reconciles.
var (
	rootShardGVR  = kcpGVR("rootshards")
	shardGVR      = kcpGVR("shards")
	frontProxyGVR = kcpGVR("frontproxies")
	kubeconfigGVR = kcpGVR("kubeconfigs")
	issuerGVR     = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}
)

func kcpGVR(resource string) schema.GroupVersionResource {
	gv := schema.FromAPIVersionAndKind(kcpapi.APIVersion, "").GroupVersion()
	return gv.WithResource(resource)
}

// standInFieldManager writes what the stand-in owns.
const standInFieldManager = "kcp-operator-stand-in"

// standIn plays the kcp-operator for the test: it marks a RootShard, Shard, FrontProxy
// or Kubeconfig Available (status.conditions Available=True, reason ReplicasUp or
// SecretsReady, phase Running or Ready, through the status subresource) only once what
// the object needs exists:
//
//   - RootShard: the etcd StatefulSet of its spec.etcd.endpoints is ready and its Issuer
//     exists; then the Deployments root-kcp and root-proxy have rolled out;
//   - Shard: its RootShard is Available and its etcd is ready; then <name>-shard-kcp;
//   - FrontProxy: its RootShard is Available; then <name>-front-proxy;
//   - Kubeconfig: its target FrontProxy is Available; then it mints a client certificate
//     (CN spec.username, O spec.groups plus kubeconfig:<name>, spec.validity, and a unique
//     marker in the subject) signed by the root shard's client CA and writes the
//     kubeconfig, pointing at the front proxy's external address, into spec.secretRef.
//
// Like the operator it creates the Deployments (owned by the kcp object, so kwok runs
// their pods and the garbage collector removes them), the root shard's CA Secret
// <root>-server-ca, and mints a new certificate whenever a Kubeconfig is created again
// or its spec changes. Conditions carry observedGeneration, so a waiter sees Available
// for the current spec only after the rollout. It also records every kcp object it
// first sees while something the object needs is not ready (an ordering violation).
type standIn struct {
	c *cluster
	t *testing.T
	// rootShardHold keeps a RootShard Provisioning this long after its dependencies are
	// ready (the operator takes a while too); the interrupted-up test cancels in between.
	rootShardHold time.Duration

	mu         sync.Mutex
	cas        map[string]*certAuthority // "<ns>/<root>/<ca>" -> CA
	minted     map[string]mintRecord     // "<ns>/<name>" of a Kubeconfig -> its last mint
	mints      []mintRecord
	seen       map[types.UID]bool
	violations []string
	depsSince  map[string]time.Time
	available  map[string]time.Time // "<Kind> <ns>/<name>" -> when first marked Available
	lastErr    string
	log        []string
}

// mintRecord is one credential the stand-in minted.
type mintRecord struct {
	Namespace, Name string
	UID             types.UID
	Generation      int64
	Marker          string
	Kubeconfig      []byte
	Server          string
	Subject         pkix.Name
	NotAfter        time.Time
	At              time.Time
}

type certAuthority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

func startStandIn(t *testing.T, ctx context.Context, c *cluster, rootShardHold time.Duration) *standIn {
	s := &standIn{
		c: c, t: t, rootShardHold: rootShardHold,
		cas: map[string]*certAuthority{}, minted: map[string]mintRecord{}, seen: map[types.UID]bool{},
		depsSince: map[string]time.Time{}, available: map[string]time.Time{},
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			started := time.Now()
			err := s.tick(ctx)
			if d := time.Since(started); d > 2*time.Second {
				s.logf("slow round: %s", d.Round(time.Millisecond))
			}
			s.mu.Lock()
			if err != nil && ctx.Err() == nil && err.Error() != s.lastErr {
				s.lastErr = err.Error()
				s.log = append(s.log, time.Now().Format("15:04:05.000")+" error: "+err.Error())
			}
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() || os.Getenv(envVerbose) == "1" {
			t.Logf("kcp-operator stand-in log:\n%s", strings.Join(s.logLines(), "\n"))
		}
	})
	return s
}

func (s *standIn) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

func (s *standIn) logLines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// Violations returns the kcp objects that appeared before what they need was ready.
func (s *standIn) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

// Mints returns every credential minted so far, oldest first.
func (s *standIn) Mints() []mintRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]mintRecord(nil), s.mints...)
}

// snapshot is one consistent look at the kcp objects.
type snapshot struct {
	rootShards, shards, frontProxies, kubeconfigs []unstructured.Unstructured
}

func (sn *snapshot) find(list []unstructured.Unstructured, ns, name string) *unstructured.Unstructured {
	for i := range list {
		if list[i].GetNamespace() == ns && list[i].GetName() == name {
			return &list[i]
		}
	}
	return nil
}

func (s *standIn) tick(ctx context.Context) error {
	sn := &snapshot{}
	for _, l := range []struct {
		gvr  schema.GroupVersionResource
		into *[]unstructured.Unstructured
	}{{rootShardGVR, &sn.rootShards}, {shardGVR, &sn.shards}, {frontProxyGVR, &sn.frontProxies}, {kubeconfigGVR, &sn.kubeconfigs}} {
		list, err := s.c.dyn.Resource(l.gvr).Namespace("").List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			return nil // the chart has not installed the CRDs yet
		}
		if err != nil {
			return err
		}
		*l.into = list.Items
	}
	s.checkOrdering(ctx, sn)

	var errs []string
	for i := range sn.rootShards {
		if err := s.reconcileRootShard(ctx, &sn.rootShards[i]); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for i := range sn.shards {
		if err := s.reconcileShard(ctx, sn, &sn.shards[i]); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for i := range sn.frontProxies {
		if err := s.reconcileFrontProxy(ctx, sn, &sn.frontProxies[i]); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for i := range sn.kubeconfigs {
		if err := s.reconcileKubeconfig(ctx, sn, &sn.kubeconfigs[i]); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// checkOrdering records, for every kcp object seen for the first time, whether what it
// needs was ready at that moment (from the snapshot taken before this round marks
// anything Available).
func (s *standIn) checkOrdering(ctx context.Context, sn *snapshot) {
	check := func(obj *unstructured.Unstructured, missing func() string) {
		s.mu.Lock()
		seen := s.seen[obj.GetUID()]
		s.seen[obj.GetUID()] = true
		s.mu.Unlock()
		if seen || obj.GetDeletionTimestamp() != nil {
			return
		}
		if m := missing(); m != "" {
			s.mu.Lock()
			s.violations = append(s.violations, fmt.Sprintf("%s %s/%s appeared before %s", obj.GetKind(), obj.GetNamespace(), obj.GetName(), m))
			s.mu.Unlock()
		}
	}
	for i := range sn.rootShards {
		rs := &sn.rootShards[i]
		check(rs, func() string {
			var missing []string
			if ok, why := s.etcdReady(ctx, rs); !ok {
				missing = append(missing, why)
			}
			if ok, why := s.issuerExists(ctx, rs); !ok {
				missing = append(missing, why)
			}
			return strings.Join(missing, " and ")
		})
	}
	rootAvailable := func(obj *unstructured.Unstructured) string {
		ref, _, _ := unstructured.NestedString(obj.Object, "spec", "rootShard", "ref", "name")
		if rs := sn.find(sn.rootShards, obj.GetNamespace(), ref); rs == nil || !isAvailable(rs) {
			return "RootShard " + ref + " was Available"
		}
		return ""
	}
	for i := range sn.shards {
		sh := &sn.shards[i]
		check(sh, func() string {
			if m := rootAvailable(sh); m != "" {
				return m
			}
			if ok, why := s.etcdReady(ctx, sh); !ok {
				return why
			}
			return ""
		})
	}
	for i := range sn.frontProxies {
		fp := &sn.frontProxies[i]
		check(fp, func() string { return rootAvailable(fp) })
	}
	for i := range sn.kubeconfigs {
		kc := &sn.kubeconfigs[i]
		check(kc, func() string {
			_, ok, why := s.kubeconfigTarget(sn, kc)
			if !ok {
				return why
			}
			return ""
		})
	}
}

func (s *standIn) reconcileRootShard(ctx context.Context, rs *unstructured.Unstructured) error {
	if rs.GetDeletionTimestamp() != nil {
		return nil
	}
	ns, name := rs.GetNamespace(), rs.GetName()
	key := "RootShard " + ns + "/" + name
	if ok, why := s.etcdReady(ctx, rs); !ok {
		return s.setStatus(ctx, rootShardGVR, rs, false, "Provisioning", "WaitingForEtcd", why)
	}
	if ok, why := s.issuerExists(ctx, rs); !ok {
		return s.setStatus(ctx, rootShardGVR, rs, false, "Provisioning", "WaitingForIssuer", why)
	}
	s.mu.Lock()
	since, ok := s.depsSince[string(rs.GetUID())]
	if !ok {
		since = time.Now()
		s.depsSince[string(rs.GetUID())] = since
	}
	s.mu.Unlock()
	if hold := s.rootShardHold - time.Since(since); hold > 0 {
		return s.setStatus(ctx, rootShardGVR, rs, false, "Provisioning", "CertificatesPending", "issuing certificates")
	}
	// The CAs the operator builds from the Issuer; the server CA is what kubeconfigs trust.
	for _, ca := range []string{"server-ca", "client-ca"} {
		if _, err := s.ensureCA(ctx, ns, name, ca); err != nil {
			return err
		}
	}
	image := imageOf(rs.Object, "spec", "image")
	replicas := replicasOf(rs.Object, "spec", "replicas")
	if err := s.ensureDeployment(ctx, rs, name+"-kcp", "rootshard", "kcp", image, replicas); err != nil {
		return err
	}
	proxyImage := imageOf(rs.Object, "spec", "proxy", "image")
	proxyReplicas := replicasOf(rs.Object, "spec", "proxy", "replicas")
	if err := s.ensureDeployment(ctx, rs, name+"-proxy", "rootshard-proxy", "kcp-front-proxy", proxyImage, proxyReplicas); err != nil {
		return err
	}
	ready, err := s.deploymentRolledOut(ctx, ns, name+"-kcp")
	if err != nil || !ready {
		return errOr(err, s.setStatus(ctx, rootShardGVR, rs, false, "Provisioning", "ReplicasNotReady", "waiting for "+name+"-kcp"))
	}
	return s.markAvailable(ctx, rootShardGVR, rs, key, "Running", "ReplicasUp")
}

func (s *standIn) reconcileShard(ctx context.Context, sn *snapshot, sh *unstructured.Unstructured) error {
	if sh.GetDeletionTimestamp() != nil {
		return nil
	}
	ns, name := sh.GetNamespace(), sh.GetName()
	ref, _, _ := unstructured.NestedString(sh.Object, "spec", "rootShard", "ref", "name")
	if rs := sn.find(sn.rootShards, ns, ref); rs == nil || !isAvailable(rs) {
		return s.setStatus(ctx, shardGVR, sh, false, "Provisioning", "WaitingForRootShard", "RootShard "+ref+" is not Available")
	}
	if ok, why := s.etcdReady(ctx, sh); !ok {
		return s.setStatus(ctx, shardGVR, sh, false, "Provisioning", "WaitingForEtcd", why)
	}
	if err := s.ensureDeployment(ctx, sh, name+"-shard-kcp", "shard", "kcp",
		imageOf(sh.Object, "spec", "image"), replicasOf(sh.Object, "spec", "replicas")); err != nil {
		return err
	}
	ready, err := s.deploymentRolledOut(ctx, ns, name+"-shard-kcp")
	if err != nil || !ready {
		return errOr(err, s.setStatus(ctx, shardGVR, sh, false, "Provisioning", "ReplicasNotReady", "waiting for "+name+"-shard-kcp"))
	}
	return s.markAvailable(ctx, shardGVR, sh, "Shard "+ns+"/"+name, "Running", "ReplicasUp")
}

func (s *standIn) reconcileFrontProxy(ctx context.Context, sn *snapshot, fp *unstructured.Unstructured) error {
	if fp.GetDeletionTimestamp() != nil {
		return nil
	}
	ns, name := fp.GetNamespace(), fp.GetName()
	ref, _, _ := unstructured.NestedString(fp.Object, "spec", "rootShard", "ref", "name")
	if rs := sn.find(sn.rootShards, ns, ref); rs == nil || !isAvailable(rs) {
		return s.setStatus(ctx, frontProxyGVR, fp, false, "Provisioning", "WaitingForRootShard", "RootShard "+ref+" is not Available")
	}
	if err := s.ensureDeployment(ctx, fp, name+"-front-proxy", "front-proxy", "kcp-front-proxy",
		imageOf(fp.Object, "spec", "image"), replicasOf(fp.Object, "spec", "replicas")); err != nil {
		return err
	}
	ready, err := s.deploymentRolledOut(ctx, ns, name+"-front-proxy")
	if err != nil || !ready {
		return errOr(err, s.setStatus(ctx, frontProxyGVR, fp, false, "Provisioning", "ReplicasNotReady", "waiting for "+name+"-front-proxy"))
	}
	return s.markAvailable(ctx, frontProxyGVR, fp, "FrontProxy "+ns+"/"+name, "Running", "ReplicasUp")
}

// kubeconfigTarget returns the server URL a Kubeconfig's credential points at, and
// whether its target is Available.
func (s *standIn) kubeconfigTarget(sn *snapshot, kc *unstructured.Unstructured) (string, bool, string) {
	ns := kc.GetNamespace()
	fpName, _, _ := unstructured.NestedString(kc.Object, "spec", "target", "frontProxyRef", "name")
	if fpName == "" {
		return "", false, "a frontProxyRef target (the stand-in only mints front-proxy kubeconfigs)"
	}
	fp := sn.find(sn.frontProxies, ns, fpName)
	if fp == nil || !isAvailable(fp) {
		return "", false, "FrontProxy " + fpName + " was Available"
	}
	host, _, _ := unstructured.NestedString(fp.Object, "spec", "external", "hostname")
	port, _, _ := unstructured.NestedInt64(fp.Object, "spec", "external", "port")
	ref, _, _ := unstructured.NestedString(fp.Object, "spec", "rootShard", "ref", "name")
	if host == "" {
		if rs := sn.find(sn.rootShards, ns, ref); rs != nil {
			host, _, _ = unstructured.NestedString(rs.Object, "spec", "external", "hostname")
			port, _, _ = unstructured.NestedInt64(rs.Object, "spec", "external", "port")
		}
	}
	if port == 0 {
		port = 6443
	}
	return fmt.Sprintf("https://%s:%d", host, port), true, ""
}

func (s *standIn) reconcileKubeconfig(ctx context.Context, sn *snapshot, kc *unstructured.Unstructured) error {
	if kc.GetDeletionTimestamp() != nil {
		return nil
	}
	ns, name := kc.GetNamespace(), kc.GetName()
	server, ok, why := s.kubeconfigTarget(sn, kc)
	if !ok {
		return s.setStatus(ctx, kubeconfigGVR, kc, false, "Provisioning", "WaitingForTarget", "waiting until "+why)
	}
	fpName, _, _ := unstructured.NestedString(kc.Object, "spec", "target", "frontProxyRef", "name")
	fp := sn.find(sn.frontProxies, ns, fpName)
	rootName, _, _ := unstructured.NestedString(fp.Object, "spec", "rootShard", "ref", "name")
	secretName, _, _ := unstructured.NestedString(kc.Object, "spec", "secretRef", "name")

	s.mu.Lock()
	last, minted := s.minted[ns+"/"+name]
	s.mu.Unlock()
	if !minted || last.UID != kc.GetUID() || last.Generation != kc.GetGeneration() {
		rec, err := s.mint(ctx, kc, server, rootName)
		if err != nil {
			return err
		}
		if err := s.writeSecret(ctx, ns, secretName, map[string][]byte{"kubeconfig": rec.Kubeconfig}, nil); err != nil {
			return err
		}
		s.mu.Lock()
		s.minted[ns+"/"+name] = rec
		s.mints = append(s.mints, rec)
		s.mu.Unlock()
		s.logf("minted a kubeconfig for Kubeconfig %s/%s (generation %d): CN=%s O=%v OU=%v, valid until %s, server %s",
			ns, name, kc.GetGeneration(), rec.Subject.CommonName, rec.Subject.Organization, rec.Subject.OrganizationalUnit,
			rec.NotAfter.Format(time.RFC3339), server)
	}
	return s.markAvailable(ctx, kubeconfigGVR, kc, "Kubeconfig "+ns+"/"+name, "Ready", "SecretsReady")
}

// mint issues a client certificate for a Kubeconfig object and builds the kubeconfig the
// operator would write: clusters "base" (the server) and "default" (its root
// workspace), one user, CA root-server-ca.
func (s *standIn) mint(ctx context.Context, kc *unstructured.Unstructured, server, rootName string) (mintRecord, error) {
	ns, name := kc.GetNamespace(), kc.GetName()
	username, _, _ := unstructured.NestedString(kc.Object, "spec", "username")
	groups, _, _ := unstructured.NestedStringSlice(kc.Object, "spec", "groups")
	validityStr, _, _ := unstructured.NestedString(kc.Object, "spec", "validity")
	ous, _, _ := unstructured.NestedStringSlice(kc.Object, "spec", "certificateTemplate", "spec", "subject", "organizationalUnits")
	workspace, _, _ := unstructured.NestedString(kc.Object, "spec", "targetWorkspace")
	if workspace == "" {
		workspace = "root"
	}
	validity, err := time.ParseDuration(validityStr)
	if err != nil {
		return mintRecord{}, fmt.Errorf("Kubeconfig %s/%s: spec.validity %q: %v", ns, name, validityStr, err)
	}
	serverCA, err := s.ensureCA(ctx, ns, rootName, "server-ca")
	if err != nil {
		return mintRecord{}, err
	}
	clientCA, err := s.ensureCA(ctx, ns, rootName, "client-ca")
	if err != nil {
		return mintRecord{}, err
	}
	marker := "railgrid-e2e-credential-" + randomToken()
	subject := pkix.Name{
		CommonName:         username,
		Organization:       append(append([]string{}, groups...), "kubeconfig:"+name),
		OrganizationalUnit: append(append([]string{}, ous...), marker),
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return mintRecord{}, err
	}
	now := time.Now()
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, clientCA.cert, &key.PublicKey, clientCA.key)
	if err != nil {
		return mintRecord{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return mintRecord{}, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["base"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: serverCA.certPEM}
	cfg.Clusters["default"] = &clientcmdapi.Cluster{Server: server + "/clusters/" + workspace, CertificateAuthorityData: serverCA.certPEM}
	cfg.AuthInfos["default"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		ClientKeyData:         pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	cfg.Contexts["base"] = &clientcmdapi.Context{Cluster: "base", AuthInfo: "default"}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "default", AuthInfo: "default"}
	cfg.CurrentContext = "default"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return mintRecord{}, err
	}
	return mintRecord{
		Namespace: ns, Name: name, UID: kc.GetUID(), Generation: kc.GetGeneration(), Marker: marker,
		Kubeconfig: data, Server: server, Subject: subject, NotAfter: tmpl.NotAfter, At: now,
	}, nil
}

// ensureCA returns the CA <root>-<ca> of a root shard, creating it (and its Secret, as
// the operator's cert-manager CAs have: tls.crt, tls.key, ca.crt) the first time.
func (s *standIn) ensureCA(ctx context.Context, ns, root, ca string) (*certAuthority, error) {
	key := ns + "/" + root + "/" + ca
	s.mu.Lock()
	existing := s.cas[key]
	s.mu.Unlock()
	if existing == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(time.Now().UnixNano()),
			Subject:               pkix.Name{CommonName: root + "-" + ca},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
		if err != nil {
			return nil, err
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		keyDER, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, err
		}
		existing = &certAuthority{
			cert: cert, key: k,
			certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		}
		s.mu.Lock()
		s.cas[key] = existing
		s.mu.Unlock()
	}
	secretName := root + "-" + ca
	if _, err := s.c.kube.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return existing, s.writeSecret(ctx, ns, secretName, map[string][]byte{
			"tls.crt": existing.certPEM, "tls.key": existing.keyPEM, "ca.crt": existing.certPEM,
		}, map[string]string{"cert-manager.io/certificate-name": secretName})
	} else if err != nil {
		return nil, err
	}
	return existing, nil
}

func (s *standIn) writeSecret(ctx context.Context, ns, name string, data map[string][]byte, annotations map[string]string) error {
	secrets := s.c.kube.CoreV1().Secrets(ns)
	existing, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}, metav1.CreateOptions{FieldManager: standInFieldManager})
		return err
	}
	if err != nil {
		return err
	}
	existing.Data = data
	_, err = secrets.Update(ctx, existing, metav1.UpdateOptions{FieldManager: standInFieldManager})
	return err
}

// ensureDeployment creates or updates the Deployment the operator would run for a kcp
// object, owned by it and labelled as the operator labels its pods.
func (s *standIn) ensureDeployment(ctx context.Context, owner *unstructured.Unstructured, name, component, container, image string, replicas int32) error {
	ns := owner.GetNamespace()
	labels := map[string]string{
		"app.kubernetes.io/name":       "kcp",
		"app.kubernetes.io/managed-by": "kcp-operator",
		"app.kubernetes.io/component":  component,
		"app.kubernetes.io/instance":   owner.GetName(),
	}
	deployments := s.c.kube.AppsV1().Deployments(ns)
	existing, err := deployments.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		controller := true
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: ns, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(), Controller: &controller,
				}},
			},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: container, Image: image,
						Ports: []corev1.ContainerPort{{Name: "https", ContainerPort: 6443}},
					}}},
				},
			},
		}
		_, err = deployments.Create(ctx, d, metav1.CreateOptions{FieldManager: standInFieldManager})
		if err == nil {
			s.logf("created Deployment %s/%s (%s, %d replicas) for %s %s", ns, name, image, replicas, owner.GetKind(), owner.GetName())
		}
		return err
	}
	if err != nil {
		return err
	}
	if existing.Spec.Template.Spec.Containers[0].Image == image && existing.Spec.Replicas != nil && *existing.Spec.Replicas == replicas {
		return nil
	}
	existing.Spec.Template.Spec.Containers[0].Image = image
	existing.Spec.Replicas = &replicas
	if _, err := deployments.Update(ctx, existing, metav1.UpdateOptions{FieldManager: standInFieldManager}); err != nil {
		return err
	}
	s.logf("updated Deployment %s/%s to %s, %d replicas", ns, name, image, replicas)
	return nil
}

func (s *standIn) deploymentRolledOut(ctx context.Context, ns, name string) (bool, error) {
	d, err := s.c.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return deploymentReady(d.Generation, d.Status, d.Spec.Replicas), nil
}

// etcdReady reports whether the StatefulSet behind a shard's spec.etcd.endpoints is
// ready (every member ready, current revision).
func (s *standIn) etcdReady(ctx context.Context, obj *unstructured.Unstructured) (bool, string) {
	endpoints, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "etcd", "endpoints")
	if len(endpoints) == 0 {
		return false, "spec.etcd.endpoints is empty"
	}
	sets := map[string]int{}
	for _, e := range endpoints {
		u, err := url.Parse(e)
		if err != nil {
			return false, fmt.Sprintf("etcd endpoint %q: %v", e, err)
		}
		labels := strings.Split(u.Hostname(), ".")
		if len(labels) < 3 {
			return false, fmt.Sprintf("etcd endpoint %q is not <member>.<service>.<namespace>", e)
		}
		i := strings.LastIndex(labels[0], "-")
		if i < 0 {
			return false, fmt.Sprintf("etcd endpoint %q names no StatefulSet member", e)
		}
		sets[labels[2]+"/"+labels[0][:i]]++
	}
	for key, members := range sets {
		ns, name, _ := strings.Cut(key, "/")
		sts, err := s.c.kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "etcd StatefulSet " + key + " was ready (" + err.Error() + ")"
		}
		want := int32(1)
		if sts.Spec.Replicas != nil {
			want = *sts.Spec.Replicas
		}
		st := sts.Status
		if st.ObservedGeneration < sts.Generation || st.ReadyReplicas != want || int(want) < members || st.UpdateRevision != st.CurrentRevision {
			return false, fmt.Sprintf("etcd StatefulSet %s was ready (%d/%d ready)", key, st.ReadyReplicas, want)
		}
	}
	return true, ""
}

func (s *standIn) issuerExists(ctx context.Context, rs *unstructured.Unstructured) (bool, string) {
	name, _, _ := unstructured.NestedString(rs.Object, "spec", "certificates", "issuerRef", "name")
	kind, _, _ := unstructured.NestedString(rs.Object, "spec", "certificates", "issuerRef", "kind")
	if name == "" {
		return false, "spec.certificates.issuerRef has no name"
	}
	if kind != "" && kind != "Issuer" {
		return true, "" // ClusterIssuers are not checked
	}
	if _, err := s.c.dyn.Resource(issuerGVR).Namespace(rs.GetNamespace()).Get(ctx, name, metav1.GetOptions{}); err != nil {
		return false, "Issuer " + rs.GetNamespace() + "/" + name + " existed"
	}
	return true, ""
}

func (s *standIn) markAvailable(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, key, phase, reason string) error {
	if err := s.setStatus(ctx, gvr, obj, true, phase, reason, ""); err != nil {
		return err
	}
	s.mu.Lock()
	_, before := s.available[key]
	if !before {
		s.available[key] = time.Now()
	}
	s.mu.Unlock()
	return nil
}

// setStatus writes phase and the Available condition through the status subresource,
// only when they change.
func (s *standIn) setStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, available bool, phase, reason, message string) error {
	status := metav1.ConditionFalse
	if available {
		status = metav1.ConditionTrue
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	curPhase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != "Available" {
			continue
		}
		gen, _ := m["observedGeneration"].(int64)
		if m["status"] == string(status) && m["reason"] == reason && gen == obj.GetGeneration() && curPhase == phase {
			return nil
		}
	}
	cond := map[string]any{
		"type":               "Available",
		"status":             string(status),
		"reason":             reason,
		"message":            message,
		"observedGeneration": obj.GetGeneration(),
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}
	updated := obj.DeepCopy()
	if err := unstructured.SetNestedSlice(updated.Object, []any{cond}, "status", "conditions"); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(updated.Object, phase, "status", "phase"); err != nil {
		return err
	}
	if gvr == kubeconfigGVR && available {
		fp, _, _ := unstructured.NestedString(obj.Object, "spec", "target", "frontProxyRef", "name")
		_ = unstructured.SetNestedField(updated.Object, fp, "status", "targetName")
	}
	res, err := s.c.dyn.Resource(gvr).Namespace(obj.GetNamespace()).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: standInFieldManager})
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // next round
		}
		return fmt.Errorf("status of %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	*obj = *res
	s.logf("%s %s/%s (generation %d): Available=%s reason %s, phase %s", obj.GetKind(), obj.GetNamespace(), obj.GetName(),
		obj.GetGeneration(), status, reason, phase)
	return nil
}

// isAvailable: condition Available=True for the object's current generation.
func isAvailable(obj *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" && m["status"] == "True" {
			gen, _ := m["observedGeneration"].(int64)
			return gen == 0 || gen == obj.GetGeneration()
		}
	}
	return false
}

func imageOf(obj map[string]any, path ...string) string {
	repo, _, _ := unstructured.NestedString(obj, append(path, "repository")...)
	tag, _, _ := unstructured.NestedString(obj, append(path, "tag")...)
	if repo == "" {
		repo = "ghcr.io/kcp-dev/kcp"
	}
	if tag == "" {
		tag = "operator-default" // what a missing pin would run: visible in the checks
	}
	return repo + ":" + tag
}

func replicasOf(obj map[string]any, path ...string) int32 {
	n, ok, _ := unstructured.NestedInt64(obj, path...)
	if !ok {
		return 2 // the operator's default
	}
	return int32(n)
}

func errOr(err, other error) error {
	if err != nil {
		return err
	}
	return other
}

func randomToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// availableOrder lists the kcp objects the stand-in marked Available, in order.
func (s *standIn) availableOrder() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.available))
	for k := range s.available {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return s.available[keys[i]].Before(s.available[keys[j]]) })
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + " at " + s.available[k].Format("15:04:05.000")
	}
	return out
}
