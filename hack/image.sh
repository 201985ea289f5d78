#!/usr/bin/env bash
# Build the production image from the repository's Dockerfile without Docker, and smoke-run it.
#
#   hack/image.sh build    a Debian base rootfs (mmdebstrap, cached by date) imported as a local
#                          base image, then `buildah bud` of the Dockerfile on it (cached by the
#                          build context's content); prints the image name
#   hack/image.sh smoke    migrate with the image, start web (read-only root filesystem) and a
#                          worker against the local PostgreSQL, Redis and API server, check
#                          /readyz, and have the worker reconcile one tenant (which needs the
#                          API server)
#
# Needs root (buildah/podman with the chroot isolation and runc), the local services
# (hack/services.sh) and control plane (hack/controlplane.sh) for `smoke`.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
CACHE=${GPU_PORTAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-portal}
STATE=${GPU_PORTAL_IMAGE_STATE:-$ROOT/.local/image}
SUITE=${BASE_SUITE:-bookworm}
MIRROR=${DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
IMAGE=localhost/gpu-portal
log() { printf '[image] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
now() { date +%s; }

setup_containers() {  # our own storage and runtime settings, never the machine's defaults
  local pkgs=(buildah podman runc mmdebstrap) missing=()
  for p in "${pkgs[@]}"; do command -v "$p" >/dev/null || missing+=("$p"); done
  if ((${#missing[@]})); then
    [[ $(id -u) == 0 ]] || die "needs root to install ${missing[*]} (Debian packages)"
    log "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  [[ $(id -u) == 0 ]] || die "buildah's chroot isolation and podman with runc need root here"
  mkdir -p "$STATE" "$CACHE/containers"
  cat >"$STATE/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$CACHE/containers/storage"
runroot = "$CACHE/containers/run"
CONF
  # crun fails on this kind of cgroup setup; ulimits stay within the machine's hard limits.
  local nofile nproc
  nofile=$(ulimit -Hn); nproc=$(ulimit -Hu)
  [[ $nofile == unlimited || $nofile -gt 20000 ]] && nofile=20000
  [[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768
  cat >"$STATE/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
  export CONTAINERS_STORAGE_CONF=$STATE/storage.conf CONTAINERS_CONF=$STATE/containers.conf
}

base_image() {  # a Debian rootfs with python3 and venv, built once a day, imported as an image
  local day tar name
  day=$(date -u +%Y%m%d)
  name=localhost/gpu-portal-base:$SUITE-$day
  if podman image exists "$name"; then echo "$name"; return; fi
  tar=$CACHE/image/base-$SUITE-$day.tar
  if [[ ! -f $tar ]]; then
    rm -rf "$tar"
    mkdir -p "$(dirname "$tar")"
    local t0; t0=$(now)
    log "building the $SUITE base rootfs with mmdebstrap from $MIRROR"
    # mmdebstrap picks the output format by the name's ending: keep it .tar.
    mmdebstrap --quiet --variant=apt --include=python3,python3-venv,ca-certificates \
      "$SUITE" "${tar%.tar}.partial.tar" "$MIRROR" >&2 \
      || die "mmdebstrap could not build the base rootfs from $MIRROR (see above): no image"
    mv "${tar%.tar}.partial.tar" "$tar"
    log "base rootfs built in $(($(now) - t0))s ($(du -h "$tar" | cut -f1))"
  fi
  local c
  c=$(buildah from scratch)
  buildah add "$c" "$tar" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
  buildah commit --quiet --rm "$c" "$name" >/dev/null
  echo "$name"
}

context_digest() {  # what the Dockerfile copies, so an unchanged tree reuses the built image
  {
    sha256sum Dockerfile .dockerignore manage.py pyproject.toml deploy/image/*
    find portal core k8s_adapters tenants jobs networking accounts templates static -type f \
      -not -name '*.pyc' -not -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
}

cmd_build() {
  setup_containers
  local t0 base tag
  t0=$(now)
  tag=$IMAGE:$(context_digest)
  if podman image exists "$tag"; then log "image $tag cached"; echo "$tag"; return; fi
  # One build at a time: `make test` builds the image in the background while the tests run,
  # and the smoke run after them waits here for that build.
  exec 9>"$CACHE/containers/build.lock"
  flock 9
  if podman image exists "$tag"; then log "image $tag built meanwhile"; echo "$tag"; return; fi
  base=$(base_image)
  log "building $tag on $base"
  # The CA bundle is mounted for pip (TLS may be intercepted), never copied into a layer.
  buildah bud --quiet --isolation chroot --layers --build-arg "BASE=$base" \
    --build-arg "CA_BUNDLE=$CA_BUNDLE" -v "$CA_BUNDLE:$CA_BUNDLE:ro" -t "$tag" -f Dockerfile . >&2
  log "image built in $(($(now) - t0))s ($(podman image inspect -f '{{.Size}}' "$tag" | numfmt --to=iec))"
  echo "$tag"
}

# -- smoke run ------------------------------------------------------------------------------------

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

container_env() {  # the settings every container of the smoke run shares
  local plane=$ROOT/.local/controlplane kube=$STATE/kube
  [[ -f $plane/kubeconfig ]] || die "no local control plane (hack/controlplane.sh start)"
  # A copy only the container's user (uid 10001) can read, naming the CA where it is mounted.
  mkdir -p "$kube"
  cp "$plane/certs/apiserver.crt" "$kube/ca.crt"
  sed "s#certificate-authority: .*#certificate-authority: /kube/ca.crt#" "$plane/kubeconfig" >"$kube/kubeconfig"
  chown -R 10001:10001 "$kube" && chmod 0700 "$kube" && chmod 0600 "$kube/kubeconfig"
  SMOKE_ARGS=(--pull never --network host --tmpfs /tmp
    -v "$kube:/kube:ro" -e "KUBECONFIG=/kube/kubeconfig"
    -e "DATABASE_URL=${DATABASE_URL:-postgres://portal@127.0.0.1:${PG_PORT:-54329}/portal}"
    # Its own Redis database: nothing else running takes the smoke run's tasks.
    -e "REDIS_URL=redis://127.0.0.1:${REDIS_PORT:-63790}/3"
    -e "SECRET_KEY=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
    -e ENDPOINT_WILDCARD_DOMAIN=endpoints.localhost -e ALLOWED_HOSTS=127.0.0.1,localhost)
}

in_image() { podman run --rm "${SMOKE_ARGS[@]}" "$1" "${@:2}"; }

wait_ready() {  # web's /readyz answers 200 (database and Redis ok)
  local port=$1 name=$2 deadline=$(($(now) + 90))
  until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
    if (($(now) > deadline)) || [[ $(podman inspect -f '{{.State.Running}}' "$name" 2>/dev/null) != true ]]; then
      curl -s "http://127.0.0.1:$port/readyz" >&2 || true
      podman logs --tail 30 "$name" >&2 || true
      die "web never answered /readyz"
    fi
    sleep 1
  done
  log "web /readyz: $(curl -s "http://127.0.0.1:$port/readyz")"
}

SMOKE_TENANT='
import sys, time
from tenants import services
from tenants.models import Tenant
slug = sys.argv[-1]
if sys.argv[-2] == "create":
    services.create_tenant(actor=None, slug=slug, display_name="Image smoke test", gpu_quota=0)
else:
    print(Tenant.objects.get(slug=slug).sync_state)
'

await_reconciled() {  # the worker container reconciled the tenant: its state is in_sync
  local web=$1 slug=$2 deadline=$(($(now) + 90)) state=
  while (($(now) < deadline)); do
    state=$(podman exec "$web" python -c "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'portal.settings'); django.setup(); exec(open('/tmp/smoke.py').read())" state "$slug" 2>/dev/null || true)
    [[ $state == in_sync ]] && { log "worker reconciled tenant $slug"; return; }
    [[ $(podman inspect -f '{{.State.Running}}' "$3" 2>/dev/null) == true ]] || break
    sleep 1
  done
  podman logs --tail 30 "$3" >&2 || true
  die "the worker did not reconcile tenant $slug (state: ${state:-unknown})"
}

cleanup_smoke() {
  podman rm -f -t 2 "${SMOKE_CONTAINERS[@]}" >/dev/null 2>&1 || true
  [[ -n ${SMOKE_SLUG:-} ]] && in_image "$SMOKE_IMAGE_NAME" manage shell -c "
from core.cluster import get_cluster
from tenants.models import Tenant
t = Tenant.objects.filter(slug='$SMOKE_SLUG').first()
if t:
    get_cluster().delete('scheduling.volcano.sh/v1beta1', 'Queue', t.queue_name)
    get_cluster().delete('v1', 'Namespace', t.namespace)
    t.delete()
" >/dev/null 2>&1 || true
}

cmd_smoke() {
  local t0 image port id web worker metrics_port
  t0=$(now)
  image=$(cmd_build)
  setup_containers  # the build ran in a subshell: its settings are not exported here
  container_env
  id=$$-$(now)
  web=gpu-portal-smoke-web-$id worker=gpu-portal-smoke-worker-$id
  SMOKE_CONTAINERS=("$web" "$worker") SMOKE_IMAGE_NAME=$image SMOKE_SLUG=
  trap cleanup_smoke EXIT
  in_image "$image" migrate -v 0
  port=$(free_port)
  # Read-only root filesystem, as the chart runs it: only /tmp is writable.
  podman run -d --name "$web" --read-only -e "PORT=$port" "${SMOKE_ARGS[@]}" "$image" web >/dev/null
  metrics_port=$(free_port)
  podman run -d --name "$worker" --read-only -e "METRICS_PORT=$metrics_port" "${SMOKE_ARGS[@]}" \
    "$image" worker --concurrency 1 >/dev/null
  wait_ready "$port" "$web"
  printf '%s' "$SMOKE_TENANT" | podman exec -i "$web" sh -c 'cat >/tmp/smoke.py'
  SMOKE_SLUG=smoke-$(python3 -c 'import secrets; print(secrets.token_hex(4))')
  podman exec "$web" python -c "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'portal.settings'); django.setup(); exec(open('/tmp/smoke.py').read())" create "$SMOKE_SLUG"
  await_reconciled "$web" "$SMOKE_SLUG" "$worker"
  # The worker pod's exporter counted that run (the prefork child wrote it to the shared folder).
  curl -sf "http://127.0.0.1:$metrics_port/metrics" | grep -E '^portal_reconcile_total\{kind="tenant",outcome="in_sync"\} [1-9]' >&2 \
    || die "the worker's metrics do not count the reconcile"
  log "smoke run passed in $(($(now) - t0))s"
}

case ${1:-} in
  build) cmd_build ;;
  smoke) cmd_smoke ;;
  *) echo "usage: $0 build|smoke" >&2; exit 2 ;;
esac
