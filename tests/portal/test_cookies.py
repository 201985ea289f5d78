"""The portal's own cookies cannot be planted by a job app on a sibling domain."""

import json
import os
import subprocess
import sys

from tests.processes import ROOT


def cookie_settings(**env):
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.SESSION_COOKIE_NAME, s.CSRF_COOKIE_NAME, s.SESSION_COOKIE_SECURE]))"
    )
    environ = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", **env}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_over_https_the_portals_cookies_are_host_only_by_name():
    """A job app at x.endpoints.example.org may set a cookie for all of example.org, which the
    browser then sends to portal.example.org too; browsers refuse a __Host- cookie with a
    Domain, so it cannot stand in for the portal's session or CSRF token."""
    secure = cookie_settings(
        SESSION_COOKIE_SECURE="true",
        PORTAL_URL="https://portal.example.org",
        ENDPOINT_WILDCARD_DOMAIN="endpoints.example.org",
    )
    assert secure == ["__Host-sessionid", "__Host-csrftoken", True]
    # Plain HTTP (a laptop's make run): browsers take __Host- cookies over HTTPS only.
    plain = cookie_settings(SESSION_COOKIE_SECURE="false")
    assert plain == ["sessionid", "csrftoken", False]
