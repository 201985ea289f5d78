"""The real portal served by `manage.py serve`, a real worker, and the real router in front of job
endpoints."""

import sys

import pytest
import requests
from django.conf import settings

from accounts.models import ApiToken
from tests import processes
from tests.conftest import _database_url, worker_process
from tests.jobs.conftest import team, templates  # noqa: F401  (shared fixtures)
from tests.router import ROUTER_PORT


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def portal_env():
    """How the portal's processes (web and worker) are configured for these tests."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    return {
        "DATABASE_URL": _database_url("sdk"),
        "REDIS_URL": settings.REDIS_URL,
        "KUBECONFIG": settings.KUBECONFIG,
        "DEBUG": "true",
        "PORTAL_URL": url,
        "PORTAL_INTERNAL_URL": url,
        "ENDPOINT_SCHEME": "http",
        "ENDPOINT_PORT": str(ROUTER_PORT),
        "RECONCILE_DEDUP_SECONDS": str(settings.RECONCILE_DEDUP_SECONDS),
    }


@pytest.fixture(scope="session")
def served(django_db_setup, cluster, portal_env, tmp_path_factory):
    """The portal's URL: `manage.py serve` on the test database."""
    url = portal_env["PORTAL_URL"]
    args = [sys.executable, "manage.py", "serve", "--bind", url.split("://")[1]]
    with processes.running(
        args,
        log=tmp_path_factory.mktemp("the web server") / "web.log",
        env=portal_env,
        ready=lambda: requests.get(f"{url}/healthz", timeout=5).ok,
        what="the web server",
    ):
        yield url


@pytest.fixture
def token(team, session_worker, queued_tasks, portal_env, tmp_path):  # noqa: F811
    """bob's personal API token; tasks go through Redis to a worker configured like the web."""
    session_worker.stop()  # only this worker, with the web's settings, takes these tasks
    with worker_process(tmp_path / "worker.log", **portal_env):
        yield ApiToken.issue(team["bob"], "sdk")[1]
