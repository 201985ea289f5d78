#!/usr/bin/env bash
# Start the portal for development: demo data, a Celery worker and beat in the background, and
# gunicorn in the foreground. Ctrl-C stops all three.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
HOST=${1:-127.0.0.1}
PORT=${2:-8000}
PY=.venv/bin/python
LOGS=.local/logs
mkdir -p "$LOGS"

password_file=.local/demo-password
[[ -f $password_file ]] || python3 -c 'import secrets; print(secrets.token_urlsafe(12))' >"$password_file"
password=$(cat "$password_file")

# A local OpenID provider, so "Sign in with SSO" works in the demo as it would with Keycloak.
secret_file=.local/oidc-client-secret
mkdir -p .local/oidc
[[ -f $secret_file ]] || python3 -c 'import secrets; print(secrets.token_urlsafe(24))' >"$secret_file"
cat >.local/oidc/users.json <<USERS
{"maria": {"password": "$password", "email": "maria@example.org", "name": "Maria",
           "groups": ["gpu-portal:vision:researcher"]},
 "omar": {"password": "$password", "email": "omar@example.org", "name": "Omar",
          "groups": ["gpu-portal:nlp:admin", "gpu-portal:platform-admins"]}}
USERS
export OIDC_SERVER_URL=http://127.0.0.1:9400 OIDC_CLIENT_ID=gpu-portal OIDC_PROVIDER_NAME="Demo SSO"
export OIDC_CLIENT_SECRET; OIDC_CLIENT_SECRET=$(cat "$secret_file")
OIDC_PORT=9400 OIDC_REDIRECT_URIS="http://$HOST:$PORT/accounts/oidc/sso/login/callback/,http://localhost:$PORT/accounts/oidc/sso/login/callback/" \
  bash hack/oidc.sh start

$PY manage.py collectstatic --noinput -v 0
$PY manage.py seed_demo --password "$password"

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
$PY -m celery -A portal worker -l info --concurrency 2 >"$LOGS/worker.log" 2>&1 &
pids+=($!)
$PY -m celery -A portal beat -l info -s .local/celerybeat-schedule >"$LOGS/beat.log" 2>&1 &
pids+=($!)
$PY manage.py collect_cluster >"$LOGS/collector.log" 2>&1 &
pids+=($!)

cat <<MSG

  GPU Portal is starting at  http://$HOST:$PORT/
  Sign in as  admin  (platform admin), alice (vision tenant admin), bob (vision researcher)
  or charlie (nlp tenant admin), all with the password:  $password
  Or "Sign in with Demo SSO" as maria (vision researcher) or omar (nlp admin, platform admin),
  same password: their tenants and roles come from the provider's group claims.
  API docs: http://$HOST:$PORT/api/v1/docs/   Logs: $LOGS/   Stop: Ctrl-C, then 'make stop'

MSG
# nginx in front, configured as ingress-nginx renders external auth: / goes to the portal,
# /jobs/... through forward-auth to the job (here nginx's stand-in app, as no pods run).
WEB_PORT=$((PORT + 1))
.venv/bin/gunicorn portal.wsgi:application --bind "127.0.0.1:$WEB_PORT" --workers 2 --threads 4 \
  --access-logfile "$LOGS/access.log" --error-logfile "$LOGS/web.log" &
pids+=($!)
$PY hack/nginx_harness.py --portal "127.0.0.1:$WEB_PORT" --port "$PORT" >"$LOGS/nginx.log" 2>&1 &
pids+=($!)
wait -n "${pids[@]}"
