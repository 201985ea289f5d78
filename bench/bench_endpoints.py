"""Job endpoints through the real router (Traefik), same machine, same run, same upstream:
(a) no auth; (b) ForwardAuth to a no-op auth server (nginx `return 200`): the router's own cost
of asking anyone; (c) the portal's forward-auth (`manage.py serve`: granian, 2 workers, the
WSGI fast path) with
an endpoint cookie; (d) the same with a bearer token. The upstream is nginx in a network
namespace of its own, so the app is never the bottleneck.

Goals: (c) at least 50% of (b)'s requests/s, and p99 latency added by the portal over (b)
under 5 ms (measured with one connection, where queueing does not hide it). Then: how long a
removed membership keeps its endpoint cookie working, with every cache on."""

import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests
from common import ROOT, setup_django, start, stop

setup_django()
sys.path.insert(0, str(ROOT / "hack" / "router"))

import stand_in  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402

from accounts.models import ApiToken  # noqa: E402
from core.cluster import get_cluster  # noqa: E402
from jobs import forward_auth  # noqa: E402
from jobs import services as job_services  # noqa: E402
from jobs.models import Endpoint, Job  # noqa: E402
from k8s_adapters.routing import TRAEFIK_API  # noqa: E402
from portal.celery import app as celery_app  # noqa: E402
from tenants import services as tenant_services  # noqa: E402
from tenants.choices import Role  # noqa: E402
from tenants.models import AuditEvent, Membership, Tenant  # noqa: E402

ROUTER = 18080
WEB_PORT, NOOP_PORT, UPSTREAM_PORT = 18110, 18111, 18112
DURATION, CONNECTIONS = "10s", 50
WEB_ARGS = ["--workers", "2"]  # as `make run` serves it


def wrk(host, connections, headers=()):
    args = ["wrk", f"-t{min(2, connections)}", f"-c{connections}", f"-d{DURATION}", "--latency"]
    args += ["-H", f"Host: {host}:{ROUTER}"]
    for header in headers:
        args += ["-H", header]
    out = subprocess.run(
        [*args, f"http://127.0.0.1:{ROUTER}/"], capture_output=True, text=True, check=True
    ).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    latency = {}
    for pct in ("50", "99"):
        value, unit = re.search(rf"{pct}%\s+([\d.]+)(us|ms|s)", out).groups()
        latency[pct] = float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rate": rate, **latency, "errors": int(errors.group(1)) if errors else 0}


NGINX_CONF = """
worker_processes 1; pid {prefix}/nginx.pid; error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{ access_log off; keepalive_requests 100000;
  client_body_temp_path {prefix}/body; proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fcgi; uwsgi_temp_path {prefix}/uwsgi; scgi_temp_path {prefix}/scgi;
  server {{ listen {listen}; location / {{ return 200 "ok\\n"; }} }} }}
"""


def nginx(listen, netns=None):
    """nginx answering 200 to everything, as the no-op auth server or the upstream app."""
    prefix = Path(tempfile.mkdtemp(prefix="bench-nginx-"))
    prefix.chmod(0o755)
    (prefix / "nginx.conf").write_text(NGINX_CONF.format(prefix=prefix, listen=listen))
    args = ["nginx", "-g", "daemon off;", "-c", str(prefix / "nginx.conf"), "-p", str(prefix)]
    if netns:
        args = ["ip", "netns", "exec", netns, *args]
    return subprocess.Popen(args, start_new_session=True)  # a group of its own: see stop()


def route(namespace, name, host, middleware=None):
    """A plain Traefik route to the upstream (for (a) and (b))."""
    rule = {"kind": "Rule", "match": f"Host(`{host}`)"}
    rule["services"] = [{"name": "bench-upstream", "port": 80}]
    if middleware:
        rule["middlewares"] = [{"name": middleware}]
    return {
        "apiVersion": TRAEFIK_API,
        "kind": "IngressRoute",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"routes": [rule]},
    }


def upstream_objects(namespace, address):
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "bench-upstream", "namespace": namespace},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": UPSTREAM_PORT}]},
    }
    noop = {
        "apiVersion": TRAEFIK_API,
        "kind": "Middleware",
        "metadata": {"name": "noop-auth", "namespace": namespace},
        "spec": {"forwardAuth": {"address": f"http://127.0.0.1:{NOOP_PORT}/"}},
    }
    return [service, stand_in.endpoint_slice(service, address, UPSTREAM_PORT), noop]


def setup():
    admin, _ = get_user_model().objects.get_or_create(username="bench-admin", is_staff=True)
    user, _ = get_user_model().objects.get_or_create(username="bench-user")
    tenant = tenant_services.create_tenant(
        actor=admin, slug=f"bench-ep-{uuid.uuid4().hex[:6]}", display_name="B", gpu_quota=8
    )
    Membership.objects.create(tenant=tenant, user=user, role=Role.RESEARCHER)
    spec = {
        "image": "python:3.12",
        "tasks": [{"name": "main", "replicas": 1}],
        "expose": [{"name": "web", "task": "main", "container_port": 8000}],
    }
    job, _ = job_services.launch_job(tenant, user, actor=user, spec_data=spec, name="bench")
    return tenant, user, job


def wait_ok(host, headers):
    deadline = time.monotonic() + 60
    while True:
        answer = requests.get(
            f"http://127.0.0.1:{ROUTER}/",
            headers={"Host": f"{host}:{ROUTER}", **headers},
            timeout=10,
        )
        if answer.status_code == 200:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{host}: {answer.status_code} {answer.text[:200]}")
        time.sleep(0.3)


def revocation_delay(host, cookie, tenant, user):
    """Seconds from removing the membership until the router refuses the endpoint cookie."""
    wait_ok(host, {"Cookie": cookie})
    Membership.objects.filter(tenant=tenant, user=user).delete()
    started = time.monotonic()
    url, headers = f"http://127.0.0.1:{ROUTER}/", {"Host": f"{host}:{ROUTER}", "Cookie": cookie}
    while requests.get(url, headers=headers, timeout=10).status_code == 200:
        time.sleep(0.25)
        if time.monotonic() - started > 90:
            return float("inf")
    return time.monotonic() - started


def measure(endpoint, cookie, token, namespace):
    hosts = {"a": f"a.{namespace}.bench.localhost", "b": f"b.{namespace}.bench.localhost"}
    cases = {
        "a": (hosts["a"], ()),
        "b": (hosts["b"], ()),
        "c": (endpoint.host, (f"Cookie: {cookie}",)),
        "d": (endpoint.host, (f"Authorization: Bearer {token}",)),
    }
    for host, headers in cases.values():
        wait_ok(host, dict(h.split(": ", 1) for h in headers))
    return {
        key: {"loaded": wrk(host, CONNECTIONS, headers), "single": wrk(host, 1, headers)}
        for key, (host, headers) in cases.items()
    }


def main():
    celery_app.conf.task_always_eager = True  # reconcile inline: no worker in this benchmark
    settings.PORTAL_URL = settings.PORTAL_INTERNAL_URL = f"http://127.0.0.1:{WEB_PORT}"
    settings.ENDPOINT_SCHEME, settings.ENDPOINT_PORT = "http", ROUTER
    settings.ROUTING_DRIVER = "traefik"
    tenant, user, job = setup()
    cluster = get_cluster()
    env = {
        "PORTAL_URL": settings.PORTAL_URL,
        "ENDPOINT_SCHEME": "http",
        "ENDPOINT_PORT": str(ROUTER),
        "REDIS_URL": settings.REDIS_URL,
    }
    web, _ = start(
        [sys.executable, "manage.py", "serve", "--bind", f"127.0.0.1:{WEB_PORT}", *WEB_ARGS],
        "bench-endpoints-web.log",
        **env,
    )
    noop = nginx(f"127.0.0.1:{NOOP_PORT}")
    try:
        with stand_in.upstream(Path(tempfile.mkdtemp()) / "echo.log", index=18) as (address, _):
            app = nginx(f"{address}:{UPSTREAM_PORT}", netns="gpp-up18")
            try:
                ns = tenant.namespace
                cluster.apply(upstream_objects(ns, address))
                cluster.apply(
                    [
                        route(ns, "bench-a", f"a.{ns}.bench.localhost"),
                        route(ns, "bench-b", f"b.{ns}.bench.localhost", "noop-auth"),
                    ]
                )
                endpoint = Endpoint.objects.get(job=job, name="web")
                service = cluster.get("v1", "Service", endpoint.service_name, ns)
                cluster.apply_one(stand_in.endpoint_slice(service, address, UPSTREAM_PORT))
                facts = forward_auth._load_endpoint(endpoint.pk)
                value = forward_auth.issue_cookie(facts, forward_auth._load_user(user.pk))
                cookie = f"{forward_auth.cookie_name()}={value}"
                token = ApiToken.issue(user, "bench")[1]
                results = measure(endpoint, cookie, token, ns)
                delay = revocation_delay(endpoint.host, cookie, tenant, user)
            finally:
                stop(app)
    finally:
        stop(noop, web)
        Job.objects.filter(pk=job.pk).delete()
        cluster.delete("v1", "Namespace", tenant.namespace)
        cluster.delete("scheduling.volcano.sh/v1beta1", "Queue", tenant.queue_name)
        AuditEvent.objects.filter(tenant=tenant).delete()
        Tenant.objects.filter(pk=tenant.pk).delete()
    report(results, delay)


NAMES = {
    "a": "no auth",
    "b": "ForwardAuth to a no-op server",
    "c": "portal forward-auth, endpoint cookie",
    "d": "portal forward-auth, bearer token",
}


def report(results, delay):
    base = results["b"]
    for key, result in results.items():
        loaded, single = result["loaded"], result["single"]
        print(
            f"({key}) {NAMES[key]}: {CONNECTIONS} connections {loaded['rate']:,.0f} req/s "
            f"(p99 {loaded['99']:.1f} ms, {loaded['rate'] / base['loaded']['rate']:.0%} of (b), "
            f"non-2xx {loaded['errors']}); 1 connection p50 {single['50']:.2f} ms "
            f"p99 {single['99']:.2f} ms, added over (b) "
            f"{single['99'] - base['single']['99']:+.2f} ms"
        )
    print("goals: (c) >= 50% of (b) req/s; p99 added over (b) < 5 ms")
    print(f"a removed membership lost its endpoint cookie after {delay:.1f} s (limit 30 s)")


if __name__ == "__main__":
    main()
