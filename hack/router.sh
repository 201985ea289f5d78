#!/usr/bin/env bash
# A real Traefik router for the test bed: Traefik built from source through the Go module proxy
# (cached by version outside the repo), watching a Kubernetes API server through its CRD provider
# (IngressRoute, Middleware, TraefikService) and its Gateway API provider (HTTPRoute).
#
#   hack/router.sh build    build (or reuse) the traefik binary
#   hack/router.sh crds     print the CRD files of the pinned versions (Traefik's own + Gateway API)
#   hack/router.sh start    install the CRDs, a GatewayClass and a Gateway, start traefik
#   hack/router.sh stop     stop the traefik this script started (by its recorded pid)
#   hack/router.sh status   exit 0 when traefik answers its ping endpoint
#
# start needs KUBECONFIG (e.g. from `hack/controlplane.sh env`). Everything listens on 127.0.0.1.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# v3.7.x does not build from its module zip (a nested module is missing); v3.6.12 does.
TRAEFIK_VERSION=${TRAEFIK_VERSION:-v3.6.12}
# The Gateway API version Traefik's own go.mod requires: its provider speaks exactly these CRDs.
GATEWAY_API_VERSION=${GATEWAY_API_VERSION:-v1.4.0}
CACHE=${GPU_PORTAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-portal}
BIN=$CACHE/bin/traefik-$TRAEFIK_VERSION
STATE=${ROUTER_STATE:-${GPU_PORTAL_STATE:-$ROOT/.local/controlplane}}
# Away from the usual 80/8080/8000/8081 so a developer's other services keep their ports.
HTTP_PORT=${ROUTER_HTTP_PORT:-18080}
PING_PORT=${ROUTER_PING_PORT:-18082}
NAMESPACE=${ROUTER_NAMESPACE:-gpu-portal-router}
GATEWAY=${ROUTER_GATEWAY:-gpu-portal}
GATEWAY_CLASS=${ROUTER_GATEWAY_CLASS:-traefik}
LOG_LEVEL=${ROUTER_LOG_LEVEL:-INFO}
# How long Traefik batches provider events before reloading. Upstream's 2s default made a new
# route answer 0.1-1.8 s after the API write; 200ms brings that to ~0.02-0.5 s, which tests wait on.
THROTTLE=${ROUTER_THROTTLE:-200ms}

log() { printf '[router] %s\n' "$*" >&2; }
now() { date +%s; }

module_json() {  # module@version field -> one field of `go mod download -json`
  go mod download -json "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
if d.get("Error"):
    sys.exit(d["Error"])
print(d[sys.argv[1]])' "$2"
}

upstream_replaces() {  # go.mod path -> its versioned replace lines, one "old => new version" a line
  # Only replaces to another module at a version: a local-path replace (=> ./x) cannot apply
  # outside upstream's own tree.
  python3 - "$1" <<'PY'
import re, sys
text = re.sub(r"//.*", "", open(sys.argv[1]).read())
lines = []
for block in re.findall(r"^replace\s*\((.*?)^\)", text, re.M | re.S):
    lines += block.splitlines()
lines += re.findall(r"^replace\s+([^(\n].*)$", text, re.M)
for line in lines:
    parts = line.split()
    if len(parts) >= 4 and "=>" in parts and not parts[parts.index("=>") + 1].startswith("."):
        print(" ".join(parts))
PY
}

upstream_excludes() {  # go.mod path -> its exclude lines, one "module version" a line
  python3 - "$1" <<'PY'
import re, sys
text = re.sub(r"//.*", "", open(sys.argv[1]).read())
for block in re.findall(r"^exclude\s*\((.*?)^\)", text, re.M | re.S):
    for line in block.splitlines():
        if line.split():
            print(" ".join(line.split()))
for line in re.findall(r"^exclude\s+([^(\n].*)$", text, re.M):
    print(" ".join(line.split()))
PY
}

write_wrapper() {  # dir: a throwaway module requiring traefik with traefik's own replaces/excludes
  # `go install module@version` refuses a module whose go.mod has replace directives, and a
  # plain `require` ignores them: the forks (containous/mux, ...) and the tencentcloud exclude
  # (an ambiguous import otherwise) must be restated in the main module.
  local dir=$1 gomod
  gomod=$(module_json "github.com/traefik/traefik/v3@$TRAEFIK_VERSION" GoMod)
  mkdir -p "$dir"
  {
    printf 'module gpuportal.invalid/build\n\ngo 1.26\n\n'
    printf 'require github.com/traefik/traefik/v3 %s\n\n' "$TRAEFIK_VERSION"
    upstream_replaces "$gomod" | sed 's/^/replace /'
    upstream_excludes "$gomod" | sed 's/^/exclude /'
  } >"$dir/go.mod"
  : >"$dir/go.sum"
}

cmd_build() {
  local t0; t0=$(now)
  # One build at a time: `make test` builds the router in the background while the tests that
  # do not need it run, and a test that needs it waits here for that build.
  mkdir -p "$CACHE/build"
  exec 9>"$CACHE/build/traefik-$TRAEFIK_VERSION.lock"
  flock 9
  if [[ -x $BIN/traefik ]]; then
    log "traefik $TRAEFIK_VERSION cached in $BIN"
  else
    local dir=$CACHE/build/traefik-$TRAEFIK_VERSION
    log "building traefik $TRAEFIK_VERSION from source (first time only, 10-15 min on 2 cores)"
    write_wrapper "$dir"
    mkdir -p "$BIN"
    # `traefik version` and the startup log report these instead of "dev".
    local pkg=github.com/traefik/traefik/v3/pkg/version
    local ldflags="-s -w -X $pkg.Version=$TRAEFIK_VERSION -X $pkg.BuildDate=$(date -u +%FT%TZ)"
    (cd "$dir" && GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" \
      -o "$BIN/traefik.tmp" github.com/traefik/traefik/v3/cmd/traefik)
    mv "$BIN/traefik.tmp" "$BIN/traefik"
    log "traefik built"
  fi
  exec 9>&-  # not held by the router this script starts next
  crd_files >/dev/null
  log "build phase took $(($(now) - t0))s"
}

crd_files() {  # Traefik's CRD provider set and the Gateway API standard channel, same versions
  local traefik gateway
  traefik=$(module_json "github.com/traefik/traefik/v3@$TRAEFIK_VERSION" Dir)
  traefik=$traefik/docs/content/reference/dynamic-configuration
  gateway=$(module_json "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION" Dir)/config/crd/standard
  ls "$traefik"/traefik.io_*.yaml "$gateway"/gateway.networking.k8s.io_*.yaml
}

python_bin() {  # the project's venv when present: the helpers import the portal's k8s adapter
  local py=python3; [[ -x $ROOT/.venv/bin/python ]] && py=$ROOT/.venv/bin/python
  echo "${PYTHON:-$py}"
}

objects_py() {  # the router's Kubernetes objects, through the portal's own adapter
  "$(python_bin)" "$ROOT/hack/router/objects.py" --kubeconfig "$KUBECONFIG" "$@"
}

# shellcheck source=hack/pids.sh
source "$ROOT/hack/pids.sh"
running() { ours "$STATE/traefik.pid" traefik; }

pinged() { curl -sf --max-time 2 "http://127.0.0.1:$PING_PORT/ping" >/dev/null 2>&1; }

start_traefik() {
  # KUBECONFIG in the environment makes both Kubernetes providers use it (token or client
  # certificate alike); KUBERNETES_SERVICE_HOST would win over it, so it is dropped.
  # No version check or usage report: nothing but the API server and local upstreams is dialled.
  # The `traefik` entrypoint carries only /ping; without an address it would take :8080.
  env -u KUBERNETES_SERVICE_HOST -u KUBERNETES_SERVICE_PORT KUBECONFIG="$KUBECONFIG" \
    nohup "$BIN/traefik" \
    --global.checknewversion=false --global.sendanonymoususage=false \
    --log.level="$LOG_LEVEL" --log.nocolor=true \
    --accesslog=true --accesslog.filepath="$STATE/traefik-access.log" \
    --entrypoints.web.address="127.0.0.1:$HTTP_PORT" --entrypoints.web.asdefault=true \
    --entrypoints.traefik.address="127.0.0.1:$PING_PORT" --ping=true \
    --providers.providersthrottleduration="$THROTTLE" \
    --providers.kubernetescrd=true --providers.kubernetescrd.allowexternalnameservices=true \
    --providers.kubernetescrd.allowemptyservices=true \
    --providers.kubernetesgateway=true \
    >"$STATE/traefik.log" 2>&1 &
  echo $! >"$STATE/traefik.pid"
}

wait_pinged() {  # our process must be alive too: another router may answer on the same port
  local deadline=$(($(now) + ${1:-60}))
  until running && pinged; do
    if ! running || (($(now) > deadline)); then
      log "traefik not ready; last log lines:"; tail -20 "$STATE/traefik.log" >&2; return 1
    fi
    sleep 0.3
  done
}

cmd_start() {
  : "${KUBECONFIG:?set KUBECONFIG to the cluster traefik should watch (hack/controlplane.sh env)}"
  local t0; t0=$(now)
  cmd_build
  mkdir -p "$STATE"
  if running; then log "traefik already running (pid $(cat "$STATE/traefik.pid"))"; return; fi
  local t1; t1=$(now)
  # Server-side apply, then wait for Established: traefik's informers fail on missing kinds.
  # shellcheck disable=SC2046
  if [[ -z ${CRDS_INSTALLED:-} ]]; then  # hack/controlplane.sh installs them all at once
    "$(python_bin)" "$ROOT/hack/install_cluster_objects.py" --kubeconfig "$KUBECONFIG" $(crd_files)
  fi
  objects_py gateway --namespace "$NAMESPACE" --gateway "$GATEWAY" \
    --gateway-class "$GATEWAY_CLASS" --port "$HTTP_PORT"
  log "CRDs and Gateway $NAMESPACE/$GATEWAY installed in $(($(now) - t1))s"
  local t2; t2=$(now)
  start_traefik
  wait_pinged 60
  log "traefik answers ping after $(($(now) - t2))s"
  # The Gateway provider is up once it has written the Gateway's status.
  if ! objects_py wait-gateway --namespace "$NAMESPACE" --gateway "$GATEWAY" --timeout 60; then
    tail -20 "$STATE/traefik.log" >&2; return 1
  fi
  log "router ready in $(($(now) - t0))s: http://127.0.0.1:$HTTP_PORT" \
    "(pid $(cat "$STATE/traefik.pid"), log $STATE/traefik.log)"
}

cmd_stop() {
  if stop_ours "$STATE/traefik.pid" traefik; then log "stopped traefik"; fi
}

case ${1:-} in
  build) cmd_build ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) running && pinged ;;
  built) [[ -x $BIN/traefik ]] ;;
  crds) crd_files ;;
  *) echo "usage: $0 build|crds|start|stop|status" >&2; exit 2 ;;
esac
