"""Processes the tests start: wait for readiness generously, catching every error while waiting,
and always stop what was started, also when waiting fails."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A busy 2-core machine (a parallel build, another suite) makes first answers slow.
READY_TIMEOUT = float(os.environ.get("TEST_READY_TIMEOUT", "120"))


# Seconds a test may wait for a part `make test` builds in the background (a cold build of it
# beside a busy machine), beyond the suite's own per-test timeout.
LATE_BUILD_TIMEOUT = 1800


class NotReady(AssertionError):
    pass


def hurry_late_builds() -> None:
    """hack/test.sh builds some parts in the background at the lowest priority while the rest
    of the suite runs; a test about to wait for one gives them the normal priority (beside a
    busy machine they would barely move). Raising it back may need root: otherwise they stay."""
    group = os.environ.get("LATE_BUILDS_GROUP", "")
    if group.isdigit():
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PGRP, int(group), 0)


def wait_ready(
    proc: subprocess.Popen,
    ready: Callable[[], object],
    *,
    what: str,
    log: Path | None = None,
    timeout: float = READY_TIMEOUT,
) -> None:
    """Poll `ready()` until it is truthy. Any exception it raises counts as not ready yet; a
    process that exits or a timeout fails with the last error and the log's tail."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while True:
        try:
            if ready():
                return
        except Exception as exc:  # noqa: BLE001  (any failure while starting means "not yet")
            last = f"{type(exc).__name__}: {exc}"
        if proc.poll() is not None:
            raise NotReady(f"{what} exited with {proc.returncode} ({last}){_tail(log)}")
        if time.monotonic() > deadline:
            raise NotReady(f"{what} not ready after {timeout:.0f}s ({last}){_tail(log)}")
        time.sleep(0.2)


def _tail(log: Path | None) -> str:
    if log is None or not log.exists():
        return ""
    return "\n--- last lines of its log ---\n" + "\n".join(log.read_text().splitlines()[-30:])


def stop(proc: subprocess.Popen | None, *, sig: int = signal.SIGTERM, grace: float = 15) -> None:
    """Stop a process we started: a signal, then SIGKILL after `grace` seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def start(args: list[str], *, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    handle = log.open("w")
    try:
        return subprocess.Popen(
            args,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    finally:
        handle.close()  # the child keeps its own descriptor


@contextlib.contextmanager
def running(
    args: list[str],
    *,
    log: Path,
    ready: Callable[[], object],
    what: str,
    env: dict[str, str] | None = None,
    stop_signal: int = signal.SIGTERM,
    timeout: float = READY_TIMEOUT,
) -> Iterator[subprocess.Popen]:
    """Start a process, wait until it is ready, yield it, and stop it whatever happens."""
    proc = start(args, log=log, env=env)
    try:
        wait_ready(proc, ready, what=what, log=log, timeout=timeout)
        yield proc
    finally:
        stop(proc, sig=stop_signal)


def settings_under(names, **env):
    """The values of the portal's settings `names` as a process started with `env` reads them
    (settings are read once, at start)."""
    code = (
        "import django, json, sys; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([getattr(s, n, None) for n in sys.argv[1:]]))"
    )
    environ = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", **env}
    done = subprocess.run(
        [sys.executable, "-c", code, *names], cwd=ROOT, env=environ, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def settings_refused(**env):
    """What the portal says when it will not start with these settings."""
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", **env},
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    return done.stderr
