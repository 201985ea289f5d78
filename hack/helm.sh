#!/usr/bin/env bash
# Helm, built from its Go module at a pinned version through the Go module proxy (no prebuilt
# download), cached by version beside the control plane's binaries.
#
#   hack/helm.sh build     build (or reuse) the binary and print its path
#   hack/helm.sh path      print the binary's path (fails when it is not built)
#   hack/helm.sh ARGS...   run helm with ARGS
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v4.3.2}
CACHE=${GPU_PORTAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-portal}
HELM=$CACHE/bin/helm-$HELM_VERSION/helm
log() { printf '[helm] %s\n' "$*" >&2; }

build() {
  [[ -x $HELM ]] && return
  local t0 dir=$CACHE/build/helm-$HELM_VERSION
  t0=$(date +%s)
  # One build at a time: `make test` builds Helm in the background while the tests that do not
  # need it run, and a test that needs it waits here for that build.
  mkdir -p "$CACHE/build"
  exec 9>"$CACHE/build/helm-$HELM_VERSION.lock"
  flock 9
  [[ -x $HELM ]] && { exec 9>&-; return; }  # built meanwhile
  log "building helm $HELM_VERSION from its Go module (first time only)"
  mkdir -p "$dir" "$(dirname "$HELM")"
  # A throwaway wrapper module requiring Helm, so the build resolves Helm's own go.mod.
  printf 'module gpuportal.invalid/build\n\ngo 1.26\n\nrequire helm.sh/helm/v4 %s\n' "$HELM_VERSION" >"$dir/go.mod"
  : >"$dir/go.sum"
  (cd "$dir" && GOFLAGS=-mod=mod go build -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    -o "$HELM.tmp" helm.sh/helm/v4/cmd/helm)
  mv "$HELM.tmp" "$HELM"
  exec 9>&-
  log "helm $HELM_VERSION built in $(($(date +%s) - t0))s"
}

case ${1:-} in
  build) build; echo "$HELM" ;;
  path) [[ -x $HELM ]] && echo "$HELM" ;;
  *) build; exec "$HELM" "$@" ;;
esac
