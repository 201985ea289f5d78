"""Fixtures bound to real services: PostgreSQL (pytest-django's test database), Redis, the local
kube-apiserver (started once per session if it is not running) and, where a test asks for one, a
real Celery worker process."""

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
import warnings
from pathlib import Path

import pytest
import redis as redis_lib
from django.conf import settings
from django.db import connections
from django.db.backends.base.creation import TEST_DATABASE_PREFIX

from core import snapshot as store
from portal.celery import app as celery_app
from tests import processes

ROOT = Path(__file__).resolve().parent.parent
# Fixtures of parts `make test` builds in the background on a new machine (hack/test.sh), in the
# order it builds them: the router, the Whereabouts plugins, Helm.
LATE_PARTS = {"router_port": 1, "cni_runner": 2, "helm_path": 3}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """The modules whose tests need a part built in the background run last, whole, in the
    order the parts are built: the rest of the suite runs while they build."""
    late = {}
    for item in items:
        needs = max((LATE_PARTS.get(name, 0) for name in item.fixturenames), default=0)
        module = item.nodeid.split("::", 1)[0]
        late[module] = max(late.get(module, 0), needs)
    items.sort(key=lambda item: late[item.nodeid.split("::", 1)[0]])
    # The first test needing a part waits for its build: longer than a test may take.
    waiting = set()
    for item in items:
        for part in LATE_PARTS.keys() & set(item.fixturenames) - waiting:
            waiting.add(part)
            item.add_marker(pytest.mark.timeout(processes.LATE_BUILD_TIMEOUT))


@pytest.fixture(scope="session", autouse=True)
def _tasks_run_inline():
    """By default a task runs in the process that enqueues it (still against the real API
    server); tests that need the real queue use the `worker` fixture."""
    celery_app.conf.task_always_eager = True
    celery_app.conf.task_eager_propagates = True
    redis_lib.Redis.from_url(settings.REDIS_URL).flushdb()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# The RBAC tests (tests/deploy/test_rbac.py) run reconcile and collector tests with the portal
# acting as one of the chart's ServiceAccounts (KUBECONFIG); what the tests themselves set up
# (namespaces, nodes, Volcano's part) still goes through this admin kubeconfig.
ADMIN_KUBECONFIG = os.environ.get("TEST_ADMIN_KUBECONFIG", "")


@pytest.fixture(scope="session")
def cluster():
    """The tests' own connection to the API server (the portal's is core.cluster's)."""
    from core.cluster import get_cluster
    from k8s_adapters.client import Cluster

    if ADMIN_KUBECONFIG:
        admin = Cluster.connect(ADMIN_KUBECONFIG, field_manager=settings.K8S_FIELD_MANAGER)
        assert admin.ready(), "the API server does not answer /readyz"
        return admin
    if not Path(settings.KUBECONFIG or "/nonexistent").exists() or not get_cluster().ready():
        subprocess.run(["bash", str(ROOT / "hack" / "controlplane.sh"), "start"], check=True)
        get_cluster.cache_clear()
    cluster = get_cluster()
    assert cluster.ready(), "the API server does not answer /readyz"
    return cluster


@pytest.fixture
def namespace(cluster):
    """A fresh namespace for one test, deleted afterwards."""
    name = f"test-{uuid.uuid4().hex[:10]}"
    cluster.apply_one(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {"gpu-portal.io/test": "true"}},
        }
    )
    yield name
    cluster.force_delete_pods(name)
    cluster.delete("v1", "Namespace", name)


@pytest.fixture
def silent_class(cluster):
    """A StorageClass whose provisioner does not run: its claims stay Pending."""
    name = f"nowhere-{uuid.uuid4().hex[:8]}"
    cluster.apply_one(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": "nowhere.example.org",
            "volumeBindingMode": "Immediate",
        }
    )
    yield name
    cluster.delete("storage.k8s.io/v1", "StorageClass", name)


@pytest.fixture
def redis(settings):
    return redis_lib.Redis.from_url(settings.REDIS_URL)


def _database_url(process):
    """The test database, for a process the tests start, named in PostgreSQL's session list."""
    db = settings.DATABASES["default"]
    name = f"tests-{process}"
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}?application_name={name}"


@pytest.fixture(scope="session", autouse=True)
def _nobody_left_on_the_test_database(django_db_setup, django_db_blocker):
    """Every process the tests started is gone before the test database is dropped: their
    sessions may take a moment to end (waited for), and any left are named, with what they
    were doing, instead of pytest-django's bare "being accessed by other users"."""
    yield
    if not connections["default"].settings_dict["NAME"].startswith(TEST_DATABASE_PREFIX):
        return  # no test used a database: the one configured is the portal's own, not theirs
    with django_db_blocker.unblock(), connections["default"].cursor() as cursor:
        deadline, left = time.monotonic() + 30, []
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT pid, application_name, state, left(query, 120) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            left = cursor.fetchall()
            if not left:
                return
            time.sleep(0.5)
    warnings.warn(f"sessions still on the test database after 30 s: {left}", stacklevel=1)


def start_worker(log_path, *, beat=False, **env_overrides):
    """A real Celery worker process on the test database and the test Redis database; with
    beat=True it also runs the periodic resyncs, as `celery beat` would."""
    env = {
        **os.environ,
        "DATABASE_URL": _database_url("worker"),
        "REDIS_URL": settings.REDIS_URL,
        "KUBECONFIG": settings.KUBECONFIG,
        "DEBUG": "true",
        "RECONCILE_DEDUP_SECONDS": str(settings.RECONCILE_DEDUP_SECONDS),
        **env_overrides,
    }
    extra = ["-B", "-s", str(log_path.with_suffix(".schedule"))] if beat else []
    proc = processes.start(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "portal",
            "worker",  # the pool and its threads as deployed (settings)
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "info",
            *extra,
        ],
        log=log_path,
        env=env,
    )
    try:
        processes.wait_ready(
            proc, lambda: "ready." in log_path.read_text(), what="the worker", log=log_path
        )
    except BaseException:
        processes.stop(proc)
        raise
    return proc


@contextlib.contextmanager
def worker_process(log_path, *, beat=False, **env_overrides):
    """A real worker for the block, stopped afterwards whatever happened."""
    proc = start_worker(log_path, beat=beat, **env_overrides)
    try:
        yield proc
    finally:
        processes.stop(proc)


class SessionWorker:
    """The session's worker process, started on first use and again after a test stopped it."""

    def __init__(self, log_dir):
        self.log_dir, self.proc, self.starts = log_dir, None, 0

    def ensure(self):
        if self.proc is None or self.proc.poll() is not None:
            self.starts += 1
            self.proc = start_worker(self.log_dir / f"worker-{self.starts}.log")
        return self.proc

    def stop(self):
        processes.stop(self.proc)


@pytest.fixture(scope="session")
def session_worker(django_db_setup, cluster, tmp_path_factory):
    worker = SessionWorker(tmp_path_factory.mktemp("worker"))
    yield worker
    worker.stop()


@pytest.fixture
def queued_tasks(transactional_db):
    """Tasks go through Redis for this test, to whichever worker consumes them."""
    celery_app.conf.task_always_eager = False
    yield
    celery_app.conf.task_always_eager = True


@pytest.fixture
def worker(session_worker, queued_tasks):
    """Tasks go through Redis to the session's real worker for this test."""
    return session_worker.ensure()


@pytest.fixture(scope="session")
def router_port(cluster):
    """The real router (Traefik) watching the local API server."""
    from tests import router

    with router.router(settings.KUBECONFIG) as port:
        yield port


@pytest.fixture(scope="session")
def upstream(tmp_path_factory):
    """(address, port) of the echo app that plays a job's pod behind the router."""
    from tests import router

    if os.geteuid() != 0:
        pytest.fail("the router tests create a network namespace: run them as root (CI does)")
    with router.upstream(tmp_path_factory.mktemp("upstream")) as address:
        yield address


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def chromium():
    """Debian's Chromium, headless, driven by Playwright (no browser download)."""
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread; the ORM calls the tests make
    # between browser steps are still synchronous.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()
        # While Playwright's loop runs, Django keeps the thread's connections apart (as an
        # async context's): the tests' connection from then on is closed now, or it outlives
        # the session and the test database cannot be dropped.
        connections.close_all()


@pytest.fixture
def page(chromium, tmp_path):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    page.screenshot(path=tmp_path / "last.png", full_page=True)
    context.close()


def sign_in(page, base_url, username, password):
    page.goto(f"{base_url}/accounts/login/")
    page.fill("#id_login", username)
    page.fill("#id_password", password)
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


@pytest.fixture
def collector(cluster, settings, tmp_path):
    env = {
        "DATABASE_URL": _database_url("collector"),
        "REDIS_URL": settings.REDIS_URL,
        # Its own account's, where a test runs the portal as the chart's accounts (test_rbac).
        "KUBECONFIG": os.environ.get("TEST_COLLECTOR_KUBECONFIG") or settings.KUBECONFIG,
        "DEBUG": "true",
    }
    store._redis().delete(store.KEY, store.HISTORY_KEY)
    args = [sys.executable, "manage.py", "collect_cluster", "--interval", "0.2"]
    args += ["--history-interval", "1"]
    with processes.running(
        args,
        log=tmp_path / "collector.log",
        env=env,
        ready=store.read,
        what="the collector's first snapshot",
        stop_signal=signal.SIGINT,
    ) as proc:
        yield proc
