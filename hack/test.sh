#!/usr/bin/env bash
# `make test`: set up what the suite needs, lint, run the whole suite, and stop again whatever
# this run started (services and control plane already running, e.g. from `make run`, stay).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
t0=$(date +%s)
bash hack/bootstrap.sh
had_services=0; bash hack/services.sh status 2>/dev/null && had_services=1
had_controlplane=0; bash hack/controlplane.sh status 2>/dev/null && had_controlplane=1
cleanup() {
  ((had_controlplane)) || bash hack/controlplane.sh stop || true
  ((had_services)) || bash hack/services.sh stop || true
}
trap cleanup EXIT
bash hack/services.sh start
bash hack/controlplane.sh start
.venv/bin/python manage.py migrate --noinput -v 0
.venv/bin/python manage.py collectstatic --noinput -v 0
th=$(date +%s)
bash hack/helm.sh build >/dev/null  # the chart tests' Helm, built from source once per version
echo "[test] helm ready in $(($(date +%s) - th))s"
t1=$(date +%s)
echo "[test] setup took $((t1 - t0))s"
# Tests use their own Redis database, so a running `make run` never picks up their tasks.
export REDIS_URL=${TEST_REDIS_URL:-redis://127.0.0.1:63790/1}
make -s lint
t2=$(date +%s)
echo "[test] lint took $((t2 - t1))s"
status=0
# The production image, built without Docker and smoke-run against this run's services.
bash hack/image.sh smoke || status=$?
t3=$(date +%s)
echo "[test] image build and smoke run took $((t3 - t2))s"
.venv/bin/pytest "$@" || status=$?
echo "[test] pytest took $(($(date +%s) - t3))s"
if [[ $status == 5 ]]; then echo "[test] no tests ran" >&2; fi
exit $status
