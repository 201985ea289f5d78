#!/usr/bin/env bash
# Lint, then the whole test suite against the services `make setup` started.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# Tests use their own Redis database, so a running `make run` never picks up their tasks.
export REDIS_URL=${TEST_REDIS_URL:-redis://127.0.0.1:63790/1}
t0=$(date +%s)
make -s lint
t1=$(date +%s)
echo "[test] lint took $((t1 - t0))s"
status=0
.venv/bin/pytest "$@" || status=$?
echo "[test] pytest took $(($(date +%s) - t1))s"
if [[ $status == 5 ]]; then echo "[test] no tests ran" >&2; fi
exit $status
