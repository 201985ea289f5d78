#!/usr/bin/env bash
# A local OpenID Connect provider for development and tests (hack/oidc/server.mjs, built on the
# oidc-provider npm package), on a loopback port, with its log and pid under .local/oidc/.
#
#   hack/oidc.sh start | stop | status
#
# Environment, passed through to the server: OIDC_PORT (default 9400; the issuer is
# http://127.0.0.1:$OIDC_PORT), OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_REDIRECT_URIS (comma
# separated), OIDC_USERS_FILE (default .local/oidc/users.json, created as {} when missing).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=${OIDC_STATE:-$ROOT/.local/oidc}
export OIDC_PORT=${OIDC_PORT:-9400}
export OIDC_USERS_FILE=${OIDC_USERS_FILE:-$STATE/users.json}
DISCOVERY=http://127.0.0.1:$OIDC_PORT/.well-known/openid-configuration
log() { printf '[oidc] %s\n' "$*" >&2; }
now() { date +%s; }

# shellcheck source=hack/pids.sh
source "$ROOT/hack/pids.sh"
running() { ours "$STATE/oidc.pid" server.mjs; }
answers() { curl -sf -o /dev/null --max-time 2 "$DISCOVERY"; }

cmd_start() {
  mkdir -p "$STATE"
  if answers; then
    log "already running on http://127.0.0.1:$OIDC_PORT"
    return
  fi
  if [[ ! -d $ROOT/hack/oidc/node_modules/oidc-provider ]]; then
    log "installing the provider's Node packages"
    (cd "$ROOT/hack/oidc" && npm ci --silent --no-audit --no-fund)
  fi
  if [[ ! -f $OIDC_USERS_FILE ]]; then
    mkdir -p "$(dirname "$OIDC_USERS_FILE")"
    echo '{}' >"$OIDC_USERS_FILE"
  fi
  if ! running; then
    nohup node "$ROOT/hack/oidc/server.mjs" >>"$STATE/oidc.log" 2>&1 </dev/null &
    echo $! >"$STATE/oidc.pid"
  fi
  local deadline=$(($(now) + 90))  # generous: a busy machine starts node slowly
  until answers; do
    if ! running || (($(now) > deadline)); then
      log "provider not ready; last log lines:"; tail -20 "$STATE/oidc.log" >&2
      cmd_stop >/dev/null 2>&1 || true
      return 1
    fi
    sleep 0.2
  done
  log "OpenID provider on http://127.0.0.1:$OIDC_PORT (users: $OIDC_USERS_FILE)"
}

cmd_stop() {
  if stop_ours "$STATE/oidc.pid" server.mjs; then log "stopped"; fi
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) answers ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
