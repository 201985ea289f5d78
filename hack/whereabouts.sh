#!/usr/bin/env bash
# Whereabouts (IPAM plugin and its ip-control-loop) and the reference `static` IPAM plugin, built
# from their Go modules through the Go module proxy and cached by version outside the repo, like
# hack/controlplane.sh. The test bed's CNI runner (hack/cni/runner.py) calls these binaries the way
# a container runtime and Multus would; the Whereabouts CRDs of the same version are installed by
# hack/controlplane.sh start.
#
#   hack/whereabouts.sh build    build (or reuse) whereabouts, ip-control-loop and static
#   hack/whereabouts.sh cni-path print the directory holding the plugin binaries (CNI_PATH)
#   hack/whereabouts.sh bin      print the directory holding ip-control-loop
set -euo pipefail

WHEREABOUTS_VERSION=${WHEREABOUTS_VERSION:-v0.9.2}
CNI_PLUGINS_VERSION=${CNI_PLUGINS_VERSION:-v1.9.1}
CACHE=${GPU_PORTAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-portal}
WB_BIN=$CACHE/bin/whereabouts-$WHEREABOUTS_VERSION
CNI_BIN=$CACHE/bin/cni-$WHEREABOUTS_VERSION-plugins-$CNI_PLUGINS_VERSION

log() { printf '[whereabouts] %s\n' "$*" >&2; }
now() { date +%s; }

write_wrapper() {  # dir module version: a throwaway module requiring one upstream module
  mkdir -p "$1"
  printf 'module gpuportal.invalid/build\n\ngo 1.26\n\nrequire %s %s\n' "$2" "$3" >"$1/go.mod"
  : >"$1/go.sum"
}

go_build() {  # wrapper-dir output package
  (cd "$1" && GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$2.tmp" "$3")
  mv "$2.tmp" "$2"
}

build_whereabouts() {
  local dir=$CACHE/build/whereabouts-$WHEREABOUTS_VERSION t
  write_wrapper "$dir" github.com/k8snetworkplumbingwg/whereabouts "$WHEREABOUTS_VERSION"
  # Whereabouts' own go.mod carries this replace; a wrapper module must repeat it.
  printf 'replace github.com/gogo/protobuf => github.com/gogo/protobuf v1.3.2\n' >>"$dir/go.mod"
  if [[ ! -x $WB_BIN/whereabouts ]]; then
    t=$(now)
    go_build "$dir" "$WB_BIN/whereabouts" github.com/k8snetworkplumbingwg/whereabouts/cmd
    log "whereabouts built in $(($(now) - t))s"
  fi
  if [[ ! -x $WB_BIN/ip-control-loop ]]; then
    t=$(now)
    go_build "$dir" "$WB_BIN/ip-control-loop" github.com/k8snetworkplumbingwg/whereabouts/cmd/controlloop
    log "ip-control-loop built in $(($(now) - t))s"
  fi
}

build_static() {
  [[ -x $CNI_BIN/static ]] && return
  local dir=$CACHE/build/cni-plugins-$CNI_PLUGINS_VERSION t; t=$(now)
  write_wrapper "$dir" github.com/containernetworking/plugins "$CNI_PLUGINS_VERSION"
  go_build "$dir" "$CNI_BIN/static" github.com/containernetworking/plugins/plugins/ipam/static
  log "static built in $(($(now) - t))s"
}

cmd_build() {
  mkdir -p "$WB_BIN" "$CNI_BIN"
  local t0; t0=$(now)
  # One build at a time (a test fixture and `make test` setup may both ask for it).
  exec 9>"$CACHE/bin/.whereabouts-build.lock"
  flock 9
  build_whereabouts
  build_static
  # One CNI_PATH directory holds every IPAM plugin a NAD may name.
  ln -sf "$WB_BIN/whereabouts" "$CNI_BIN/whereabouts"
  log "build phase took $(($(now) - t0))s (plugins in $CNI_BIN)"
}

case ${1:-} in
  build) cmd_build ;;
  cni-path) echo "$CNI_BIN" ;;
  bin) echo "$WB_BIN" ;;
  *) echo "usage: $0 build|cni-path|bin" >&2; exit 2 ;;
esac
