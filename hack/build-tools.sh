#!/usr/bin/env bash
# Builds the binaries the tests need from Go modules (offline apart from the
# Go module proxy and Debian's packages) into a cache keyed by tool and
# version, skipping any that are already there.
#
# Usage:
#   hack/build-tools.sh [GROUP...]        build GROUPs (default: all); print one
#                                         bin directory per line on stdout
#   hack/build-tools.sh env [GROUP...]    build as above, then print
#                                         `export PATH=...` for eval:
#                                           eval "$(hack/build-tools.sh env kube kwok)"
#   hack/build-tools.sh paths [GROUP...]  print the bin directories without
#                                         building (they may not exist yet)
#   hack/build-tools.sh check [GROUP...]  run each built binary once (version, or
#                                         for the provider plugin, that it serves
#                                         and prints its port); builds nothing
#   hack/build-tools.sh list              print the groups, versions and binaries
#
# Groups, in the order `all` builds them. Every group's cache directory names its version
# and a hash of its module's go.mod and go.sum, so a moved dependency rebuilds it, and a
# hash of the build flags (hack/goflags.sh: no cgo, no inlining), which the tests share.
#   kube        kube-apiserver, kube-controller-manager, kube-scheduler, the real
#               node's kubelet and kube-proxy, and kubectl (the sign-in test's client),
#               in one go build (tools/kube; its shared libraries are pinned to the
#               program's versions, so the program's tests and the control plane share
#               their compile)
#   etcd        etcd: Debian's etcd-server package, installed with apt-get when
#               etcd is not on PATH; RAILGRID_ETCD_FROM=source builds etcd from
#               tools/etcd into the cache instead
#   node        the end-to-end test's real node: Debian's containerd, runc,
#               containernetworking-plugins, conntrack and iptables, installed with
#               apt-get when missing. Its version is the installed containerd's. The CNI
#               plugins (bridge, host-local, loopback, ...) are not commands: they stay in
#               the package's fixed directory /usr/lib/cni, which the test names
#   actionlint  actionlint (go install at an exact version)
#   kwok        kwok (see kcp-operator below)
#   pulumi      pulumi CLI (tools/pulumi)
#   provider    pulumi-resource-kubernetes (tools/provider; needs ~5 GB of memory; its
#               Kubernetes libraries are pinned to the program's and kube's versions)
#   etcdtools   etcd, etcdctl, etcdutl at the etcd image's version (tools/etcdtools),
#               for the snapshot and restore-drill run
#   fakegcs     fake-gcs-server, a GCS emulator (go install at an exact version)
#   langhost    pulumi-language-go, the Go language host that `pulumi preview`/`up`
#               use to build and run main.go; built from the upstream source in
#               ../shared/thirdparty/pulumi-language-go (read-only, -mod=readonly);
#               its version is the pulumi SDK it requires plus a hash of that source
#   kcp-operator  kcp-operator, built from the kcp-operator source kept in
#               ../shared/thirdparty (never copied here)
#   cert-manager  cert-manager's controller, webhook, cainjector and startupapicheck, from
#               ../shared/thirdparty the same way
#   envoy-gateway envoy-gateway control plane, Envoy Gateway's module at an exact version
#               kwok, kcp-operator, cert-manager and envoy-gateway are one build of
#               tools/controllers: one module graph, so the Kubernetes libraries, the
#               controller-runtime and gRPC they all use compile once, not once per tool.
#               Building any of the four groups builds all of them into one cache directory.
#   kcp         kcp and kcp-front-proxy, the servers behind the kcp-operator's pods, built
#               from the kcp source in ../shared/thirdparty/kcp (read-only, -mod=readonly);
#               its version is the source's `git describe` pin plus a hash of that source.
#               It shares no compiled package with the other tools (kcp's Kubernetes fork)
#   helm        the Helm CLI, built in tools/provider's module graph, so it is the Helm
#               library the provider uses and shares the provider's compiled packages:
#               tests/e2e renders the Envoy Gateway chart's ServiceAccount and RBAC with it
#   coredns     CoreDNS, the stock build with its standard plugins (tools/coredns), as its
#               own image runs it: the cluster DNS on the real node, reading the
#               program's Corefile
#   dex         Dex, the hub's OIDC identity provider, built from the Dex source in
#               ../shared/thirdparty/dex (read-only, -mod=readonly) as its Makefile builds
#               a release; its version is the source's tag plus a hash of that source
#   kubelogin   kubectl-oidc_login, the kubectl oidc-login plugin (kubelogin,
#               tools/kubelogin at an exact version), named so that `kubectl oidc-login`
#               finds it on PATH
#
# Environment:
#   RAILGRID_TOOLS_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/railgrid-kcp/tools);
#                         binaries go to <root>/<name>-<version>/
#   RAILGRID_ETCD_FROM    apt (default) or source
#   RAILGRID_LANGHOST_SRC source of the langhost group (default ../shared/thirdparty/
#                         pulumi-language-go beside the repository)
#   RAILGRID_THIRDPARTY_DIR  upstream sources of the controllers (default
#                         ../shared/thirdparty from the repository root)
#
# Build logs go to stderr; stdout carries only the paths or export lines.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS="$ROOT/tools"
# The flags the tests compile with (hack/goflags.sh), so that they share this compile.
# A command that sets GOFLAGS itself (-mod=readonly) still gets them from GO_FLAGS.
. "$ROOT/hack/goflags.sh"
read -ra GO_FLAGS <<<"$GOFLAGS"
CACHE=${RAILGRID_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/railgrid-kcp/tools}
ALL_GROUPS=(kube etcd node actionlint kwok pulumi provider langhost etcdtools fakegcs kcp-operator cert-manager envoy-gateway helm kcp coredns dex kubelogin)
THIRDPARTY=${RAILGRID_THIRDPARTY_DIR:-$ROOT/../shared/thirdparty}

# Versions of the tools installed with `go install module@version`.
ACTIONLINT_VERSION=v1.7.12
FAKEGCS_VERSION=v1.56.1
# Debian's packages of the node group, and where containernetworking-plugins puts them.
NODE_PACKAGES=(containerd runc containernetworking-plugins conntrack iptables busybox-static)
CNI_BIN_DIR=/usr/lib/cni
# The kcp-operator source in $THIRDPARTY is commit 406169b of kcp-dev/kcp-operator
# (its README); the source carries no version of its own, so the pin lives here.
KCP_OPERATOR_VERSION=406169b
# The kcp source in $THIRDPARTY is commit dac74f5 of kcp-dev/kcp, `git describe`
# v0.32.0-162 (its README); the source has no version file, so the pin lives here.
KCP_VERSION=v0.32.0-162-gdac74f5
# The Dex source in $THIRDPARTY is tag v2.45.1 of dexidp/dex (its README); the source
# carries no version of its own (its Makefile asks git), so the pin lives here.
DEX_VERSION=v2.45.1
# The upstream folders tools/controllers builds from (its go.mod's replace lines).
CONTROLLERS_THIRDPARTY=(cert-manager-cainjector cert-manager-controller cert-manager-startupapicheck
  cert-manager-webhook kcp-apimachinery kcp-client-go kcp-operator kcp-sdk logicalcluster
  multicluster-runtime reconciler)
# cert-manager's binaries, as tools/controllers builds them (their modules end in
# -binary) and as the tests name them.
CERT_MANAGER_BINS=(controller webhook cainjector startupapicheck)
# Version the Kubernetes provider reports to the Pulumi engine; matches the
# github.com/pulumi/pulumi-kubernetes/sdk/v4 version the program uses.
PROVIDER_SERVE_VERSION=4.32.0

log() { printf '[build-tools] %s\n' "$*" >&2; }
TMPDIRS=()
trap 'for d in ${TMPDIRS[@]+"${TMPDIRS[@]}"}; do rm -rf "$d"; done' EXIT
die() { log "error: $*"; exit 1; }

# modver DIR MODULE: the version of MODULE required by DIR/go.mod.
modver() {
  local v
  v=$(awk -v m="$2" '
    $1 == "require" && $2 == m { print $3; exit }
    $1 == m && $2 ~ /^v/ { print $2; exit }' "$1/go.mod")
  [[ -n $v ]] || die "$2 is not required in ${1#"$ROOT"/}/go.mod"
  printf '%s\n' "$v"
}

LANGHOST_SRC=${RAILGRID_LANGHOST_SRC:-$ROOT/../shared/thirdparty/pulumi-language-go}

# source_hash DIR: the first 12 hex digits of a hash over DIR's files (names and
# contents), so that a changed source tree gets a cache directory of its own.
source_hash() {
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
}

# modhash DIR: the first 8 hex digits of a hash over DIR's go.mod and go.sum, so that a
# tool whose module graph changed (a dependency moved, not only the tool's own version)
# gets a cache directory of its own.
modhash() {
  cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -c1-8
}

# controllers_hash: the first 12 hex digits of a hash over tools/controllers' go.mod and
# go.sum and the upstream sources it builds.
controllers_hash() {
  local d
  [[ -f $THIRDPARTY/kcp-operator/go.mod ]] || die "no kcp-operator source in $THIRDPARTY (set RAILGRID_THIRDPARTY_DIR)"
  {
    cat "$TOOLS/controllers/go.mod" "$TOOLS/controllers/go.sum"
    for d in "${CONTROLLERS_THIRDPARTY[@]}"; do printf '%s %s\n' "$d" "$(source_hash "$THIRDPARTY/$d")"; done
  } | sha256sum | cut -c1-12
}

# kcp_hash: the first 12 hex digits of a hash over the kcp source and the embeddedetcd
# source its go.mod replaces.
kcp_hash() {
  { source_hash "$THIRDPARTY/kcp"; source_hash "$THIRDPARTY/kcp-embeddedetcd"; } | sha256sum | cut -c1-12
}

# Per group: cache name, version (what the binaries report), tag (what else tells two
# builds of one version apart: hashes of the module graph or source), the cache
# directory's name KEY, and the binaries.
group_info() {
  TAG=
  case $1 in
    kube)
      NAME=kube; VERSION=$(modver "$TOOLS/kube" k8s.io/kubernetes); TAG=$(modhash "$TOOLS/kube")
      BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl) ;;
    etcd)
      NAME=etcd; BINS=(etcd)
      if [[ ${RAILGRID_ETCD_FROM:-apt} == source ]]; then
        VERSION=$(modver "$TOOLS/etcd" go.etcd.io/etcd/server/v3); TAG=$(modhash "$TOOLS/etcd")
      else
        VERSION=apt
      fi ;;
    node)
      # Named after what is installed; before the install, "apt".
      NAME=node; VERSION=apt; BINS=(containerd ctr runc conntrack iptables busybox)
      local v
      if v=$(syscmd containerd) && v=$("$v" --version 2>/dev/null); then
        v=${v##* }; VERSION=containerd-${v:-unknown}
      fi ;;
    actionlint) NAME=actionlint; VERSION=$ACTIONLINT_VERSION; BINS=(actionlint) ;;
    kwok|kcp-operator|cert-manager|envoy-gateway)
      NAME=controllers
      # The operator's pin; the tag hashes the module graph and the upstream sources, so
      # that a changed go.sum or source tree gets a cache directory of its own.
      VERSION=$KCP_OPERATOR_VERSION; TAG=$(controllers_hash)
      BINS=(kwok kcp-operator "${CERT_MANAGER_BINS[@]/#/cert-manager-}" envoy-gateway) ;;
    pulumi)
      NAME=pulumi; VERSION=$(modver "$TOOLS/pulumi" github.com/pulumi/pulumi/pkg/v3); TAG=$(modhash "$TOOLS/pulumi")
      BINS=(pulumi) ;;
    provider)
      NAME=pulumi-resource-kubernetes
      # The served version; the tag is the commit of the provider module's
      # pseudo-version and the module graph's hash.
      VERSION=$(modver "$TOOLS/provider" github.com/pulumi/pulumi-kubernetes/provider/v4)
      TAG=${VERSION##*-}-$(modhash "$TOOLS/provider")
      VERSION=v$PROVIDER_SERVE_VERSION
      BINS=(pulumi-resource-kubernetes) ;;
    etcdtools)
      NAME=etcdtools; VERSION=$(modver "$TOOLS/etcdtools" go.etcd.io/etcd/etcdctl/v3); TAG=$(modhash "$TOOLS/etcdtools")
      BINS=(etcd etcdctl etcdutl) ;;
    fakegcs) NAME=fake-gcs-server; VERSION=$FAKEGCS_VERSION; BINS=(fake-gcs-server) ;;
    langhost)
      NAME=pulumi-language-go
      [[ -f $LANGHOST_SRC/go.mod ]] || die "langhost: no Go language host source in $LANGHOST_SRC (set RAILGRID_LANGHOST_SRC)"
      VERSION=$(modver "$LANGHOST_SRC" github.com/pulumi/pulumi/sdk/v3); TAG=$(source_hash "$LANGHOST_SRC")
      BINS=(pulumi-language-go) ;;
    kcp)
      NAME=kcp
      [[ -f $THIRDPARTY/kcp/go.mod ]] || die "kcp: no kcp source in $THIRDPARTY/kcp (set RAILGRID_THIRDPARTY_DIR)"
      VERSION=$KCP_VERSION; TAG=$(kcp_hash)
      BINS=(kcp kcp-front-proxy) ;;
    helm)
      NAME=helm; VERSION=$(modver "$TOOLS/provider" helm.sh/helm/v3); TAG=provider-$(modhash "$TOOLS/provider")
      BINS=(helm) ;;
    coredns)
      NAME=coredns; VERSION=$(modver "$TOOLS/coredns" github.com/coredns/coredns); TAG=$(modhash "$TOOLS/coredns")
      BINS=(coredns) ;;
    dex)
      NAME=dex
      [[ -f $THIRDPARTY/dex/go.mod ]] || die "dex: no Dex source in $THIRDPARTY/dex (set RAILGRID_THIRDPARTY_DIR)"
      VERSION=$DEX_VERSION; TAG=$(source_hash "$THIRDPARTY/dex")
      BINS=(dex) ;;
    kubelogin)
      NAME=kubelogin; VERSION=$(modver "$TOOLS/kubelogin" github.com/int128/kubelogin); TAG=$(modhash "$TOOLS/kubelogin")
      BINS=(kubectl-oidc_login) ;;
    *) die "unknown group '$1' (groups: ${ALL_GROUPS[*]} all)" ;;
  esac
  # The build flags are part of the key: a binary built with other flags is another build.
  KEY=$NAME-$VERSION${TAG:+-$TAG}-f$(printf '%s %s' "$GOFLAGS" "$CGO_ENABLED" | sha256sum | cut -c1-6)
}

# syscmd NAME: the path of the system command NAME, also where root's PATH has it and a
# user's may not (Debian puts runc, conntrack and iptables in /usr/sbin).
syscmd() { PATH=$PATH:/usr/sbin:/sbin command -v "$1"; }

# bindir GROUP: where GROUP's binaries live, one directory a line (node: two).
bindir() {
  group_info "$1"
  if [[ $1 == etcd && $VERSION == apt ]]; then
    local etcd
    if etcd=$(command -v etcd); then dirname "$etcd"; else echo /usr/bin; fi
  elif [[ $1 == node ]]; then
    local b p dirs=()
    for b in "${BINS[@]}"; do
      p=$(syscmd "$b") && p=$(dirname "$p") || p=/usr/bin
      [[ " ${dirs[*]-} " == *" $p "* ]] || dirs+=("$p")
    done
    printf '%s\n' "${dirs[@]}"
  else
    printf '%s\n' "$CACHE/$KEY"
  fi
}

have_all() {
  local dir=$1 b
  shift
  for b in "$@"; do [[ -x $dir/$b ]] || return 1; done
}

GOBUILD=(go build "${GO_FLAGS[@]}" -buildvcs=false)

# Each builder writes the binaries into $1, a fresh staging directory.
build_kube() {
  local out=$1 v=$VERSION pkg="k8s.io/component-base/version" cgo="k8s.io/client-go/pkg/version"
  local major=${v#v}; major=${major%%.*}
  local minor=${v#v"$major".}; minor=${minor%%.*}
  local ld="-s -w" p
  for p in "$pkg" "$cgo"; do
    ld+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  local pkgs=("${BINS[@]/#/k8s.io/kubernetes/cmd/}")
  (cd "$TOOLS/kube" && CGO_ENABLED=0 "${GOBUILD[@]}" -ldflags "$ld" -o "$out/" "${pkgs[@]}")
}

build_etcd_source() {
  local ld="-s -w"
  (cd "$TOOLS/etcd" && CGO_ENABLED=0 "${GOBUILD[@]}" -ldflags "$ld" -o "$1/etcd" go.etcd.io/etcd/server/v3)
}

go_install() { # out module/pkg@version
  GOBIN=$1 CGO_ENABLED=0 go install "${GO_FLAGS[@]}" -buildvcs=false -ldflags "-s -w" "$2"
}
build_actionlint() { go_install "$1" "github.com/rhysd/actionlint/cmd/actionlint@$VERSION"; }
build_fakegcs() { go_install "$1" "github.com/fsouza/fake-gcs-server@$VERSION"; }

# The stock CoreDNS: its main package links every plugin of its plugin.cfg. The version
# it reports is a constant of the module (coremain.CoreVersion).
build_coredns() {
  (cd "$TOOLS/coredns" && CGO_ENABLED=0 "${GOBUILD[@]}" -ldflags "-s -w" -o "$1/coredns" github.com/coredns/coredns)
}

# Dex from the read-only upstream tree, stamped as its Makefile stamps a release
# (-X main.version). Its sqlite3 storage needs cgo and is left out, as in any CGO_ENABLED=0
# build; the tests use the memory storage.
build_dex() {
  (cd "$THIRDPARTY/dex" && GOFLAGS=-mod=readonly CGO_ENABLED=0 "${GOBUILD[@]}" \
    -ldflags "-s -w -X main.version=$VERSION" -o "$1/dex" ./cmd/dex)
}

# kubelogin under the name kubectl looks up for `kubectl oidc-login`. Its version string
# is the one its release sets (-X main.version, as its release workflow builds it).
build_kubelogin() {
  (cd "$TOOLS/kubelogin" && CGO_ENABLED=0 "${GOBUILD[@]}" \
    -ldflags "-s -w -X main.version=$VERSION" -o "$1/kubectl-oidc_login" github.com/int128/kubelogin)
}

build_etcdtools() {
  local out=$1 bin
  for bin in etcd etcdctl etcdutl; do
    local pkg=go.etcd.io/etcd/$bin/v3
    [[ $bin == etcd ]] && pkg=go.etcd.io/etcd/server/v3
    (cd "$TOOLS/etcdtools" && CGO_ENABLED=0 "${GOBUILD[@]}" -ldflags "-s -w" -o "$out/$bin" "$pkg")
  done
}

# The helm command from tools/provider's module graph; its version string is the
# module's, as a release build sets it.
build_helm() {
  (cd "$TOOLS/provider" && CGO_ENABLED=0 "${GOBUILD[@]}" \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$VERSION" -o "$1/helm" helm.sh/helm/v3/cmd/helm)
}

# The controllers in one go build of tools/controllers, copied to a scratch directory
# whose replace lines point at $THIRDPARTY, so the read-only upstream copies are never
# written and RAILGRID_THIRDPARTY_DIR can name another copy.
build_controllers() {
  local out=$1 tp scratch mod d edits=()
  grep -q '^module github.com/kcp-dev/kcp-operator$' "$THIRDPARTY/kcp-operator/go.mod" ||
    die "$THIRDPARTY/kcp-operator is not the kcp-operator module"
  # A clean absolute path: with a ".." in it, go treats kcp-operator/sdk as part of the
  # kcp-operator module as well as a module of its own ("ambiguous import").
  tp=$(cd "$THIRDPARTY" && pwd -P)
  scratch=$(mktemp -d "$CACHE/.controllers-src.XXXXXX")
  TMPDIRS+=("$scratch")
  cp "$TOOLS/controllers/go.mod" "$TOOLS/controllers/go.sum" "$scratch/"
  # Lines of the replace block: <module> => ../../../shared/thirdparty/<folder>
  while read -r mod d; do
    edits+=("-replace=$mod=$tp/$d")
  done < <(awk -v p=../../../shared/thirdparty/ '$2 == "=>" && index($3, p) == 1 { print $1, substr($3, length(p) + 1) }' "$scratch/go.mod")
  ((${#edits[@]} == ${#CONTROLLERS_THIRDPARTY[@]} + 1)) || die "tools/controllers/go.mod: expected $((${#CONTROLLERS_THIRDPARTY[@]} + 1)) replace lines into ../../../shared/thirdparty, found ${#edits[@]}"
  (cd "$scratch" && go mod edit "${edits[@]}")
  local b certManager=() ld="-s -w"
  for b in "${CERT_MANAGER_BINS[@]}"; do certManager+=("github.com/cert-manager/cert-manager/$b-binary"); done
  # cert-manager's binaries log and send (User-Agent) the version its release stamps
  # (make/00_mod.mk), not "canary".
  ld+=" -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$(modver "$TOOLS/controllers" github.com/cert-manager/cert-manager)"
  (cd "$scratch" && GOFLAGS=-mod=readonly CGO_ENABLED=0 "${GOBUILD[@]}" -ldflags "$ld" -o "$out/" \
    "${certManager[@]}" \
    github.com/envoyproxy/gateway/cmd/envoy-gateway \
    github.com/kcp-dev/kcp-operator/cmd/operator \
    sigs.k8s.io/kwok/cmd/kwok)
  for b in "${CERT_MANAGER_BINS[@]}"; do mv "$out/$b-binary" "$out/cert-manager-$b"; done
  mv "$out/operator" "$out/kcp-operator"
  rm -rf "$scratch"
}

# kcp's servers from the read-only upstream tree, stamped as kcp's Makefile stamps a
# release: the Kubernetes version of its fork, "+kcp-", and kcp's own version.
build_kcp() {
  local kube p ld="-s -w"
  kube=$(modver "$THIRDPARTY/kcp" k8s.io/kubernetes)
  local major=${kube#v}; major=${major%%.*}
  local minor=${kube#v"$major".}; minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$kube+kcp-$VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  (cd "$THIRDPARTY/kcp" && GOFLAGS=-mod=readonly CGO_ENABLED=0 "${GOBUILD[@]}" -ldflags "$ld" -o "$1/" \
    ./cmd/kcp ./cmd/kcp-front-proxy)
}

build_pulumi() {
  local ld="-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$VERSION"
  (cd "$TOOLS/pulumi" && CGO_ENABLED=0 "${GOBUILD[@]}" -ldflags "$ld" -o "$1/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
}

# The language host reports the SDK version it was built against, as a release does.
build_langhost() {
  local ld="-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$VERSION"
  (cd "$LANGHOST_SRC" && GOFLAGS=-mod=readonly CGO_ENABLED=0 "${GOBUILD[@]}" -ldflags "$ld" -o "$1/pulumi-language-go" .)
}

build_provider() {
  local out=$1 mod=github.com/pulumi/pulumi-kubernetes/provider/v4 scratch moddir
  scratch=$(mktemp -d "$CACHE/.provider-src.XXXXXX")
  TMPDIRS+=("$scratch")
  # Build a copy of tools/provider with the provider module's schema and
  # Terraform mapping beside main.go, so nothing is written into the repo.
  cp "$TOOLS/provider/go.mod" "$TOOLS/provider/go.sum" "$TOOLS/provider/main.go" "$scratch/"
  (cd "$scratch" && go mod download "$mod")
  moddir=$(cd "$scratch" && go list -m -f '{{.Dir}}' "$mod")
  [[ -n $moddir ]] || die "no module directory for $mod"
  cp "$moddir/cmd/pulumi-resource-kubernetes/schema.json" \
     "$moddir/cmd/pulumi-resource-kubernetes/terraform-mapping.json" "$scratch/"
  chmod u+w "$scratch"/*.json
  local ld="-s -w -X main.version=$PROVIDER_SERVE_VERSION -X $mod/pkg/version.Version=$PROVIDER_SERVE_VERSION"
  (cd "$scratch" && CGO_ENABLED=0 "${GOBUILD[@]}" -ldflags "$ld" -o "$out/pulumi-resource-kubernetes" .)
  rm -rf "$scratch"
}

# apt_install PACKAGE...: installs Debian's PACKAGEs, after one `apt-get update` per run.
# A dpkg lock held elsewhere on the machine is waited for, not failed on.
APT_UPDATED=
apt_install() {
  local sudo=()
  [[ $(id -u) == 0 ]] || sudo=(sudo)
  if [[ -z $APT_UPDATED ]]; then
    "${sudo[@]}" apt-get update -qq >&2
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=300 "$@" >&2
}

install_etcd_apt() {
  command -v etcd >/dev/null && return 0
  command -v apt-get >/dev/null || die "etcd is not on PATH and apt-get is missing; try RAILGRID_ETCD_FROM=source"
  log "etcd: installing Debian package etcd-server"
  apt_install etcd-server
  command -v etcd >/dev/null || die "etcd-server installed but etcd is not on PATH"
}

# node_missing: the node group's packages whose command (or CNI plugin) is not there.
node_missing() {
  local pkg
  for pkg in "${NODE_PACKAGES[@]}"; do
    case $pkg in
      containernetworking-plugins) [[ -x $CNI_BIN_DIR/bridge && -x $CNI_BIN_DIR/host-local && -x $CNI_BIN_DIR/loopback ]] ;;
      # The static build: it is copied into the probe images, which have no libc.
      busybox-static) [[ $(dpkg-query -W -f='${Status}' busybox-static 2>/dev/null) == "install ok installed" ]] ;;
      *) syscmd "$pkg" >/dev/null ;;
    esac || printf '%s\n' "$pkg"
  done
}

install_node_apt() {
  local missing
  mapfile -t missing < <(node_missing)
  ((${#missing[@]} > 0)) || return 0
  command -v apt-get >/dev/null || die "node: ${missing[*]} missing and apt-get is missing"
  log "node: installing Debian packages ${missing[*]}"
  apt_install "${missing[@]}"
  mapfile -t missing < <(node_missing)
  ((${#missing[@]} == 0)) || die "node: installed, but still missing: ${missing[*]}"
}

build_group() {
  local g=$1 dir stage start lockfd=
  group_info "$g"
  if [[ $g == etcd && $VERSION == apt ]]; then
    start=$SECONDS
    install_etcd_apt
    log "etcd: $(command -v etcd) ($((SECONDS - start))s)"
    return
  fi
  if [[ $g == node ]]; then
    start=$SECONDS
    install_node_apt
    group_info node
    log "node: $VERSION, CNI plugins in $CNI_BIN_DIR ($((SECONDS - start))s)"
    return
  fi
  dir="$CACHE/$KEY"
  if have_all "$dir" "${BINS[@]}"; then
    log "$g: cached in $dir"
    return
  fi
  mkdir -p "$CACHE"
  # Serialise concurrent builds of the same group.
  if command -v flock >/dev/null; then
    exec {lockfd}>"$CACHE/.$KEY.lock"
    flock "$lockfd"
    if have_all "$dir" "${BINS[@]}"; then
      log "$g: cached in $dir"
      exec {lockfd}>&-
      return
    fi
  fi
  start=$SECONDS
  log "$g: building $KEY (${BINS[*]})"
  stage=$(mktemp -d "$CACHE/.$KEY.XXXXXX")
  TMPDIRS+=("$stage")
  case $g in
    etcd) build_etcd_source "$stage" ;;
    kwok|kcp-operator|cert-manager|envoy-gateway) build_controllers "$stage" ;;
    *) "build_$g" "$stage" ;;
  esac
  have_all "$stage" "${BINS[@]}" || die "$g: build did not produce ${BINS[*]}"
  # Publish the complete set at once so a half-built directory never counts.
  rm -rf "$dir"
  mv "$stage" "$dir"
  chmod 755 "$dir"
  log "$g: built in $((SECONDS - start))s -> $dir"
  [[ -z $lockfd ]] || exec {lockfd}>&-
}

# expand_groups GROUP...: sets GROUPS_SEL to the selected groups, deduplicated.
# check_group GROUP: run GROUP's binaries once and print what they report.
check_group() {
  local g=$1 dir b out pid i
  dir=$(bindir "$g")
  group_info "$g"
  for b in "${BINS[@]}"; do
    if [[ $g == node ]]; then
      out=$(syscmd "$b") || die "node: $b is missing (run hack/build-tools.sh node)"
      dir=$(dirname "$out")
    fi
    [[ -x $dir/$b ]] || die "$g: $dir/$b is missing (run hack/build-tools.sh $g)"
    case $b in
      actionlint) out=$("$dir/$b" -version) ;;
      etcdctl|etcdutl) out=$("$dir/$b" version) ;;
      fake-gcs-server) out=$("$dir/$b" -help 2>&1 | head -n 1 || true) ;;
      pulumi) out=$(PULUMI_SKIP_UPDATE_CHECK=true "$dir/$b" version) ;;
      pulumi-language-go) out=$("$dir/$b" -version) ;;
      kcp-operator) out=$("$dir/$b" --help 2>&1 || true) ;;
      # No version flag; their help starts with an empty line.
      cert-manager-*) out=$("$dir/$b" --help 2>&1 | grep -m1 . || true) ;;
      kcp|kcp-front-proxy) out=$("$dir/$b" --version 2>&1 || true) ;;
      envoy-gateway) out=$("$dir/$b" version) ;;
      helm) out=$("$dir/$b" version --short) ;;
      coredns) out=$("$dir/$b" -version) ;;
      kubectl) out=$("$dir/$b" version --client) ;;
      dex) out=$("$dir/$b" version) ;;
      kubectl-oidc_login) out=$("$dir/$b" --version) ;;
      ctr|runc|conntrack|iptables) out=$("$dir/$b" --version) ;;
      busybox) out=$("$dir/$b" 2>&1 | head -n 1 || true) ;;
      pulumi-resource-kubernetes)
        # Started without an engine address, a provider serves gRPC on a free
        # port and prints the port on stdout.
        out=$(mktemp)
        TMPDIRS+=("$out")
        "$dir/$b" >"$out" 2>&1 &
        pid=$!
        for ((i = 0; i < 300; i++)); do
          [[ -s $out ]] && break
          kill -0 "$pid" 2>/dev/null || break
          sleep 0.1
        done
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        out=$(<"$out")
        [[ $out =~ ^[0-9]+$'\n'?$ ]] || die "$g: $b did not print a port: $out"
        out="serves gRPC (printed port $out)" ;;
      *) out=$("$dir/$b" --version) ;;
    esac
    printf '%s: %s\n' "$b" "${out%%$'\n'*}"
  done
  if [[ $g == node ]]; then
    for b in bridge host-local loopback; do
      [[ -x $CNI_BIN_DIR/$b ]] || die "node: CNI plugin $CNI_BIN_DIR/$b is missing (run hack/build-tools.sh node)"
    done
    printf 'CNI plugins: %s\n' "$(cd "$CNI_BIN_DIR" && echo *)"
  fi
}

expand_groups() {
  local g x
  (($# > 0)) || set -- all
  GROUPS_SEL=()
  for g in "$@"; do
    [[ $g == all ]] || group_info "$g" # dies on an unknown group
    for x in "${ALL_GROUPS[@]}"; do
      [[ $g == all || $g == "$x" ]] || continue
      [[ " ${GROUPS_SEL[*]-} " == *" $x "* ]] || GROUPS_SEL+=("$x")
    done
  done
}

main() {
  local cmd=build
  case ${1:-} in
    env|paths|list|check) cmd=$1; shift ;;
    -h|--help|help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; return ;;
  esac
  local g d bd dirs=()
  expand_groups "$@"
  if [[ $cmd == list ]]; then
    for g in "${GROUPS_SEL[@]}"; do
      group_info "$g"
      printf '%-13s %-40s %s\n' "$g" "$KEY" "${BINS[*]}"
    done
    return
  fi
  if [[ $cmd == check ]]; then
    for g in "${GROUPS_SEL[@]}"; do check_group "$g"; done
    return
  fi
  if [[ $cmd != paths ]]; then
    command -v go >/dev/null || die "go is not on PATH"
    for g in "${GROUPS_SEL[@]}"; do build_group "$g"; done
  fi
  for g in "${GROUPS_SEL[@]}"; do
    bd=$(bindir "$g")
    while read -r d; do
      [[ " ${dirs[*]-} " == *" $d "* ]] || dirs+=("$d")
    done <<<"$bd"
  done
  if [[ $cmd == env ]]; then
    # shellcheck disable=SC2016 # "$PATH" is expanded by the caller's eval.
    for d in "${dirs[@]}"; do
      if [[ $d == "$CACHE"/* ]]; then
        printf 'export PATH=%q:"$PATH"\n' "$d"
      elif [[ ":$PATH:" != *":$d:"* ]]; then
        # A system directory (apt's etcd, the node's packages): append, never shadow
        # what is first.
        printf 'export PATH="$PATH":%q\n' "$d"
      fi
    done
  else
    printf '%s\n' "${dirs[@]}"
  fi
}

main "$@"
