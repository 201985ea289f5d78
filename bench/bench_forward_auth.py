"""Requests/s and p99 at 50 connections through nginx to an upstream, same machine, same run:
(a) no auth; (b) auth_request to a no-op auth server (keep-alive): the ceiling of any auth
server; (c) the portal's forward-auth (gunicorn, 2 workers) without nginx's auth cache;
(d) with nginx's auth cache keyed on the session cookie and host, as ingress-nginx renders
auth-cache-key / auth-cache-duration. Targets on 2 cores: (d) >= 80% of (a); (c) >= 2,000
requests/s with p99 < 40 ms. Then: how long a revoked membership keeps working behind (d)."""

import re
import subprocess
import sys
import time
import uuid

import requests
from common import ROOT, setup_django, start

setup_django()
sys.path.insert(0, str(ROOT / "hack"))

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from nginx_harness import Nginx, free_port  # noqa: E402

from jobs import services as job_services  # noqa: E402
from jobs.models import Job, JobTemplate  # noqa: E402
from tenants.choices import Role  # noqa: E402
from tenants.models import AuditEvent, Membership, Tenant  # noqa: E402

DURATION, CONNECTIONS = "10s", 50


def wrk(url, cookie):
    out = subprocess.run(
        [
            "wrk",
            "-t2",
            f"-c{CONNECTIONS}",
            f"-d{DURATION}",
            "--latency",
            "-H",
            f"Cookie: sessionid={cookie}",
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 0.001, "ms": 1, "s": 1000}[p99.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rate, float(p99.group(1)) * scale, int(non2xx.group(1)) if non2xx else 0


def setup():
    call_command("seed_templates", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench-user")
    user.set_password("bench-password")
    user.save()
    tenant = Tenant.objects.create(
        slug=f"bench-fa-{uuid.uuid4().hex[:6]}", display_name="B", gpu_quota=8
    )
    Membership.objects.create(tenant=tenant, user=user, role=Role.RESEARCHER)
    version = JobTemplate.objects.get(name="jupyter-ssh", tenant__isnull=True).latest
    job, _ = job_services.launch_job(
        tenant, user, actor=user, template_version=version, name="bench-nb"
    )
    return tenant, user, job


def login(nginx):
    http = requests.Session()
    http.get(f"{nginx.url}/accounts/login/", timeout=10)
    http.post(
        f"{nginx.url}/accounts/login/",
        timeout=10,
        data={
            "csrfmiddlewaretoken": http.cookies["csrftoken"],
            "login": "bench-user",
            "password": "bench-password",
        },
        headers={"Referer": f"{nginx.url}/accounts/login/"},
    )
    return http.cookies["sessionid"]


def revocation_delay(nginx, url, cookie, tenant, user):
    """Seconds from removing the membership until nginx (with its auth cache) refuses."""
    first = requests.get(url, cookies={"sessionid": cookie}, timeout=10)
    assert first.status_code == 200, (first.status_code, first.text[:200])
    Membership.objects.filter(tenant=tenant, user=user).delete()
    started = time.monotonic()
    while requests.get(url, cookies={"sessionid": cookie}, timeout=10).status_code == 200:
        time.sleep(0.25)
        if time.monotonic() - started > 90:
            return float("inf")
    return time.monotonic() - started


def main():
    tenant, user, job = setup()
    port = free_port()
    web, _ = start(
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
        "bench-auth-web.log",
    )
    time.sleep(3)
    plain, cached = Nginx(f"127.0.0.1:{port}"), Nginx(f"127.0.0.1:{port}", cache=True)
    try:
        cookie = login(plain)
        path = f"/jobs/{tenant.slug}/{job.name}/jupyter/"
        assert (
            requests.get(f"{plain.url}{path}", cookies={"sessionid": cookie}, timeout=10).text
            == "user=bench-user\n"
        )
        results = {
            "a": wrk(f"{plain.url}/open/x", cookie),
            "b": wrk(f"{plain.url}/noop/x", cookie),
            "c": wrk(f"{plain.url}{path}", cookie),
            "d": wrk(f"{cached.url}{path}", cookie),
        }
        delay = revocation_delay(cached, f"{cached.url}{path}", cookie, tenant, user)
    finally:
        plain.stop()
        cached.stop()
        web.terminate()
        Job.objects.filter(pk=job.pk).delete()
        AuditEvent.objects.filter(tenant=tenant).delete()
        tenant.delete()
    names = {
        "a": "no auth",
        "b": "auth_request to a no-op server",
        "c": "portal forward-auth",
        "d": "portal forward-auth + nginx auth cache",
    }
    base = results["a"][0]
    for key, (rate, p99, errors) in results.items():
        print(
            f"({key}) {names[key]}: {rate:,.0f} req/s, p99 {p99:.1f} ms, "
            f"{rate / base:.0%} of (a), non-2xx {errors}"
        )
    print("targets: (d) >= 80% of (a); (c) >= 2,000 req/s with p99 < 40 ms")
    print(f"a removed membership stopped working behind (d) after {delay:.1f} s (target <= 30 s)")


if __name__ == "__main__":
    main()
