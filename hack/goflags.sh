# shellcheck shell=bash
# How the tests and the tools they run are compiled. Sourced, never run:
#   (. hack/goflags.sh && go vet ./... && go test -vet=off -timeout 50m ./tests/e2e/ ./...)
# by the README's test command, .ci/run, hack/build-tools.sh, hack/e2e.sh and
# hack/conformance.sh. Go reuses a compiled package only when it was compiled with the
# same flags, so the tests, the tools and the language host's build of main.go share one
# compile of the Kubernetes and Pulumi libraries only if all of them use these:
# - -trimpath: the Go language host builds main.go with -trimpath (tests/langhost);
# - -gcflags=all=-l: no inlining. The tools are test servers (kube-apiserver, the
#   controllers, the Pulumi CLI and provider), not what ships: the same code, slower to
#   run, much cheaper to compile (measured alone: k8s.io/api/core/v1 7.6 s of CPU instead
#   of 22.3 s; client-go with the standard library 205 s instead of 252 s). Users'
#   `pulumi up` builds main.go with Go's defaults; these flags never reach it.
# - CGO_ENABLED=0: cgo changes package net and with it every package above it.
export GOFLAGS="-trimpath -gcflags=all=-l" CGO_ENABLED=0
