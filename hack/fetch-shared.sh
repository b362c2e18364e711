#!/usr/bin/env bash
# Assembles what the tests read beside the checkout: ../shared/thirdparty (upstream source
# trees the controllers, kcp, Dex and the Go language host are built from) and
# ../shared/reference/crds (upstream CRD schemas), from their public repositories at the
# pins in SOURCES below. This project's CI machine is given ../shared; a fresh machine (a
# GitHub runner) builds it with this script.
#
# Usage: hack/fetch-shared.sh [SHARED_DIR]
# Environment:
#   RAILGRID_SHARED_DIR      where to assemble (default ../shared beside the repository;
#                            the argument wins)
#   RAILGRID_THIRDPARTY_DIR  the thirdparty folder (default SHARED_DIR/thirdparty), as the
#                            tests read it
#   RAILGRID_CRDS_DIR        the CRD folder (default SHARED_DIR/reference/crds), likewise
#   RAILGRID_SHARED_WRITABLE=1  leave the result writable (default: read-only, as the tests
#                            and hack/build-tools.sh expect: they never write there)
#
# Each row is fetched with git only: a shallow, blob-less fetch of the pinned commit, then
# `git archive` of the subdirectory (or the files) the row names, which fetches just those
# blobs. A row with a tag is checked against it (`git ls-remote`) and fails if the tag has
# moved. Then the removals, the go.mod edits (`go mod edit`) and, where the go.sum column
# says `tidy`, `go mod tidy` against the Go module proxy.
#
# Idempotent: a finished row leaves a stamp (its table row) in SHARED_DIR/.fetch-shared; a
# row whose stamp matches is skipped, a changed row is fetched again into a staging folder
# and swapped in whole. A destination that exists without a stamp (a copy provided another
# way) is never touched: the script stops instead.
set -euo pipefail

# One row per destination. Columns, separated by "|" (a row may continue on the next line):
#   dest        thirdparty/<folder> or crds/<folder>
#   repository  public git URL
#   commit      the pinned commit (full SHA: a shallow fetch needs it)
#   tag         the release tag that commit is, checked against the remote; - for none
#   subdir      the repository subdirectory taken (. for the whole tree)
#   files       the files taken from subdir (. for all of it)
#   remove      paths removed afterwards, relative to dest; **/NAME removes NAME at any
#               depth; each must match something; - for none
#   go.mod      edits as "<go.mod path>: <go mod edit flags>", groups separated by ";"
#   go.sum      keep (upstream's, unchanged), tidy (go mod tidy after the removals and
#               edits, with the Go module proxy), or - (no go.mod edited)
# The provenance of each pin: ../shared/thirdparty/README.md and
# ../shared/reference/crds/README.md on this project's CI machine.
SOURCES=(
  # --- upstream source trees (../shared/thirdparty) ---------------------------------------
  # kcp-operator main, 2026-08-18: v0.9.0 plus "Deprecate Bundles" (hack/build-tools.sh
  # KCP_OPERATOR_VERSION). Its dependencies below are not served by the Go module proxy.
  'thirdparty/kcp-operator | https://github.com/kcp-dev/kcp-operator | 406169b3aec30f7a28a16ef234b0f36d8b9492de | - | . | . | - |
     go.mod: -replace=github.com/kcp-dev/sdk=../kcp-sdk -replace=k8c.io/reconciler=../reconciler
             -replace=sigs.k8s.io/multicluster-runtime=../multicluster-runtime
             -replace=github.com/kcp-dev/logicalcluster/v3=../logicalcluster
             -replace=github.com/kcp-dev/apimachinery/v2=../kcp-apimachinery
             -replace=github.com/kcp-dev/client-go=../kcp-client-go;
     sdk/go.mod: -replace=github.com/kcp-dev/logicalcluster/v3=../../logicalcluster
             -replace=github.com/kcp-dev/apimachinery/v2=../../kcp-apimachinery
             -replace=github.com/kcp-dev/client-go=../../kcp-client-go | keep'
  'thirdparty/kcp-sdk | https://github.com/kcp-dev/sdk | c42d4162b8acef08a117845b8393a5bb6a7a6182 | v0.32.0 | . | . | - |
     go.mod: -replace=github.com/kcp-dev/logicalcluster/v3=../logicalcluster
             -replace=github.com/kcp-dev/apimachinery/v2=../kcp-apimachinery
             -replace=github.com/kcp-dev/client-go=../kcp-client-go | keep'
  'thirdparty/logicalcluster | https://github.com/kcp-dev/logicalcluster | 2f9054fd16a44a28233f6a03f011f69060ca5c1c | v3.0.5 | . | . | - | - | -'
  'thirdparty/reconciler | https://github.com/kubermatic/reconciler | aae51124d778868be6f9ab0bb36f7d6229f8ad2f | v0.5.0 | . | . | - | - | -'
  'thirdparty/multicluster-runtime | https://github.com/kubernetes-sigs/multicluster-runtime | 548bed5e8f73905d20149d4dd54eb59874ac5636 | v0.24.1 | . | . | - | - | -'
  # apimachinery and client-go: the commits the provided copy was taken at (their v2.32.0
  # and v0.32.0 tags were not in the source it came from), so no tag is checked.
  'thirdparty/kcp-apimachinery | https://github.com/kcp-dev/apimachinery | 3fda4dbfbbc96d90115b8cca3998f40b6888118b | - | . | . | - | - | -'
  'thirdparty/kcp-client-go | https://github.com/kcp-dev/client-go | eb9d6ed22bf7e1bac14fb3783e1e5e43b48ab1cb | - | . | . | - | - | -'
  # cert-manager's binaries are modules of their own inside the cert-manager repository,
  # replacing cert-manager's root module with ../../; here they require the served release.
  'thirdparty/cert-manager-controller | https://github.com/cert-manager/cert-manager | e5b7b18450dd2c4b993b95bcd680b1a057205b00 | v1.20.2 | cmd/controller | . | - |
     go.mod: -dropreplace=github.com/cert-manager/cert-manager -require=github.com/cert-manager/cert-manager@v1.20.2 | tidy'
  'thirdparty/cert-manager-webhook | https://github.com/cert-manager/cert-manager | e5b7b18450dd2c4b993b95bcd680b1a057205b00 | v1.20.2 | cmd/webhook | . | **/*_test.go |
     go.mod: -dropreplace=github.com/cert-manager/cert-manager -require=github.com/cert-manager/cert-manager@v1.20.2 | tidy'
  'thirdparty/cert-manager-cainjector | https://github.com/cert-manager/cert-manager | e5b7b18450dd2c4b993b95bcd680b1a057205b00 | v1.20.2 | cmd/cainjector | . | **/*_test.go |
     go.mod: -dropreplace=github.com/cert-manager/cert-manager -require=github.com/cert-manager/cert-manager@v1.20.2 | tidy'
  # (startupapicheck has no _test.go file to remove.)
  'thirdparty/cert-manager-startupapicheck | https://github.com/cert-manager/cert-manager | e5b7b18450dd2c4b993b95bcd680b1a057205b00 | v1.20.2 | cmd/startupapicheck | . | - |
     go.mod: -dropreplace=github.com/cert-manager/cert-manager -require=github.com/cert-manager/cert-manager@v1.20.2 | tidy'
  # The Go language host, 2026-08-21, against the served SDK of the Pulumi CLI the tests
  # build (tools/pulumi/go.mod: v3.274.1) instead of pulumi's own tree; without its
  # top-level tests and testdata (buildutil/ and goversion/ keep their tests). The tidied
  # go.sum is shorter than the CI machine's copy (upstream's plus what the bump added), but
  # the binary builds from the same module versions.
  'thirdparty/pulumi-language-go | https://github.com/pulumi/pulumi | 1b5949891b3cefcb9974752b24a5ecef0acc86c8 | - | sdk/go/pulumi-language-go | . | *_test.go testdata |
     go.mod: -dropreplace=github.com/pulumi/pulumi/sdk/v3 -dropreplace=github.com/pulumi/pulumi/pkg/v3
             -require=github.com/pulumi/pulumi/sdk/v3@v3.274.1 -require=github.com/pulumi/pulumi/pkg/v3@v3.274.1 | tidy'
  # The operator's chart 0.7.7 (appVersion v0.8.3), whose templates
  # internal/testkit/testenv/operatorchart.go brings to the pinned 0.7.10
  # (config.DefaultOperatorChartVersion).
  'thirdparty/kcp-operator-chart | https://github.com/kcp-dev/helm-charts | ca73c22c899bee36262ac98b82ef1fdf3d12508b | - | charts/kcp-operator | . | - | - | -'
  # kcp main, 2026-08-07, `git describe` v0.32.0-162 (hack/build-tools.sh KCP_VERSION).
  # Every other module it needs, its Kubernetes fork included, is served by the proxy.
  'thirdparty/kcp | https://github.com/kcp-dev/kcp | dac74f5955f1d4c703e87dd5cfecbc9a0a514643 | - | . | . | **/.github **/test bin contrib docs |
     go.mod: -replace=github.com/kcp-dev/embeddedetcd=../kcp-embeddedetcd | keep'
  # The embeddedetcd commit kcp's go.mod requires (v1.1.1-0.20260402110232-2cc5c5cce35e).
  'thirdparty/kcp-embeddedetcd | https://github.com/kcp-dev/embeddedetcd | 2cc5c5cce35e85b70f4d8aa35368ac713079e8d5 | - | . | . | **/*_test.go | - | -'
  # Dex v2.45.1 (hack/build-tools.sh DEX_VERSION), the hub's identity provider, without
  # its docs, examples, tests and test data. Every module it needs is served by the proxy.
  'thirdparty/dex | https://github.com/dexidp/dex | 11d2eeb52b42e1980e14cb91e69dd9e3faab2076 | v2.45.1 | . | . |
     .github docs examples **/*_test.go **/testdata | - | -'

  # --- upstream CRDs (../shared/reference/crds) -------------------------------------------
  'crds/kcp-operator | https://github.com/kcp-dev/kcp-operator | 406169b3aec30f7a28a16ef234b0f36d8b9492de | - | config/crd/bases | . | - | - | -'
  'crds/kcp-operator-deploy | https://github.com/kcp-dev/kcp-operator | 406169b3aec30f7a28a16ef234b0f36d8b9492de | - | config/crd/deploy/bases | . | - | - | -'
  # cert-manager v1.20.2's CRDs: its release asset cert-manager.crds.yaml, as kcp-operator
  # keeps it for its tests (test/crds/README.md there names the release URL).
  'crds/cert-manager | https://github.com/kcp-dev/kcp-operator | 406169b3aec30f7a28a16ef234b0f36d8b9492de | - | test/crds | cert-manager.crds.yaml | - | - | -'
  # Envoy Gateway main after v1.9.0-rc.0 (`git describe` v1.9.0-rc.0-375-gd32f282942); its
  # chart carries Gateway API v1.6.1, experimental channel. Tag v1.9.0 is another commit
  # whose clienttrafficpolicies and envoyproxies CRDs differ, so this commit is pinned.
  'crds/gateway-api | https://github.com/envoyproxy/gateway | d32f28294245e454d20f81d323d626a90e660c1e | - | charts/gateway-helm/charts/crds/crds | gatewayapi-crds.yaml | - | - | -'
  'crds/envoy-gateway | https://github.com/envoyproxy/gateway | d32f28294245e454d20f81d323d626a90e660c1e | - | charts/gateway-helm/charts/crds/crds/generated |
     gateway.envoyproxy.io_backendtrafficpolicies.yaml gateway.envoyproxy.io_clienttrafficpolicies.yaml
     gateway.envoyproxy.io_envoyproxies.yaml | - | - | -'
  'crds/gke-gateway | https://github.com/GoogleCloudPlatform/gke-gateway-api | fc40d606a5332f11a8883f85caff66b63c4e88ef | - | config/crd |
     networking.gke.io_gcpbackendpolicies.yaml networking.gke.io_healthcheckpolicies.yaml | - | - | -'
)

# Bumped when the way a row is assembled changes, so that every stamp goes stale.
FORMAT=1

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED=${1:-${RAILGRID_SHARED_DIR:-$ROOT/../shared}}
mkdir -p "$SHARED" 2>/dev/null || [[ -d $SHARED ]] || { echo "fetch-shared: cannot create $SHARED" >&2; exit 1; }
SHARED=$(cd "$SHARED" && pwd)
THIRDPARTY=${RAILGRID_THIRDPARTY_DIR:-$SHARED/thirdparty}
CRDS=${RAILGRID_CRDS_DIR:-$SHARED/reference/crds}
STATE=$SHARED/.fetch-shared

log() { printf '[fetch-shared] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fetch-shared.XXXXXX")
STAGE= # the row being assembled, removed if the script stops
cleanup() { chmod -R u+w "$WORK" ${STAGE:+"$STAGE"} 2>/dev/null; rm -rf "$WORK" ${STAGE:+"$STAGE"}; }
trap cleanup EXIT

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; s=${s%"${s##*[![:space:]]}"}; printf '%s' "$s"; }

# parse ROW: sets DEST REPO COMMIT TAG SUBDIR FILES REMOVE GOMOD GOSUM, NORM (the row on
# one line, what the stamp records) and TARGET (the destination's absolute path).
parse() {
  local row fields=() f
  row=$(tr -s '[:space:]' ' ' <<<"$1")
  IFS='|' read -ra fields <<<"$row"
  ((${#fields[@]} == 9)) || die "row has ${#fields[@]} columns, not 9: $row"
  for f in "${!fields[@]}"; do fields[f]=$(trim "${fields[f]}"); done
  DEST=${fields[0]} REPO=${fields[1]} COMMIT=${fields[2]} TAG=${fields[3]} SUBDIR=${fields[4]}
  FILES=${fields[5]} REMOVE=${fields[6]} GOMOD=${fields[7]} GOSUM=${fields[8]}
  NORM=$(IFS='|'; printf '%s' "${fields[*]}")
  [[ $COMMIT =~ ^[0-9a-f]{40}$ ]] || die "$DEST: commit '$COMMIT' is not a full SHA"
  [[ $REPO == https://* ]] || die "$DEST: repository '$REPO' is not an https URL"
  case $DEST in
    thirdparty/?*) TARGET=$THIRDPARTY/${DEST#thirdparty/} ;;
    crds/?*) TARGET=$CRDS/${DEST#crds/} ;;
    *) die "destination '$DEST' is neither thirdparty/<folder> nor crds/<folder>" ;;
  esac
  [[ ${DEST#*/} != */* && ${DEST#*/} != .* ]] || die "destination '$DEST' is not one plain folder"
  case $GOSUM in
    keep|tidy) [[ $GOMOD != - ]] || die "$DEST: go.sum '$GOSUM' without go.mod edits" ;;
    -) [[ $GOMOD == - ]] || die "$DEST: go.mod edits need go.sum keep or tidy" ;;
    *) die "$DEST: go.sum '$GOSUM' is not keep, tidy or -" ;;
  esac
}

stamp_of() { printf '%s/%s' "$STATE" "${1//\//+}"; }

# retry CMD...: three tries, for a flaky network.
retry() {
  local i
  for i in 1 2 3; do
    "$@" && return 0
    ((i < 3)) && { log "failed (try $i of 3): $*"; sleep $((i * 5)); }
  done
  return 1
}

# gitdir REPO: a scratch repository for REPO, fetched into once per commit.
gitdir() {
  local dir
  dir=$WORK/git/$(printf '%s' "$1" | sed 's|^https://||; s|[^A-Za-z0-9._-]|+|g')
  if [[ ! -d $dir ]]; then
    git -c init.defaultBranch=fetch-shared init -q "$dir"
    git -C "$dir" remote add origin "$1"
  fi
  printf '%s' "$dir"
}

# fetch_row STAGE: the row's files at its commit, into STAGE.
fetch_row() {
  local stage=$1 dir remote files=() treeish
  dir=$(gitdir "$REPO")
  if [[ $TAG != - ]]; then
    remote=$(retry git ls-remote --tags "$REPO" "refs/tags/$TAG" "refs/tags/$TAG^{}") ||
      die "$DEST: git ls-remote $REPO failed"
    # An annotated tag lists its commit on the peeled ^{} line, after the tag object.
    remote=$(awk -v t="refs/tags/$TAG" '$2 == t || $2 == t "^{}" { sha = $1 } END { print sha }' <<<"$remote")
    [[ -n $remote ]] || die "$DEST: $REPO has no tag $TAG"
    [[ $remote == "$COMMIT" ]] || die "$DEST: tag $TAG of $REPO is $remote, not the pinned $COMMIT"
  fi
  if ! git -C "$dir" cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
    retry git -C "$dir" fetch -q --depth 1 --no-tags --filter=blob:none origin "$COMMIT" ||
      die "$DEST: fetching $COMMIT from $REPO failed"
  fi
  git -C "$dir" cat-file -e "$COMMIT^{commit}" 2>/dev/null || die "$DEST: $REPO did not send commit $COMMIT"
  treeish=$COMMIT
  [[ $SUBDIR == . ]] || treeish=$COMMIT:$SUBDIR
  [[ $FILES == . ]] || read -ra files <<<"$FILES"
  # Blobs the blob-less fetch left out come in one batch, for these paths only.
  (git -C "$dir" archive --format=tar "$treeish" -- ${files[@]+"${files[@]}"} | tar -x -C "$stage") ||
    die "$DEST: git archive of $treeish ${files[*]-} failed"
}

# remove_paths STAGE: the row's removals; each must match something.
remove_paths() {
  local stage=$1 tok f matches=() toks=()
  [[ $REMOVE == - ]] && return
  read -ra toks <<<"$REMOVE"
  for tok in "${toks[@]}"; do
    matches=()
    if [[ $tok == '**/'* ]]; then
      while IFS= read -r -d '' f; do matches+=("$f"); done < <(find "$stage" -name "${tok#'**/'}" -prune -print0)
    else
      [[ $tok != /* && $tok != *..* ]] || die "$DEST: removal '$tok' leaves the folder"
      for f in "$stage"/$tok; do [[ -e $f || -L $f ]] && matches+=("$f"); done
    fi
    ((${#matches[@]} > 0)) || die "$DEST: removal '$tok' matches nothing"
    rm -rf "${matches[@]}"
    log "$DEST: removed $tok (${#matches[@]} path(s))"
  done
}

# edit_gomod STAGE: the row's go mod edit groups, then go mod tidy where go.sum says so.
edit_gomod() {
  local stage=$1 group file flags=() groups=() moddir
  [[ $GOMOD == - ]] && return
  IFS=';' read -ra groups <<<"$GOMOD"
  for group in "${groups[@]}"; do
    group=$(trim "$group")
    [[ $group == *:* ]] || die "$DEST: go.mod edit '$group' has no '<go.mod path>:'"
    file=$(trim "${group%%:*}")
    read -ra flags <<<"${group#*:}"
    [[ $(basename "$file") == go.mod ]] || die "$DEST: '$file' is not a go.mod"
    moddir=$stage/$(dirname "$file")
    [[ -f $moddir/go.mod ]] || die "$DEST: $file does not exist upstream"
    (cd "$moddir" && go mod edit "${flags[@]}") || die "$DEST: go mod edit ${flags[*]} in $file failed"
    log "$DEST: $file: go mod edit ${flags[*]}"
    if [[ $GOSUM == tidy ]]; then
      # The modules come from the Go module proxy (GOPROXY), checked against the checksum
      # database; an edited requirement pulls newer versions of some dependencies.
      (cd "$moddir" && GOFLAGS=-mod=mod go mod tidy) || die "$DEST: go mod tidy in $file failed"
      log "$DEST: $file: go mod tidy (go.sum tidied with the Go module proxy)"
    fi
  done
}

# check_replaces: every go.mod the table edits points its local replace lines at a
# folder holding a go.mod, once all rows are in place.
check_replaces() {
  local row group file moddir flag path groups=() flags=()
  for row in "${SOURCES[@]}"; do
    parse "$row"
    [[ $GOMOD == - ]] && continue
    IFS=';' read -ra groups <<<"$GOMOD"
    for group in "${groups[@]}"; do
      file=$(trim "${group%%:*}")
      read -ra flags <<<"${group#*:}"
      moddir=$TARGET/$(dirname "$file")
      for flag in "${flags[@]}"; do
        [[ $flag == -replace=*=.* ]] || continue
        path=${flag#-replace=*=}
        [[ -f $moddir/$path/go.mod ]] || die "$DEST/$file: replace target $path has no go.mod"
      done
    done
  done
}

command -v git >/dev/null || die "git is not on PATH"
command -v go >/dev/null || die "go is not on PATH (the go.mod edits and go mod tidy need it)"

# First, without touching anything: every row parses, no destination repeats, and none
# exists without this script's stamp.
seen=" "
for row in "${SOURCES[@]}"; do
  parse "$row"
  [[ $seen != *" $DEST "* ]] || die "destination $DEST is listed twice"
  seen+="$DEST "
  if [[ -e $TARGET && ! -f $(stamp_of "$DEST") ]]; then
    die "$TARGET exists but was not made by this script (no stamp in $STATE): remove it, or point RAILGRID_SHARED_DIR elsewhere"
  fi
done

# The folders written into may be read-only from an earlier run: unlocked here, locked
# again at the end (unless RAILGRID_SHARED_WRITABLE=1).
unlocked=()
for d in "$SHARED" "$SHARED/reference" "$THIRDPARTY" "$CRDS" "$STATE"; do
  if [[ -d $d && ! -w $d ]]; then
    chmod u+w "$d"
    unlocked+=("$d")
  fi
done
mkdir -p "$THIRDPARTY" "$CRDS" "$STATE"

fetched=0 kept=0 summary=()
for row in "${SOURCES[@]}"; do
  parse "$row"
  stamp=$(stamp_of "$DEST")
  want="$FORMAT|$NORM"
  pin=${COMMIT:0:12}
  [[ $TAG == - ]] || pin+=" ($TAG)"
  src=${REPO#https://github.com/}
  [[ $SUBDIR == . ]] || src+=" $SUBDIR"
  if [[ -d $TARGET && -f $stamp && $(<"$stamp") == "$want" ]]; then
    summary+=("$(printf '%-36s %-10s <- %s @ %s' "$DEST" "up to date" "$src" "$pin")")
    kept=$((kept + 1))
    continue
  fi
  start=$SECONDS
  log "$DEST: fetching $src @ $pin"
  STAGE=$(mktemp -d "$(dirname "$TARGET")/.fetch-shared.XXXXXX")
  fetch_row "$STAGE"
  remove_paths "$STAGE"
  edit_gomod "$STAGE"
  nfiles=$(find "$STAGE" -type f | wc -l)
  ((nfiles > 0)) || die "$DEST: no files"
  # Swapped in whole: the stamp goes first and comes back last, so a run stopped in
  # between fetches the row again.
  rm -f "$stamp"
  if [[ -e $TARGET ]]; then
    chmod -R u+w "$TARGET"
    rm -rf "$TARGET"
  fi
  chmod 755 "$STAGE"
  mv "$STAGE" "$TARGET"
  STAGE=
  printf '%s\n' "$want" >"$stamp"
  log "$DEST: $nfiles files in $((SECONDS - start))s -> $TARGET"
  summary+=("$(printf '%-36s %-10s <- %s @ %s' "$DEST" "fetched" "$src" "$pin")")
  fetched=$((fetched + 1))
done

check_replaces

if [[ ${RAILGRID_SHARED_WRITABLE:-} != 1 ]]; then
  for row in "${SOURCES[@]}"; do
    parse "$row"
    chmod -R a-w "$TARGET"
  done
  chmod a-w "$STATE"/* "$STATE" "$THIRDPARTY" "$CRDS" ${unlocked[@]+"${unlocked[@]}"}
  [[ $CRDS != "$SHARED/reference/crds" ]] || chmod a-w "$SHARED/reference"
fi

printf '%s\n' "${summary[@]}"
printf 'fetch-shared: %d fetched, %d up to date; thirdparty: %s, crds: %s\n' "$fetched" "$kept" "$THIRDPARTY" "$CRDS"
