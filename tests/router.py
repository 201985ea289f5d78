"""The real router in the test bed: Traefik (hack/router.sh) watching the local API server, and
an upstream app standing in for a job's pod. The app runs in a network namespace the tests
create (EndpointSlices refuse loopback addresses), and echoes the headers it received."""

import contextlib
import http.cookiejar
import os
import subprocess
import sys

import requests

from tests import processes
from tests.processes import ROOT

sys.path.insert(0, str(ROOT / "hack" / "router"))
import stand_in  # noqa: E402  (the test bed's stand-in app, shared with `make run`)

ROUTER_PORT = int(os.environ.get("ROUTER_HTTP_PORT", "18080"))
ROUTER_PING = int(os.environ.get("ROUTER_PING_PORT", "18082"))


def router_env(kubeconfig: str) -> dict[str, str]:
    return {**os.environ, "KUBECONFIG": kubeconfig}


def router_running() -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{ROUTER_PING}/ping", timeout=2).ok
    except requests.RequestException:
        return False


@contextlib.contextmanager
def router(kubeconfig: str):
    """The router `make setup` started, or one started (and stopped) here."""
    script = str(ROOT / "hack" / "router.sh")
    started = False
    try:
        if not router_running():
            started = True
            processes.hurry_late_builds()
            subprocess.run(["bash", script, "start"], env=router_env(kubeconfig), check=True)
        yield ROUTER_PORT
    finally:
        if started:
            subprocess.run(["bash", script, "stop"], env=router_env(kubeconfig), check=False)


def upstream(tmp_path):
    """(address, port) of the echo app playing the job's pod (torn down after)."""
    return stand_in.upstream(tmp_path / "echo.log")


endpoint_slice = stand_in.endpoint_slice


class RouterClient:
    """Requests to the router as a client on the network would send them: to the router's
    address, naming the endpoint's host in Host."""

    def __init__(self, port: int = ROUTER_PORT):
        self.port = port
        self.http = requests.Session()
        # Each request carries exactly the credentials a test gives it: keep no cookies.
        self.http.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))

    def get(self, host: str, path: str = "/", **headers) -> requests.Response:
        headers = {"Host": f"{host}:{self.port}", **headers}
        return self.http.get(
            f"http://127.0.0.1:{self.port}{path}",
            headers=headers,
            allow_redirects=False,
            timeout=30,
        )
