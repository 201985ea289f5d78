#!/usr/bin/env bash
# Local PostgreSQL and Redis for development and tests, on loopback ports, with their data under
# .local/ in the checkout. Uses Debian's packages (installed by hack/bootstrap.sh).
#
#   hack/services.sh start | stop | status
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=${GPU_PORTAL_STATE_SERVICES:-$ROOT/.local/services}
PG_PORT=${PG_PORT:-54329}
REDIS_PORT=${REDIS_PORT:-63790}
log() { printf '[services] %s\n' "$*" >&2; }

pg_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  echo "${dir:-$(dirname "$(command -v initdb)")}/$1"
}

as_pg() {  # PostgreSQL refuses to run as root: use its own system user there
  if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_data() {  # as root, PostgreSQL's own user must reach the data: keep it in its home
  if [[ $(id -u) == 0 ]]; then echo "/var/lib/postgresql/gpu-portal-$PG_PORT"; else echo "$STATE/postgres"; fi
}

pg_start() {
  local data; data=$(pg_data)
  mkdir -p "$STATE"
  if [[ ! -f $data/PG_VERSION ]]; then
    mkdir -p "$data"
    [[ $(id -u) == 0 ]] && chown postgres: "$data"
    as_pg "$(pg_bin initdb)" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    cat >>"$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$data'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 300
CONF
  fi
  if ! as_pg "$(pg_bin pg_ctl)" -D "$data" status >/dev/null 2>&1; then
    as_pg "$(pg_bin pg_ctl)" -D "$data" -l "$data/server.log" -w start >/dev/null
  fi
  local psql=(as_pg "$(pg_bin psql)" -h 127.0.0.1 -p "$PG_PORT" -U postgres -qAt)
  if (($("${psql[@]}" -c "show max_connections") < 300)); then  # concurrency tests need many
    "${psql[@]}" -c "alter system set max_connections = 300"
    as_pg "$(pg_bin pg_ctl)" -D "$data" -l "$data/server.log" -w restart >/dev/null
  fi
  if [[ -z $("${psql[@]}" -c "select 1 from pg_roles where rolname='portal'") ]]; then
    "${psql[@]}" -c "create role portal login createdb"
  fi
  if [[ -z $("${psql[@]}" -c "select 1 from pg_database where datname='portal'") ]]; then
    "${psql[@]}" -c "create database portal owner portal"
  fi
  log "PostgreSQL on 127.0.0.1:$PG_PORT"
}

redis_start() {
  mkdir -p "$STATE/redis"
  if ! redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes --dir "$STATE/redis" \
      --save '' --appendonly no --pidfile "$STATE/redis/redis.pid" --logfile "$STATE/redis/redis.log"
    for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  fi
  log "Redis on 127.0.0.1:$REDIS_PORT"
}

stop() {
  if [[ -f $(pg_data)/PG_VERSION ]]; then
    as_pg "$(pg_bin pg_ctl)" -D "$(pg_data)" -m fast stop >/dev/null 2>&1 || true
  fi
  redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
  log "stopped"
}

case ${1:-} in
  start) pg_start; redis_start ;;
  stop) stop ;;
  status) redis-cli -p "$REDIS_PORT" ping >/dev/null && as_pg "$(pg_bin pg_isready)" -h 127.0.0.1 -p "$PG_PORT" -q ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
