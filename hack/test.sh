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
late=""
cleanup() {
  [[ -z $late ]] || kill -- "-$late" 2>/dev/null || true
  ((had_controlplane)) || bash hack/controlplane.sh stop || true
  ((had_services)) || bash hack/services.sh stop || true
}
trap cleanup EXIT
bash hack/services.sh start
# The router, the Whereabouts plugins, Helm and then the production image (when not built yet: a
# new machine) are built in the background at the lowest priority, while lint and the tests
# that need none of them run; the tests that need one run last (tests/conftest.py) and wait for
# its build, and the image's smoke run comes after the tests (each build holds a lock).
# Exported: a test that restarts the control plane must not wait for them.
export LATE_BUILDS=1
bash hack/controlplane.sh start
mkdir -p .local/logs
setsid nice -n 19 bash -c 't=$(date +%s)
  bash hack/router.sh build && bash hack/whereabouts.sh build && bash hack/helm.sh build >/dev/null
  echo "[test] router, Whereabouts and Helm ready after $(($(date +%s) - t))s in the background"
  bash hack/image.sh build >/dev/null
  echo "[test] image ready after $(($(date +%s) - t))s in the background"' \
  >.local/logs/late-builds.log 2>&1 &
late=$!
export LATE_BUILDS_GROUP=$late  # a test about to wait for one of them hurries them
.venv/bin/python manage.py migrate --noinput -v 0
.venv/bin/python manage.py collectstatic --noinput -v 0
t1=$(date +%s)
echo "[test] setup took $((t1 - t0))s"
# Tests use their own Redis database, so a running `make run` never picks up their tasks.
export REDIS_URL=${TEST_REDIS_URL:-redis://127.0.0.1:63790/1}
make -s lint
t2=$(date +%s)
echo "[test] lint took $((t2 - t1))s"
status=0
.venv/bin/pytest "$@" || status=$?
t3=$(date +%s)
echo "[test] pytest took $((t3 - t2))s"
# The production image, built without Docker and smoke-run against this run's services.
bash hack/image.sh smoke || status=$?
echo "[test] image smoke run took $(($(date +%s) - t3))s (waiting for its build if unfinished)"
grep -h "built in\|build phase took\|ready after" .local/logs/late-builds.log || true
if [[ $status == 5 ]]; then echo "[test] no tests ran" >&2; fi
exit $status
