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


# Which part of the test bed a process is, by the first pattern its command line holds.
PARTS = (
    ("celery -A portal beat", "portal beat"),
    ("celery -A portal worker", "portal workers"),
    ("granian", "portal web"),
    ("collect_cluster", "portal collector"),
    ("postgres", "PostgreSQL"),
    ("redis-server", "Redis"),
    ("bench/", "benchmark (script, browsers)"),
    ("kube-apiserver", "API server"),
    ("etcd", "etcd"),
    ("kube-controller-manager", "controller manager"),
    ("/vc-", "Volcano"),
    ("kwok", "KWOK"),
    ("provisioner.py", "provisioner"),
)


def cpu_by_process():
    """{pid: (part, CPU seconds)} of the test bed's processes. The database server's include
    its reaped children (backends that ended); no other's do: a child another part reaps (the
    benchmark stopping the portal's processes) was counted as itself."""
    ticks = os.sysconf("SC_CLK_TCK")
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            command = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = Path(entry.path, "stat").read_text()
        except (OSError, UnicodeDecodeError):  # gone meanwhile
            continue
        part = next((name for pattern, name in PARTS if pattern in command), None)
        if part:
            fields = stat.rsplit(")", 1)[1].split()  # from the state on (the 3rd field)
            times = fields[11:15] if part == "PostgreSQL" else fields[11:13]
            found[int(entry.name)] = (part, sum(int(v) for v in times) / ticks)
    return found


class Busy:
    """How busy the machine's CPUs were (all processes) from its creation to `percent()`, and
    the CPU seconds each part of the test bed spent meanwhile (`by_part()`)."""

    def __init__(self):
        self.start = self._read()
        self.processes = cpu_by_process()

    def by_part(self):
        spent = {}
        for pid, (part, seconds) in cpu_by_process().items():
            was, before = self.processes.get(pid, (part, 0.0))
            if was != part or before > seconds:  # the pid of a process gone since
                before = 0.0
            spent[part] = spent.get(part, 0.0) + seconds - before
        return spent

    def usage(self):
        """(percent busy, CPU seconds by part) since creation."""
        return self.percent(), self.by_part()

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
