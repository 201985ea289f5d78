"""The real portal served by gunicorn behind real nginx (forward-auth), with a real worker."""

import sys

import pytest
import requests
from django.conf import settings

from accounts.models import ApiToken
from tests import processes
from tests.conftest import ROOT, _database_url
from tests.jobs.conftest import team, templates  # noqa: F401  (shared fixtures)

sys.path.insert(0, str(ROOT / "hack"))
from nginx_harness import Nginx, free_port  # noqa: E402


@pytest.fixture(scope="session")
def served(django_db_setup, cluster, tmp_path_factory):
    """(portal URL through nginx, gunicorn URL): gunicorn on the test database, nginx in front
    routing / to the portal and /jobs/ through forward-auth."""
    nginx_port, port = free_port(), free_port()
    env = {
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "KUBECONFIG": settings.KUBECONFIG,
        "DEBUG": "true",
        "PORTAL_URL": f"http://127.0.0.1:{nginx_port}",
        "FORWARD_AUTH_CACHE_SECONDS": "0",
    }
    web_url = f"http://127.0.0.1:{port}"
    args = [sys.executable, "-m", "gunicorn", "portal.wsgi:application"]
    args += ["--bind", f"127.0.0.1:{port}", "--workers", "2"]
    with processes.running(
        args,
        log=tmp_path_factory.mktemp("gunicorn") / "web.log",
        env=env,
        ready=lambda: requests.get(f"{web_url}/healthz", timeout=5).ok,
        what="gunicorn",
    ):
        proxy = Nginx(f"127.0.0.1:{port}", port=nginx_port)
        try:
            yield proxy.url, web_url
        finally:
            proxy.stop()


@pytest.fixture
def token(team, worker):  # noqa: F811  (the shared fixture, requested by name)
    """bob's personal API token (the worker makes tasks go through Redis to a real worker)."""
    return ApiToken.issue(team["bob"], "sdk")[1]
