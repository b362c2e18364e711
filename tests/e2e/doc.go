// Package e2e runs the kind stack end to end under the real Pulumi engine and the real
// Kubernetes provider, offline: the Pulumi CLI (driven through the Automation API over a
// copy of the program, so that every preview, up and destroy compiles and runs main.go
// through the Go language host with the stack config in PULUMI_CONFIG, as a user's
// `pulumi up -s kind` does), the pulumi-resource-kubernetes plugin, and a cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)
// with one real node (kubelet, kube-proxy and containerd on a bridge of the test's own,
// node_test.go) and three nodes simulated by kwok. The stack file is the shipped
// Pulumi.kind.yaml with only the chart sources changed (stack_test.go, overlayKeys): the
// test serves cert-manager's and the kcp-operator's charts from a Helm repository and
// Envoy Gateway's from an OCI registry, on loopback over https from a CA of its own, and
// the stack's own Helm releases install all three. The API server's default node
// selector puts every pod on the real node, where etcd, kcp, the kcp-operator,
// cert-manager (controller, webhook, cainjector, startupapicheck), Envoy Gateway's
// control plane and certgen, and CoreDNS run as real containers from images written
// here; a MutatingAdmissionPolicy sends only Envoy's proxy pods to the kwok nodes (no
// Envoy binary can be built here). killed-up alone declares cert-manager present and runs
// its controller as a process, without its own approver (approver_test.go).
//
// The test proves what mocks and the offline plan cannot: a preview of a fresh stack
// succeeds; `up` converges and creates no kcp object before what it needs is ready; the
// cluster holds what the offline plan shows; the hub Secret holds the minted
// kubeconfig while the state holds no plaintext of it; Envoy Gateway accepts the
// GatewayClass, the TLSRoutes and both traffic policies and programs the Gateway; the
// real kcp and kcp-front-proxy binaries (built from the kcp source in
// ../shared/thirdparty/kcp) accept the command line the operator wrote into every kcp
// Deployment, for the kind stack's first up and version bump and for the gke plan's kcp
// objects, and refuse an unknown or disallowed flag (kcpflags_test.go); a second preview
// and `up` change nothing; a kcp version bump updates every kcp object, rolls root-kcp
// and root-proxy out before the Shard and the FrontProxy are updated, returns only once
// every kcp Deployment has rolled out (upgrade_test.go), and replaces nothing that holds
// data; raising hub.remintGeneration mints a new credential; `destroy` keeps the etcd
// volumes and the operator's CRDs, and a later `up` takes them over; an `up` interrupted
// with Ctrl-C while it waits for the root shard converges when run again; an `up` killed
// with SIGKILL at three points converges after pulumi cancel and pulumi refresh
// --clear-pending-creates (killed_test.go); CoreDNS's pod template makes it read the
// program's Corefile, also after destroy; and against the running kcp (realkcp_test.go):
// every pod Ready on the real node, cmd/verify's checks but ingress, the hub's
// credential through the front proxy (another CA's refused), and the Shards kcp's root
// workspace lists as shards are added and retired, with no finalizer lifted.
//
// hack/e2e.sh builds the binaries (hack/build-tools.sh env kube etcd kwok pulumi
// provider kcp-operator cert-manager envoy-gateway helm kcp) and runs the test. The
// binaries are looked up on PATH: kube-apiserver, kube-controller-manager, kube-scheduler,
// etcd, kwok, pulumi, pulumi-resource-kubernetes, kcp-operator, cert-manager-controller,
// -webhook, -cainjector and -startupapicheck, envoy-gateway, helm, kcp and kcp-front-proxy. Without them the test fails, unless RAILGRID_SKIP_E2E=1;
// `go test -short` skips it. The upstream CRDs are read from ../shared/reference/crds
// relative to the repository root, or from RAILGRID_CRDS_DIR; the operator's chart and RBAC
// from ../shared/thirdparty or RAILGRID_THIRDPARTY_DIR; kwok's stages from the
// sigs.k8s.io/kwok module, and cert-manager's and Envoy Gateway's charts from the
// github.com/cert-manager/cert-manager and github.com/envoyproxy/gateway modules in the
// Go module cache (downloaded if missing). The test needs root for the real node. A failing run keeps the CLI's output of
// every command (the path is logged); RAILGRID_E2E_KEEP=1 also keeps the control plane's
// data and logs, the workspace and the state; RAILGRID_E2E_VERBOSE=1 prints the
// controllers' logs of a passing run.
//
// The etcd and kube-apiserver with their certificates, the process handling, the lookup
// of the binaries and the CRD loading come from tests/internal/testenv, which
// tests/conformance shares; what only this test needs (the controller manager, the
// scheduler, kwok and its stages, the stack, the controllers, the chart) stays here.
package e2e
