#!/usr/bin/env bash
# Lints the GitHub Actions workflows with actionlint, installing it first (go install at
# a pinned version) into a cache directory when it is missing. When shellcheck is on
# PATH, actionlint also checks the `run:` scripts with it.
#
# Usage: hack/lint-workflows.sh [actionlint flags]
# Environment: RAILGRID_ACTIONLINT_BIN overrides the install directory
#              (default ${XDG_CACHE_HOME:-$HOME/.cache}/railgrid-kcp/bin).
set -euo pipefail

ACTIONLINT_VERSION=v1.7.12
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${RAILGRID_ACTIONLINT_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/railgrid-kcp/bin}
ACTIONLINT=$BIN/actionlint

installed_version() {
  "$ACTIONLINT" -version 2>/dev/null | head -n 1
}

if [[ ! -x $ACTIONLINT || $(installed_version) != "$ACTIONLINT_VERSION" ]]; then
  command -v go >/dev/null || { echo "lint-workflows: go is not on PATH" >&2; exit 1; }
  echo "lint-workflows: installing actionlint $ACTIONLINT_VERSION into $BIN" >&2
  mkdir -p "$BIN"
  GOBIN=$BIN CGO_ENABLED=0 go install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
fi

cd "$ROOT"
shopt -s nullglob
workflows=(.github/workflows/*.yml)
if ((${#workflows[@]} == 0)); then
  echo "lint-workflows: no workflows in .github/workflows" >&2
  exit 1
fi
if ! command -v shellcheck >/dev/null; then
  echo "lint-workflows: shellcheck not found; run: scripts are not checked" >&2
fi
"$ACTIONLINT" "$@" "${workflows[@]}"
echo "lint-workflows: ${#workflows[@]} workflow(s) clean" >&2
