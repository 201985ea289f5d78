#!/usr/bin/env bash
# Everything a fresh machine needs for `make run` and `make test`: Debian packages, the Python
# virtualenv with the pinned dependencies, and the Node packages of the test OpenID provider.
# Idempotent and quick when nothing changed.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
log() { printf '[bootstrap] %s\n' "$*" >&2; }
t0=$(date +%s)

DEBS=(postgresql redis-server nginx-light chromium openssl curl wrk iproute2)
missing=()
for pkg in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian starts its own services on install; ours run on other ports, so stop nothing else.

stamp=.venv/.installed-$(cat pyproject.toml sdk/pyproject.toml | sha256sum | cut -c1-16)
if [[ ! -f $stamp ]]; then
  log "installing Python dependencies"
  [[ -x .venv/bin/python ]] || python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e ".[dev]" -e sdk
  rm -f .venv/.installed-*
  touch "$stamp"
fi

if [[ -f hack/oidc/package.json ]]; then
  lock=hack/oidc/node_modules/.installed-$(sha256sum hack/oidc/package-lock.json | cut -c1-16)
  if [[ ! -f $lock ]]; then
    log "installing the test OpenID provider's Node packages"
    (cd hack/oidc && npm ci --silent --no-audit --no-fund)
    touch "$lock"
  fi
fi
if [[ ! -f .env ]]; then  # a development .env with a fresh secret key, never committed
  printf 'DEBUG=true\nSECRET_KEY=%s\n' "$(python3 -c 'import secrets; print(secrets.token_urlsafe(48))')" >.env
fi
log "bootstrap took $(($(date +%s) - t0))s"
