#!/usr/bin/env bash
# A local Kubernetes cluster for development and tests: etcd, kube-apiserver and
# kube-controller-manager built from source through the Go module proxy (cached by version outside
# the repo), the upstream CRDs the portal uses from their Go modules at pinned versions, the
# endpoint router (hack/router.sh), and the real Volcano scheduler, controllers and admission
# webhooks with KWOK simulated GPU nodes and a volume provisioner (hack/volcano.sh).
#
#   hack/controlplane.sh build    build (or reuse) the binaries and fetch the CRDs
#   hack/controlplane.sh start    start it all, install CRDs, write the kubeconfig, seed 8 H100
#                                 nodes (two-tier HyperNode tree), 2 A100 nodes, 2 CPU nodes
#   hack/controlplane.sh stop     stop it all
#   hack/controlplane.sh status   exit 0 when the API server answers
#   hack/controlplane.sh env      print the export line for KUBECONFIG
#
# When KUBECONFIG points at a reachable cluster (kind, a real one), start only installs the CRDs
# and objects the portal needs there and builds nothing. With LATE_BUILDS=1 (`make test`), build
# and start leave out the router and the Whereabouts plugins until they are built: hack/test.sh
# builds them in the background, and the tests that need one run last and wait for it.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
NAD_VERSION=${NAD_VERSION:-v1.7.7}
WHEREABOUTS_VERSION=${WHEREABOUTS_VERSION:-v0.9.2}
CACHE=${GPU_PORTAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-portal}
BIN=$CACHE/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION
STATE=${GPU_PORTAL_STATE:-$ROOT/.local/controlplane}
ETCD_PORT=${ETCD_PORT:-23790}
APISERVER_PORT=${APISERVER_PORT:-16443}
LOCAL_KUBECONFIG=$STATE/kubeconfig

log() { printf '[controlplane] %s\n' "$*" >&2; }
now() { date +%s; }

go_module_dir() {  # module@version -> its extracted directory in the module cache
  go mod download -json "$1" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error")))'
}

write_wrapper() {  # dir module version: a throwaway module requiring one upstream module
  mkdir -p "$1"
  printf 'module gpuportal.invalid/build\n\ngo 1.26\n\nrequire %s %s\n' "$2" "$3" >"$1/go.mod"
  : >"$1/go.sum"
}

build_kube() {  # kube-apiserver and kube-controller-manager from one wrapper module
  local dir=$CACHE/build/kube-apiserver-$K8S_VERSION staging=v0.${K8S_VERSION#v1.}
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  write_wrapper "$dir" k8s.io/kubernetes "$K8S_VERSION"
  # Upstream's go.mod points every staging module at ./staging, which the module zip lacks;
  # map each to its published v0.<minor>.<patch> instead.
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$gomod" | awk '{print $1}' | sort -u | while read -r m; do
    printf 'replace %s => %s %s\n' "$m" "$m" "$staging" >>"$dir/go.mod"
  done
  local pkg=k8s.io/component-base/version
  local ldflags="-s -w -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  local cmd missing=() out=$BIN/.building
  for cmd in kube-apiserver kube-controller-manager; do
    [[ -x $BIN/$cmd ]] || missing+=("k8s.io/kubernetes/cmd/$cmd")
  done
  ((${#missing[@]})) || return 0
  # One `go build` for both: one links while the other still compiles.
  rm -rf "$out" && mkdir -p "$out"
  (cd "$dir" && GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$out/" "${missing[@]}")
  mv "$out"/* "$BIN/" && rmdir "$out"
}

build_etcd() {
  local dir=$CACHE/build/etcd-$ETCD_VERSION
  write_wrapper "$dir" go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
  (cd "$dir" && GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$BIN/etcd.tmp" "$BIN/etcd"
}

crd_files() {  # the upstream CRD YAMLs, from their Go modules at pinned versions
  local nad wb
  nad=$(go_module_dir "github.com/k8snetworkplumbingwg/network-attachment-definition-client@$NAD_VERSION")/artifacts
  wb=$(go_module_dir "github.com/k8snetworkplumbingwg/whereabouts@$WHEREABOUTS_VERSION")/doc/crds
  printf '%s\n' \
    "$nad/networks-crd.yaml" \
    "$wb/whereabouts.cni.cncf.io_ippools.yaml" "$wb/whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml"
  bash "$ROOT/hack/volcano.sh" crds  # all nine of the Volcano version hack/volcano.sh runs
  bash "$ROOT/hack/router.sh" crds  # Traefik's and Gateway API's, at the router's versions
}

cmd_build() {
  mkdir -p "$BIN"
  local t0 pids=() pid failed=0; t0=$(now)
  # The cache is every checkout's: one build at a time (two at once removed each other's
  # output, or left a binary half written that counted as built).
  exec 8>"$BIN/.build.lock"
  flock 8
  if [[ -x $BIN/etcd && -x $BIN/kube-apiserver && -x $BIN/kube-controller-manager ]]; then
    log "binaries cached in $BIN"
  else
    log "building etcd $ETCD_VERSION and kube-apiserver $K8S_VERSION from source (first time only)"
    # At once with each other and with Volcano's: on a new machine one downloads its modules
    # or links (mostly on one core) while another compiles.
    { [[ -x $BIN/etcd ]] || build_etcd; log "etcd built after $(($(now) - t0))s"; } &
    pids+=($!)
    { build_kube; log "Kubernetes binaries built after $(($(now) - t0))s"; } &
    pids+=($!)
  fi
  bash "$ROOT/hack/volcano.sh" build &
  pids+=($!)
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  exec 8>&-  # not held by the daemons started next
  ((failed == 0)) || { log "a build failed (its error is above)"; exit 1; }
  if [[ -z ${LATE_BUILDS:-} ]]; then
    bash "$ROOT/hack/router.sh" build
    # The IPAM plugins the test bed's CNI runner calls, of the version whose CRDs are installed.
    WHEREABOUTS_VERSION=$WHEREABOUTS_VERSION bash "$ROOT/hack/whereabouts.sh" build
  fi
  crd_files >/dev/null
  log "build phase took $(($(now) - t0))s"
}

write_certs() {
  mkdir -p "$STATE/certs"
  local c=$STATE/certs
  [[ -f $c/sa.key ]] || openssl genrsa -out "$c/sa.key" 2048 2>/dev/null
  [[ -f $c/sa.pub ]] || openssl rsa -in "$c/sa.key" -pubout -out "$c/sa.pub" 2>/dev/null
  [[ -f $c/token ]] || python3 -c 'import secrets; print(secrets.token_urlsafe(32))' >"$c/token"
  printf '%s,admin,admin,"system:masters"\n' "$(cat "$c/token")" >"$c/tokens.csv"
}

write_kubeconfig() {
  cat >"$LOCAL_KUBECONFIG" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $STATE/certs/apiserver.crt
users:
- name: admin
  user:
    token: $(cat "$STATE/certs/token")
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
KC
  chmod 600 "$LOCAL_KUBECONFIG"
}

# shellcheck source=hack/pids.sh
source "$ROOT/hack/pids.sh"
running() { ours "$STATE/$1.pid" "$1"; }

# start and stop take turns: a start while a stop runs (`make run` right after `make stop`, or
# beside it) would find the API server going away and fail, and a stop's cleanup would remove
# the files of what that start began.
take_turn() {
  mkdir -p "$STATE"
  command -v flock >/dev/null || return 0  # no flock (macOS): no turns
  exec 9>"$STATE/.turn"  # the processes started after this must not hold it: each closes it
  if ! flock -n 9; then
    log "waiting for another start or stop of this control plane to finish"
    flock -w 300 9 || { log "another start or stop still runs after 300s"; return 1; }
  fi
}

start_etcd() {
  running etcd && return
  mkdir -p "$STATE/etcd"
  nohup "$BIN/etcd" --name portal --data-dir "$STATE/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
    --initial-cluster "portal=http://127.0.0.1:$((ETCD_PORT + 10))" \
    --log-level warn >"$STATE/etcd.log" 2>&1 9>&- &
  echo $! >"$STATE/etcd.pid"
}

start_apiserver() {
  running kube-apiserver && return
  local c=$STATE/certs
  nohup "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" --cert-dir "$c" \
    --secure-port "$APISERVER_PORT" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
    --service-cluster-ip-range 10.0.0.0/24 --authorization-mode RBAC --allow-privileged=true \
    --disable-admission-plugins ServiceAccount --token-auth-file "$c/tokens.csv" \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$c/sa.pub" \
    --service-account-signing-key-file "$c/sa.key" --enable-priority-and-fairness=false \
    --endpoint-reconciler-type none \
    --v 0 >"$STATE/kube-apiserver.log" 2>&1 9>&- &
  echo $! >"$STATE/kube-apiserver.pid"
}

start_controller_manager() {
  # Only the controllers that make the API behave as on a cluster: namespace deletion, garbage
  # collection of owned objects, ResourceQuota usage, service accounts. No node lifecycle
  # controller: simulated nodes have no kubelet and must not be tainted unreachable. Its client
  # may send 200 requests a second, as clusters that run many jobs set it: at the default 20,
  # binding a claim (four writes) waited for the rate limiter, and a backlog of jobs drained
  # at the pace the test bed bound claims (4 a second), not at Volcano's.
  running kube-controller-manager && return
  nohup "$BIN/kube-controller-manager" --kubeconfig "$LOCAL_KUBECONFIG" \
    --bind-address 127.0.0.1 --secure-port "$((APISERVER_PORT + 1))" --leader-elect=false \
    --controllers namespace-controller,garbage-collector-controller,resourcequota-controller,serviceaccount-controller,persistentvolumeclaim-protection-controller,persistentvolume-binder-controller,persistentvolume-protection-controller \
    --service-account-private-key-file "$STATE/certs/sa.key" --use-service-account-credentials=false \
    --concurrent-gc-syncs 5 --resource-quota-sync-period 10s \
    --kube-api-qps 200 --kube-api-burst 400 \
    >"$STATE/kube-controller-manager.log" 2>&1 9>&- &
  echo $! >"$STATE/kube-controller-manager.pid"
}

kubectl_py() {  # apply the CRDs and cluster objects through the project's own adapter
  local py=python3; [[ -x $ROOT/.venv/bin/python ]] && py=$ROOT/.venv/bin/python
  "${PYTHON:-$py}" "$ROOT/hack/install_cluster_objects.py" "$@"
}

wait_ready() {
  local deadline=$(($(now) + ${1:-60}))
  until curl -skf --max-time 5 -H "Authorization: Bearer $(cat "$STATE/certs/token")" \
    "https://127.0.0.1:$APISERVER_PORT/readyz" >/dev/null 2>&1; do
    if ! running kube-apiserver || (($(now) > deadline)); then
      log "API server not ready; last log lines:"; tail -20 "$STATE/kube-apiserver.log" >&2; return 1
    fi
    sleep 0.3
  done
}

external_cluster() { [[ -n ${KUBECONFIG:-} && $KUBECONFIG != "$LOCAL_KUBECONFIG" ]]; }

cmd_start() {
  local t0; t0=$(now)
  if external_cluster; then
    log "KUBECONFIG=$KUBECONFIG is set: using that cluster, building nothing"
    kubectl_py --kubeconfig "$KUBECONFIG" $(crd_files)
    return
  fi
  cmd_build
  take_turn
  local t1; t1=$(now)
  write_certs
  start_etcd
  start_apiserver
  if ! wait_ready 90; then
    running kube-apiserver && return 1
    # One stopped by other means (a kill, a stop without turns) while this start found it
    # still running: start it again, once.
    log "the API server went away; starting it again"
    start_etcd
    start_apiserver
    wait_ready 90
  fi
  log "API server ready after $(($(now) - t1))s"
  write_kubeconfig
  start_controller_manager
  # Every CRD at once, KWOK's too (the router and Volcano scripts skip theirs: CRDS_INSTALLED).
  kubectl_py --kubeconfig "$LOCAL_KUBECONFIG" $(crd_files) $(bash "$ROOT/hack/volcano.sh" kwok-crds)
  log "CRDs installed after $(($(now) - t1))s"
  # The endpoint router (Traefik), watching this API server like an ingress controller would;
  # beside it (they share nothing) the real Volcano and KWOK simulated GPU nodes: jobs are
  # scheduled and their pods run.
  local router=""
  if [[ -z ${LATE_BUILDS:-} ]] || bash "$ROOT/hack/router.sh" built; then
    KUBECONFIG=$LOCAL_KUBECONFIG ROUTER_STATE=$STATE CRDS_INSTALLED=1 bash "$ROOT/hack/router.sh" start 9>&- &
    router=$!
  else
    log "the router is not built yet: the tests that need it start it once it is"
  fi
  local t2; t2=$(now)
  KUBECONFIG=$LOCAL_KUBECONFIG GPU_PORTAL_STATE=$STATE CRDS_INSTALLED=1 bash "$ROOT/hack/volcano.sh" start 9>&-
  seed_nodes
  log "Volcano and simulated GPU nodes ready in $(($(now) - t2))s"
  [[ -z $router ]] || wait "$router" || { log "the router did not start (see above)"; return 1; }
  log "control plane ready in $(($(now) - t1))s (total $(($(now) - t0))s); KUBECONFIG=$LOCAL_KUBECONFIG"
}

seed_nodes() {  # two GPU products; the H100s under a two-tier HyperNode tree
  # The three groups at once: they share no object.
  local v=(env KUBECONFIG="$LOCAL_KUBECONFIG" GPU_PORTAL_STATE="$STATE" bash "$ROOT/hack/volcano.sh" seed)
  "${v[@]}" --nodes "${SIM_H100_NODES:-8}" --gpus 8 --leaves 4 --spines 2 & local h100=$!
  "${v[@]}" --nodes 2 --gpus 8 --product NVIDIA-A100-SXM4-80GB --prefix kwok-a100- --leaves 1 --spines 1 &
  local a100=$!
  # CPU nodes without the GPU taint, for pods that ask for no GPU (up to 110 pods each)
  "${v[@]}" --nodes 2 --gpus 0 --prefix kwok-cpu- --leaves 1 --spines 1 & local cpu=$!
  local failed=0
  for pid in $h100 $a100 $cpu; do wait "$pid" || failed=1; done
  ((failed == 0)) || { log "seeding simulated nodes failed (see above)"; return 1; }
}

cmd_stop() {
  take_turn
  if [[ -f $LOCAL_KUBECONFIG ]]; then
    KUBECONFIG=$LOCAL_KUBECONFIG GPU_PORTAL_STATE=$STATE bash "$ROOT/hack/volcano.sh" stop
  fi
  ROUTER_STATE=$STATE bash "$ROOT/hack/router.sh" stop
  for p in kube-controller-manager kube-apiserver etcd; do
    if stop_ours "$STATE/$p.pid" "$p"; then log "stopped $p"; fi
  done
}

case ${1:-} in
  build) cmd_build ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) running kube-apiserver && wait_ready 2 ;;
  env) echo "export KUBECONFIG=$LOCAL_KUBECONFIG" ;;
  crds) crd_files ;;
  *) echo "usage: $0 build|start|stop|status|env|crds" >&2; exit 2 ;;
esac
