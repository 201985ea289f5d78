#!/usr/bin/env bash
# Start the portal for development: demo data, a Celery worker and beat in the background, and
# the web server in the foreground. Ctrl-C stops them all.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
HOST=${1:-127.0.0.1}
PORT=${2:-8000}
PY=.venv/bin/python
LOGS=.local/logs
mkdir -p "$LOGS"

password_file=.local/demo-password
# Letters and digits only: easy to type, and never read as an option (one began with '-').
[[ -f $password_file ]] || python3 -c 'import secrets, string
print("".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(16)))' >"$password_file"
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
# As deployed (DEBUG off: the portal's own error pages, never Django's technical ones), over
# plain http on loopback. Endpoints answer through the router on its port, as http (no
# certificates here).
export DEBUG=false SESSION_COOKIE_SECURE=false ENDPOINT_WILDCARD_DOMAIN=endpoints.localhost
export ALLOWED_HOSTS=${ALLOWED_HOSTS:-localhost,127.0.0.1,[::1],$HOST}
export PORTAL_URL=http://$HOST:$PORT ENDPOINT_SCHEME=http ENDPOINT_PORT=${ROUTER_HTTP_PORT:-18080}
export KUBECONFIG=${KUBECONFIG:-$ROOT/.local/controlplane/kubeconfig}
export OIDC_SERVER_URL=http://127.0.0.1:9400 OIDC_CLIENT_ID=gpu-portal OIDC_PROVIDER_NAME="Demo SSO"
export OIDC_CLIENT_SECRET; OIDC_CLIENT_SECRET=$(cat "$secret_file")
OIDC_PORT=9400 OIDC_REDIRECT_URIS="http://$HOST:$PORT/accounts/oidc/sso/login/callback/,http://localhost:$PORT/accounts/oidc/sso/login/callback/" \
  bash hack/oidc.sh start

$PY manage.py collectstatic --noinput -v 0
$PY manage.py seed_demo --password="$password"

pids=() names=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  # Each has 10 s to stop; then it is killed. The web server, told to stop twice (the process
  # group's SIGTERM, then this one), was seen to hang for good.
  local deadline=$((SECONDS + 10))
  while ((SECONDS < deadline)) && kill -0 "${pids[@]}" 2>/dev/null; do sleep 0.2; done
  kill -KILL "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM
started() { pids+=($!) names+=("$1"); }  # name: of what was just started in the background
$PY -m celery -A portal worker -l info >"$LOGS/worker.log" 2>&1 &
started worker
$PY -m celery -A portal beat -l info -s .local/celerybeat-schedule >"$LOGS/beat.log" 2>&1 &
started beat
$PY manage.py collect_cluster >"$LOGS/collector.log" 2>&1 &
started collector
# The test bed's container runtime and Multus: pods bound to a node get their secondary
# addresses from the real Whereabouts (as root only: it makes a network namespace).
if [[ $(id -u) == 0 ]]; then
  bash hack/whereabouts.sh build
  $PY hack/cni/runner.py --kubeconfig "$KUBECONFIG" --cni-path "$(bash hack/whereabouts.sh cni-path)" \
    --state-dir .local/cni >"$LOGS/cni-runner.log" 2>&1 &
  started cni-runner
fi

cat <<MSG

  GPU Portal is starting at  http://$HOST:$PORT/
  Sign in as  admin  (platform admin), alice (vision tenant admin), bob (vision researcher)
  or charlie (nlp tenant admin), all with the password:  $password
  Or "Sign in with Demo SSO" as maria (vision researcher) or omar (nlp admin, platform admin),
  same password: their tenants and roles come from the provider's group claims.
  Job endpoints open from a job's page, each on its own origin through the router:
  http://<port>--<job>--<tenant>.endpoints.localhost:$ENDPOINT_PORT/ (a stand-in app answers).
  API docs: http://$HOST:$PORT/api/v1/docs/   Logs: $LOGS/   Stop: Ctrl-C, then 'make stop'

MSG
# The portal on its own origin; job endpoints on theirs, through the router (Traefik, started
# with the control plane) at http://<port>--<job>--<tenant>.endpoints.localhost:18080/ (Chromium
# and Firefox resolve *.localhost to this machine). No pods run here: a stand-in app answers for
# every job, showing the headers its app would receive. It needs a network namespace (an
# EndpointSlice may not name a loopback address): as root only.
if [[ $(id -u) == 0 ]]; then
  $PY hack/router/stand_in.py --kubeconfig "$KUBECONFIG" --log-dir "$LOGS" >"$LOGS/stand-in.log" 2>&1 &
  started stand-in
else
  echo "  (not root: no stand-in app answers at job endpoints, and no pod gets a secondary address)"
fi
$PY manage.py serve --bind "$HOST:$PORT" --workers 2 --access-log >"$LOGS/web.log" 2>&1 &
started web
status=0
wait -n "${pids[@]}" || status=$?
for i in "${!pids[@]}"; do
  if ! kill -0 "${pids[i]}" 2>/dev/null; then
    echo "the portal's ${names[i]} stopped (exit $status; its log is in $LOGS/); stopping the rest" >&2
  fi
done
exit "$status"
