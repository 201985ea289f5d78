"""The real portal served by gunicorn behind real nginx (forward-auth), with a real worker."""

import os
import subprocess
import sys
import time

import pytest
import requests
from django.conf import settings

from portal.models import ApiToken
from tests.conftest import ROOT, _database_url
from tests.jobs.conftest import team, templates  # noqa: F401  (shared fixtures)

sys.path.insert(0, str(ROOT / "hack"))
from nginx_harness import Nginx, free_port  # noqa: E402


@pytest.fixture(scope="session")
def served(django_db_setup, cluster, tmp_path_factory):
    """(portal URL through nginx, gunicorn URL): gunicorn on the test database, nginx in front
    routing / to the portal and /jobs/ through forward-auth."""
    nginx_port, port = free_port(), free_port()
    log = (tmp_path_factory.mktemp("gunicorn") / "web.log").open("w")
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "KUBECONFIG": settings.KUBECONFIG,
        "DEBUG": "true",
        "PORTAL_URL": f"http://127.0.0.1:{nginx_port}",
        "FORWARD_AUTH_CACHE_SECONDS": "0",
    }
    web = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "portal.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            break
        except requests.ConnectionError:
            assert web.poll() is None, "gunicorn exited"
            assert time.monotonic() < deadline, "gunicorn did not start"
            time.sleep(0.2)
    proxy = Nginx(f"127.0.0.1:{port}", port=nginx_port)
    yield proxy.url, f"http://127.0.0.1:{port}"
    proxy.stop()
    web.terminate()
    web.wait(10)


@pytest.fixture
def token(team, worker):  # noqa: F811  (the shared fixture, requested by name)
    """bob's personal API token (the worker makes tasks go through Redis to a real worker)."""
    return ApiToken.issue(team["bob"], "sdk")[1]
