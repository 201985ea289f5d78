#!/usr/bin/env bash
# Real Volcano (scheduler, controller manager, admission webhook) and KWOK (simulated GPU nodes
# that run bound pods) in front of a local API server, built from source through the Go module
# proxy and cached by version outside the repo, like hack/controlplane.sh.
#
#   hack/volcano.sh build    build (or reuse) vc-scheduler, vc-controller-manager,
#                            vc-webhook-manager and kwok
#   hack/volcano.sh crds     print the paths of Volcano's nine CRDs of the version built
#   hack/volcano.sh start    install the CRDs, webhook configurations, start the four processes
#                            and the test bed's volume provisioner (hack/volcano/provisioner.py)
#   hack/volcano.sh seed     create simulated GPU nodes and a two-tier HyperNode tree
#                            (--nodes 8 --gpus 8 --leaves 4 --spines 2 --product ...; after start)
#   hack/volcano.sh restart-scheduler
#                            restart the scheduler alone, a session every VC_SCHEDULE_PERIOD
#   hack/volcano.sh stop     stop what start started (by recorded pid)
#   hack/volcano.sh status   exit 0 when every process runs and its health endpoint answers
#
# start needs KUBECONFIG (an admin kubeconfig of the API server; the local one from
# hack/controlplane.sh by default). State (pids, logs, certificates, rendered configs) goes under
# $GPU_PORTAL_STATE/volcano and $GPU_PORTAL_STATE/volcano-certs, next to the control plane's.
#
# Simulated pods (hack/volcano/kwok.yaml): a pod bound to a seeded node runs; when its command
# names `exit N` (e.g. sh -c "sleep 5; exit 3") it ends Succeeded (N = 0) or Failed (exit code N)
# after the `sleep S` it names (default 1 s); any other command runs until the pod is deleted. pods/log serves
# $GPU_PORTAL_STATE/volcano/pod-logs/default.log, or the CRI-format file a kwok.x-k8s.io/v1alpha1
# Logs object (named and namespaced like the pod) points at.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERE=$ROOT/hack/volcano
# v1.15.0 cannot be built from its module (its go.mod points volcano.sh/apis at ./staging, absent
# from the zip, and volcano.sh/apis@v1.15.0 is not published); v1.14.1 can.
VOLCANO_VERSION=${VOLCANO_VERSION:-v1.14.1}
VOLCANO_APIS_VERSION=${VOLCANO_APIS_VERSION:-v1.14.0}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
CACHE=${GPU_PORTAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-portal}
VC_BIN=$CACHE/bin/volcano-$VOLCANO_VERSION
KWOK_BIN=$CACHE/bin/kwok-$KWOK_VERSION
STATE=${GPU_PORTAL_STATE:-$ROOT/.local/controlplane}
RUN=$STATE/volcano
CERTS=$STATE/volcano-certs
export KUBECONFIG=${KUBECONFIG:-$STATE/kubeconfig}

# Every listen and health port explicitly, on loopback: Volcano's defaults (:8080, :8081, :11251,
# :8443, on all interfaces) collide with common local services.
VC_WEBHOOK_PORT=${VC_WEBHOOK_PORT:-19443}
VC_WEBHOOK_HEALTHZ_PORT=${VC_WEBHOOK_HEALTHZ_PORT:-19444}
VC_CONTROLLER_METRICS_PORT=${VC_CONTROLLER_METRICS_PORT:-19445}
VC_CONTROLLER_HEALTHZ_PORT=${VC_CONTROLLER_HEALTHZ_PORT:-19446}
VC_SCHEDULER_METRICS_PORT=${VC_SCHEDULER_METRICS_PORT:-19447}
VC_SCHEDULER_HEALTHZ_PORT=${VC_SCHEDULER_HEALTHZ_PORT:-19448}
KWOK_PORT=${KWOK_PORT:-19449}
KWOK_NODE_LEASE_SECONDS=${KWOK_NODE_LEASE_SECONDS:-40}
VC_CONTROLLERS=${VC_CONTROLLERS:-job-controller,pg-controller,queue-controller,gc-controller}
VC_SCHEDULE_PERIOD=${VC_SCHEDULE_PERIOD:-200ms}
VC_SCHEDULER_CONF=${VC_SCHEDULER_CONF:-$HERE/scheduler.conf}

# The admission paths vc-webhook-manager serves here: jobs and queues (mutate + validate) and
# podgroups (validate). Pods are left alone: the portal does not need Volcano's pod hooks.
DEFAULT_ADMISSION=/jobs/mutate,/jobs/validate,/queues/mutate,/queues/validate,/podgroups/validate
ADMISSION_PATHS=${VC_ADMISSION_PATHS:-$DEFAULT_ADMISSION}

log() { printf '[volcano] %s\n' "$*" >&2; }
now() { date +%s; }

python_bin() {
  if [[ -n ${PYTHON:-} ]]; then echo "$PYTHON"
  elif [[ -x $ROOT/.venv/bin/python ]]; then echo "$ROOT/.venv/bin/python"
  else echo python3; fi
}

go_mod_field() {  # module@version field -> a field of `go mod download -json` (Dir, GoMod)
  go mod download -json "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d.get(sys.argv[1]) or sys.exit(d.get("Error") or "no " + sys.argv[1]))' "$2"
}

write_wrapper() {  # dir module version: a throwaway module requiring one upstream module
  mkdir -p "$1"
  printf 'module gpuportal.invalid/build\n\ngo 1.26\n\nrequire %s %s\n' "$2" "$3" >"$1/go.mod"
  : >"$1/go.sum"
}

volcano_replaces() {  # Volcano's own versioned replace lines, minus the ./staging one
  local gomod; gomod=$(go_mod_field "volcano.sh/volcano@$VOLCANO_VERSION" GoMod)
  python3 - "$gomod" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
lines = []
for block in re.findall(r"^replace\s*\((.*?)^\)", text, re.S | re.M):
    lines += block.splitlines()
lines += re.findall(r"^replace\s+([^(\n].*)$", text, re.M)
for line in lines:
    line = line.split("//")[0].strip()
    m = re.match(r"(\S+)(?:\s+\S+)?\s+=>\s+(\S+)\s+(\S+)$", line)
    if m:  # versioned (module => module version); local paths have no version and are skipped
        print(f"replace {m.group(1)} => {m.group(2)} {m.group(3)}")
PY
}

# binary name:package under volcano.sh/volcano/cmd
VOLCANO_CMDS=(vc-scheduler:scheduler vc-controller-manager:controller-manager
  vc-webhook-manager:webhook-manager)

volcano_built() {
  local pair
  for pair in "${VOLCANO_CMDS[@]}"; do [[ -x $VC_BIN/${pair%%:*} ]] || return 1; done
}

build_volcano() {
  volcano_built && return
  local dir=$CACHE/build/volcano-$VOLCANO_VERSION
  write_wrapper "$dir" volcano.sh/volcano "$VOLCANO_VERSION"
  volcano_replaces >>"$dir/go.mod"
  # The apiserver libraries Volcano pins pull k8s.io/kms, which its go.mod does not pin; keep it
  # on the same staging release as the rest.
  local staging; staging=$(awk '$2 == "k8s.io/api" {print $5; exit}' "$dir/go.mod")
  grep -q '^replace k8s.io/kms ' "$dir/go.mod" ||
    printf 'replace k8s.io/kms => k8s.io/kms %s\n' "$staging" >>"$dir/go.mod"
  # volcano.sh/apis lives in ./staging upstream; its published tag of the same minor stands in.
  printf 'replace volcano.sh/apis => volcano.sh/apis %s\n' "$VOLCANO_APIS_VERSION" >>"$dir/go.mod"
  # One `go build` for all three: one links while another still compiles.
  local pair pkgs=() out=$VC_BIN/.building t; t=$(now)
  for pair in "${VOLCANO_CMDS[@]}"; do pkgs+=("volcano.sh/volcano/cmd/${pair#*:}"); done
  rm -rf "$out" && mkdir -p "$out"
  (cd "$dir" && GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$out/" "${pkgs[@]}")
  for pair in "${VOLCANO_CMDS[@]}"; do mv "$out/${pair#*:}" "$VC_BIN/${pair%%:*}"; done
  rmdir "$out"
  log "${VOLCANO_CMDS[*]%%:*} built in $(($(now) - t))s"
}

build_kwok() {
  [[ -x $KWOK_BIN/kwok ]] && return
  local dir=$CACHE/build/kwok-$KWOK_VERSION t; t=$(now)
  write_wrapper "$dir" sigs.k8s.io/kwok "$KWOK_VERSION"
  (cd "$dir" && GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" \
    -o "$KWOK_BIN/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok)
  mv "$KWOK_BIN/kwok.tmp" "$KWOK_BIN/kwok"
  log "kwok built in $(($(now) - t))s"
}

crd_files() {  # all nine CRDs of the version run: the scheduler's informers wait for every one
  local dir; dir=$(go_mod_field "volcano.sh/volcano@$VOLCANO_VERSION" Dir)/config/crd/volcano/bases
  ls "$dir"/*.yaml
}

cmd_build() {
  mkdir -p "$VC_BIN" "$KWOK_BIN"
  local t0; t0=$(now)
  exec 8>"$VC_BIN/.build.lock"  # the cache is every checkout's: one build at a time
  flock 8
  # At once: one downloads its modules or links while the other compiles.
  build_volcano &
  local volcano=$!
  build_kwok
  wait "$volcano"
  exec 8>&-  # not held by the daemons started next
  crd_files >/dev/null
  log "build phase took $(($(now) - t0))s (binaries in $VC_BIN and $KWOK_BIN)"
}

# -- start / stop ---------------------------------------------------------------------------------

kwok_crd_files() {  # kwok's Logs CRD: per-pod log files are Logs objects created at run time
  echo "$(go_mod_field "sigs.k8s.io/kwok@$KWOK_VERSION" Dir)/kustomize/crd/bases/kwok.x-k8s.io_logs.yaml"
}

cluster_py() { "$(python_bin)" "$HERE/cluster.py" --kubeconfig "$KUBECONFIG" "$@"; }

# shellcheck source=hack/pids.sh
source "$ROOT/hack/pids.sh"
running() { ours "$RUN/$1.pid" "$1"; }

spawn() {  # name binary args...: start in the background, log and pid under $RUN
  local name=$1; shift
  if running "$name"; then log "$name already running (pid $(cat "$RUN/$name.pid"))"; return; fi
  nohup "$@" >"$RUN/$name.log" 2>&1 &
  echo $! >"$RUN/$name.pid"
}

wait_http() {  # name url seconds: until the endpoint answers 200, or the process died
  local deadline=$(($(now) + $3))
  until curl -skf --max-time 5 "$2" >/dev/null 2>&1; do
    if ! running "$1" || (($(now) > deadline)); then
      log "$1 not healthy at $2; last log lines:"; tail -20 "$RUN/$1.log" >&2; return 1
    fi
    sleep 0.3
  done
}

write_certs() {  # a CA and a serving certificate for 127.0.0.1, reused across starts
  local c=$CERTS
  mkdir -p "$c"
  [[ -f $c/server.crt ]] && return
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=gpu-portal-volcano-ca" \
    -keyout "$c/ca.key" -out "$c/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$c/server.key" -out "$c/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$c/server.ext"
  openssl x509 -req -in "$c/server.csr" -CA "$c/ca.crt" -CAkey "$c/ca.key" -CAcreateserial \
    -days 3650 -extfile "$c/server.ext" -out "$c/server.crt" 2>/dev/null
  chmod 600 "$c"/*.key
}

write_kwok_logs_config() {
  # Every pod on a kwok node gets this file as its log (pods/log), unless a Logs object names
  # the pod. Log files must be in the CRI format the kubelet writes.
  mkdir -p "$RUN/pod-logs"
  local default=$RUN/pod-logs/default.log
  [[ -f $default ]] || printf '%s stdout F %s\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)" \
    "simulated container on a KWOK node: no log configured for this pod" >"$default"
  cat >"$RUN/kwok-logs.yaml" <<YAML
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: gpu-portal-default
spec:
  logs:
  - logsFile: $default
    previousLogsFile: $default
    follow: true
YAML
}

start_webhook_manager() {
  spawn vc-webhook-manager "$VC_BIN/vc-webhook-manager" --kubeconfig "$KUBECONFIG" \
    --tls-cert-file "$CERTS/server.crt" --tls-private-key-file "$CERTS/server.key" \
    --ca-cert-file "$CERTS/ca.crt" --listen-address 127.0.0.1 --port "$VC_WEBHOOK_PORT" \
    --webhook-url "https://127.0.0.1:$VC_WEBHOOK_PORT" --enabled-admission "$ADMISSION_PATHS" \
    --enable-healthz --healthz-address "127.0.0.1:$VC_WEBHOOK_HEALTHZ_PORT"
}

start_controller_manager() {
  spawn vc-controller-manager "$VC_BIN/vc-controller-manager" --kubeconfig "$KUBECONFIG" \
    --leader-elect=false --controllers "$VC_CONTROLLERS" \
    --listen-address "127.0.0.1:$VC_CONTROLLER_METRICS_PORT" \
    --enable-healthz --healthz-address "127.0.0.1:$VC_CONTROLLER_HEALTHZ_PORT"
}

start_scheduler() {
  # A 200 ms scheduling period instead of 1 s: tests wait on scheduling decisions.
  spawn vc-scheduler "$VC_BIN/vc-scheduler" --kubeconfig "$KUBECONFIG" --leader-elect=false \
    --scheduler-conf "$VC_SCHEDULER_CONF" --schedule-period "$VC_SCHEDULE_PERIOD" \
    --listen-address "127.0.0.1:$VC_SCHEDULER_METRICS_PORT" \
    --enable-healthz --healthz-address "127.0.0.1:$VC_SCHEDULER_HEALTHZ_PORT"
}

start_kwok() {
  # Only nodes annotated kwok.x-k8s.io/node=fake: other simulated nodes (tests that write node
  # status themselves) are left alone. --enable-crds=Logs lets tests attach a log file to a pod.
  spawn kwok "$KWOK_BIN/kwok" --kubeconfig "$KUBECONFIG" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --node-ip 127.0.0.1 --node-port "$KWOK_PORT" --server-address "127.0.0.1:$KWOK_PORT" \
    --node-lease-duration-seconds "$KWOK_NODE_LEASE_SECONDS" --enable-crds Logs \
    --config "$HERE/kwok.yaml" --config "$RUN/kwok-logs.yaml" --v "${KWOK_LOG_LEVEL:-WARN}"
}

wait_port() {  # name port seconds: the webhook listens only after it has patched every caBundle
  local deadline=$(($(now) + $3))
  until curl -sk --max-time 5 -o /dev/null "https://127.0.0.1:$2/"; do
    if ! running "$1" || (($(now) > deadline)); then
      log "$1 not listening on $2; last log lines:"; tail -20 "$RUN/$1.log" >&2; return 1
    fi
    sleep 0.3
  done
}

cmd_start() {
  local t0 t; t0=$(now)
  cmd_build
  if [[ ! -f $KUBECONFIG ]]; then
    log "no kubeconfig at $KUBECONFIG (start hack/controlplane.sh first)"; exit 1
  fi
  mkdir -p "$RUN"
  t=$(now)
  if [[ -z ${CRDS_INSTALLED:-} ]]; then  # hack/controlplane.sh installs them with its own
    "$(python_bin)" "$ROOT/hack/install_cluster_objects.py" --kubeconfig "$KUBECONFIG" \
      $(crd_files) $(kwok_crd_files)
    log "CRDs installed in $(($(now) - t))s"
  fi
  t=$(now)
  write_certs
  cluster_py webhooks --url "https://127.0.0.1:$VC_WEBHOOK_PORT" --ca-file "$CERTS/ca.crt" \
    --paths "$ADMISSION_PATHS"
  # The webhook first: the scheduler creates the root and default queues through it.
  start_webhook_manager
  wait_http vc-webhook-manager "https://127.0.0.1:$VC_WEBHOOK_HEALTHZ_PORT/healthz" 60
  wait_port vc-webhook-manager "$VC_WEBHOOK_PORT" 300
  log "webhook manager serving in $(($(now) - t))s"
  t=$(now)
  start_controller_manager
  cluster_py scheduler-config --file "$VC_SCHEDULER_CONF"
  start_scheduler
  write_kwok_logs_config
  start_kwok
  wait_http vc-controller-manager "http://127.0.0.1:$VC_CONTROLLER_HEALTHZ_PORT/healthz" 60
  wait_http vc-scheduler "http://127.0.0.1:$VC_SCHEDULER_HEALTHZ_PORT/healthz" 60
  wait_http kwok "http://127.0.0.1:$KWOK_PORT/healthz" 60
  # Claims need a volume before their pods can be scheduled: the test bed's provisioner plays
  # the cluster's CSI driver for its default StorageClass.
  "$(python_bin)" "$HERE/provisioner.py" --kubeconfig "$KUBECONFIG" install
  spawn provisioner "$(python_bin)" "$HERE/provisioner.py" --kubeconfig "$KUBECONFIG"
  cluster_py wait-queue default --timeout 60
  log "controllers, scheduler and kwok ready in $(($(now) - t))s (start took $(($(now) - t0))s)"
}

cmd_seed() {
  cluster_py seed "$@"
}

cmd_restart_scheduler() {  # at VC_SCHEDULE_PERIOD: the Volcano benchmark compares periods
  stop_ours "$RUN/vc-scheduler.pid" vc-scheduler || true
  start_scheduler
  wait_http vc-scheduler "http://127.0.0.1:$VC_SCHEDULER_HEALTHZ_PORT/healthz" 60
  log "scheduler restarted, a session every $VC_SCHEDULE_PERIOD"
}

cmd_stop() {
  # Reverse order. Then the webhook configurations go (with failurePolicy Fail every Volcano
  # job and queue write would fail without the webhook manager), and so do the node leases
  # kwok held (a restarted kwok would otherwise wait for them to expire before running pods).
  for p in provisioner kwok vc-scheduler vc-controller-manager vc-webhook-manager; do
    if stop_ours "$RUN/$p.pid" "$p"; then log "stopped $p"; fi
  done
  if [[ -f $KUBECONFIG ]]; then
    if timeout 20 "$(python_bin)" "$HERE/cluster.py" --kubeconfig "$KUBECONFIG" release 2>/dev/null; then
      log "webhook configurations and kwok node leases released"
    else
      log "webhook configurations and node leases left in place (API server down?)"
    fi
  fi
}

cmd_status() {
  local ok=0
  for p in vc-webhook-manager vc-controller-manager vc-scheduler kwok provisioner; do
    if running "$p"; then echo "$p running (pid $(cat "$RUN/$p.pid"))"
    else echo "$p not running"; ok=1; fi
  done
  curl -skf --max-time 5 "https://127.0.0.1:$VC_WEBHOOK_HEALTHZ_PORT/healthz" >/dev/null || ok=1
  curl -sf --max-time 5 "http://127.0.0.1:$VC_CONTROLLER_HEALTHZ_PORT/healthz" >/dev/null || ok=1
  curl -sf --max-time 5 "http://127.0.0.1:$VC_SCHEDULER_HEALTHZ_PORT/healthz" >/dev/null || ok=1
  curl -sf --max-time 5 "http://127.0.0.1:$KWOK_PORT/healthz" >/dev/null || ok=1
  return $ok
}

case ${1:-} in
  build) cmd_build ;;
  start) cmd_start ;;
  seed) shift; cmd_seed "$@" ;;
  restart-scheduler) cmd_restart_scheduler ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  crds) crd_files ;;
  kwok-crds) kwok_crd_files ;;
  *) echo "usage: $0 build|start|seed [--nodes N ...]|stop|status|crds|kwok-crds" >&2; exit 2 ;;
esac
