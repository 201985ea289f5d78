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
#   hack/whereabouts.sh control-loop-start NODE
#                                Whereabouts' ip-control-loop (its stale-allocation reconciler,
#                                every minute, and its pod controller for NODE) against the
#                                local control plane; root only (see start_control_loop)
#   hack/whereabouts.sh control-loop-stop
set -euo pipefail

WHEREABOUTS_VERSION=${WHEREABOUTS_VERSION:-v0.9.2}
CNI_PLUGINS_VERSION=${CNI_PLUGINS_VERSION:-v1.9.1}
CACHE=${GPU_PORTAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-portal}
WB_BIN=$CACHE/bin/whereabouts-$WHEREABOUTS_VERSION
CNI_BIN=$CACHE/bin/cni-$WHEREABOUTS_VERSION-plugins-$CNI_PLUGINS_VERSION

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/pids.sh
source "$ROOT/hack/pids.sh"
STATE=${GPU_PORTAL_STATE:-$ROOT/.local/controlplane}
APISERVER_PORT=${APISERVER_PORT:-16443}
LOOP=$STATE/whereabouts-control-loop

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
  exec 9>&-  # not held by what this script starts next (ip-control-loop)
  log "build phase took $(($(now) - t0))s (plugins in $CNI_BIN)"
}

# -- ip-control-loop ------------------------------------------------------------------------------

write_loop_root() {  # the files ip-control-loop reads at fixed in-cluster paths
  local root=$LOOP/root ca
  mkdir -p "$root"/{bin,lib,lib64,usr,etc,dev,proc,tmp} "$root/sa" "$root/cron-schedule" \
    "$root/var/run/secrets/kubernetes.io/serviceaccount" "$root/host/etc/cni/net.d/whereabouts.d"
  cp "$STATE/certs/token" "$root/sa/token"
  cp "$STATE/certs/apiserver.crt" "$root/sa/ca.crt"
  printf 'kube-system' >"$root/sa/namespace"
  echo '* * * * *' >"$root/cron-schedule/config"  # its reconciler, every minute
  cp "$WB_BIN/ip-control-loop" "$root/ip-control-loop"
  ca=$(base64 -w0 "$STATE/certs/apiserver.crt")
  cat >"$root/host/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:$APISERVER_PORT", certificate-authority-data: "$ca"}}]
users: [{name: admin, user: {token: "$(cat "$STATE/certs/token")"}}]
contexts: [{name: local, context: {cluster: local, user: admin}}]
current-context: local
KC
  # Its pod controller reads this under /host, and the kubeconfig path inside it under /host too.
  printf '{"datastore": "kubernetes", "kubernetes": {"kubeconfig": "/kubeconfig"}}' \
    >"$root/host/etc/cni/net.d/whereabouts.d/whereabouts.conf"
}

start_control_loop() {
  # ip-control-loop only runs in a pod: it takes rest.InClusterConfig() (a service account token
  # and CA under /var/run/secrets/...), its cron schedule from /cron-schedule/config and the
  # Whereabouts config from /host/etc/cni/... . A private mount namespace and a chroot give it
  # those paths without touching the machine's own.
  local node=${1:?usage: control-loop-start NODE}
  [[ $(id -u) == 0 ]] || { log "ip-control-loop needs root (mount namespace and chroot)"; exit 1; }
  if ours "$LOOP/pid" ip-control-loop; then return; fi
  cmd_build
  write_loop_root
  # unshare and chroot exec in place: the recorded pid is ip-control-loop's own.
  NODENAME=$node KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$APISERVER_PORT \
    nohup unshare -m --propagation private bash -c '
      for d in bin lib lib64 usr etc dev proc tmp; do
        [[ -e /$d ]] && mount --rbind "/$d" "$0/$d"
      done
      mount --bind "$0/sa" "$0/var/run/secrets/kubernetes.io/serviceaccount"
      exec chroot "$0" /ip-control-loop -log-level "${1:-verbose}"' \
    "$LOOP/root" "${WHEREABOUTS_LOG_LEVEL:-verbose}" >"$LOOP/ip-control-loop.log" 2>&1 &
  echo $! >"$LOOP/pid"
  log "ip-control-loop started (pid $!, log $LOOP/ip-control-loop.log)"
}

stop_control_loop() {
  if stop_ours "$LOOP/pid" ip-control-loop; then log "stopped ip-control-loop"; fi
}

case ${1:-} in
  build) cmd_build ;;
  cni-path) echo "$CNI_BIN" ;;
  bin) echo "$WB_BIN" ;;
  control-loop-start) shift; start_control_loop "$@" ;;
  control-loop-stop) stop_control_loop ;;
  *) echo "usage: $0 build|cni-path|bin|control-loop-start NODE|control-loop-stop" >&2; exit 2 ;;
esac
