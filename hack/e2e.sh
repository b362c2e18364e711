#!/usr/bin/env bash
# Runs the kind stack end to end under the real Pulumi engine and Kubernetes provider,
# offline (tests/e2e): builds what it needs with hack/build-tools.sh (kube-apiserver,
# kube-controller-manager, kube-scheduler, etcd, kwok, the pulumi CLI and the
# pulumi-resource-kubernetes plugin, and the binaries of the add-ons' images: the
# kcp-operator and cert-manager's controller, webhook, cainjector and startupapicheck from
# ../shared/thirdparty, the Envoy Gateway control plane, and the Helm CLI that fills the
# test's chart mirrors; kcp and kcp-front-proxy from the kcp source
# in ../shared/thirdparty; the real node's kubelet, kube-proxy, containerd, CNI plugins,
# CoreDNS, busybox and etcd's image tools), puts them on PATH and runs the test as root
# (the node needs a bridge, iptables and mounts).
#
# Usage: hack/e2e.sh [go test flags...]   e.g. hack/e2e.sh -run 'TestKindStackEndToEnd/lifecycle'
#
# Environment (see tests/e2e/doc.go):
#   RAILGRID_CRDS_DIR     CRD directory (default: ../shared/reference/crds from the repository root)
#   RAILGRID_THIRDPARTY_DIR  upstream sources and the operator's chart (default: ../shared/thirdparty)
#   RAILGRID_TOOLS_CACHE  where hack/build-tools.sh keeps the binaries
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

eval "$("$ROOT/hack/build-tools.sh" env kube etcd node kwok pulumi langhost provider kcp-operator cert-manager envoy-gateway helm kcp coredns dex kubelogin)"
for bin in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy etcd kwok pulumi pulumi-resource-kubernetes \
  kcp-operator cert-manager-controller cert-manager-webhook cert-manager-cainjector cert-manager-startupapicheck envoy-gateway helm kcp kcp-front-proxy coredns containerd busybox kubectl dex kubectl-oidc_login; do
  command -v "$bin" >/dev/null || { echo "e2e: $bin not found after build" >&2; exit 1; }
done

# As .ci/run compiles (hack/goflags.sh), so the test reuses the libraries compiled for
# the tools and the language host.
. "$ROOT/hack/goflags.sh"
# -vet=off: vetting is `go vet ./...`'s job (docs/testing.md, "What CI runs").
exec go test -vet=off ./tests/e2e/ -count=1 -v -timeout 45m "$@"
