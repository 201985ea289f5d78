"""Shared set-up for benchmarks: Django on the development database, a Redis database of their
own, and helpers to start the portal's real processes."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Database 2 of the Redis the local services run (REDIS_PORT as hack/services.sh uses it).
BENCH_REDIS = f"redis://127.0.0.1:{os.environ.get('REDIS_PORT', '63790')}/2"
PRODUCTION_LIKE = {
    "DEBUG": "false",
    "SESSION_COOKIE_SECURE": "false",
    "ENDPOINT_WILDCARD_DOMAIN": "endpoints.localhost",
}


def setup_django():
    # A benchmark stopped with SIGTERM still stops what it started and removes what it made
    # (its `finally` blocks run).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.path.insert(0, str(ROOT))
    os.environ["REDIS_URL"] = BENCH_REDIS
    # The portal as deployed: DEBUG off (with it on, Django records every query and Celery
    # warns of that leak), over plain HTTP on loopback.
    os.environ.update(PRODUCTION_LIKE)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()


def start(args, log_name, **env):
    log = ROOT / ".local" / "logs"
    log.mkdir(parents=True, exist_ok=True)
    handle = (log / log_name).open("w")
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stop() ends its children too
    )
    return proc, log / log_name


def stop(*procs):
    """Stop processes start() began, with their children (granian's workers), and wait."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def start_worker(log_name="bench-worker.log"):
    proc, path = start(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "portal",
            "worker",
            *_pool_override(),  # otherwise the pool and its threads as deployed (settings)
            "--without-gossip",
            "--without-mingle",
            "-l",
            os.environ.get("BENCH_WORKER_LOG_LEVEL", "warning"),  # info: each task's duration
        ],
        log_name,
    )
    time.sleep(3)
    assert proc.poll() is None, path.read_text()
    return proc


def _pool_override():
    """BENCH_WORKER_POOL (solo, threads, prefork) and BENCH_WORKER_CONCURRENCY, to compare."""
    args = []
    if pool := os.environ.get("BENCH_WORKER_POOL"):
        args += ["-P", pool]
    if concurrency := os.environ.get("BENCH_WORKER_CONCURRENCY"):
        args += ["-c", concurrency]
    return args


class Busy:
    """How busy the machine's CPUs were (all processes) from its creation to `percent()`."""

    def __init__(self):
        self.start = self._read()

    @staticmethod
    def _read():
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
        return sum(fields), fields[3] + fields[4]  # all, idle + iowait

    def percent(self):
        total, idle = self._read()
        spent, idled = total - self.start[0], idle - self.start[1]
        return 100 * (1 - idled / spent) if spent else 0.0


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]
