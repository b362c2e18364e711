# shellcheck shell=bash
# How the tests and the tools they run are compiled and run. Sourced, never run:
#   (. hack/goflags.sh && go vet ./... && go test -vet=off -timeout 50m ./tests/e2e/ ./...)
# by the README's test command, .ci/run, hack/build-tools.sh, hack/e2e.sh and
# hack/conformance.sh. Go reuses a compiled package only when it was compiled with the
# same flags, so the tests, the tools and the language host's build of main.go share one
# compile of the Kubernetes and Pulumi libraries only if all of them use these:
# - -trimpath: the Go language host builds main.go with -trimpath (tests/langhost);
# - -gcflags=all=-l: no inlining. The tools are test servers (kube-apiserver, the
#   controllers, the Pulumi CLI and provider), not what ships: the same code, slower to
#   run, much cheaper to compile. Users' `pulumi up` builds main.go with Go's defaults;
#   these flags never reach it.
# - -gcflags=std=: except the standard library, which keeps Go's default inlining (for a
#   package that matches both patterns the later one wins). It is compiled once for all,
#   and it is where the servers spend their time at run time: the runtime's allocator
#   and GC, encoding/json, crypto.
# - CGO_ENABLED=0: cgo changes package net and with it every package above it.
# GOGC=200: the compiler and the test servers collect garbage half as often, for a little
# more memory. GOGC changes no compiled output, so it is not part of any cache key.
export GOFLAGS="-trimpath -gcflags=all=-l -gcflags=std=" CGO_ENABLED=0 GOGC=200
