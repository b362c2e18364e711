#!/usr/bin/env bash
# Applies every Kubernetes object of the kind and gke stacks to a real kube-apiserver
# (with etcd, both on 127.0.0.1, started by the test) that has the upstream CRDs
# installed: builds the servers with hack/build-tools.sh, puts them on PATH and runs
# tests/conformance.
#
# Usage: hack/conformance.sh [go test flags...]   e.g. hack/conformance.sh -run 'TestStacksApplyToAPIServer/kind'
#
# Environment (see tests/conformance/doc.go):
#   RAILGRID_CRDS_DIR   CRD directory (default: ../shared/reference/crds from the repository root)
#   KUBE_APISERVER, ETCD  binaries to use instead of the ones on PATH
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

eval "$("$ROOT/hack/build-tools.sh" env kube etcd)"
command -v kube-apiserver >/dev/null || { echo "conformance: kube-apiserver not found after build" >&2; exit 1; }
command -v etcd >/dev/null || { echo "conformance: etcd not found after build" >&2; exit 1; }

# As .ci/run compiles (hack/goflags.sh), so the test reuses the libraries compiled for
# the tools and the language host.
. "$ROOT/hack/goflags.sh"
# -vet=off: vetting is `go vet ./...`'s job (docs/testing.md, "What CI runs").
exec go test -vet=off ./tests/conformance/ -count=1 -v -timeout 30m "$@"
