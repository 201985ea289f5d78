"""Job endpoints through the real router (Traefik) with every cache on: the handshake that gives a
browser an endpoint cookie, who may pass with which credential, what the job's app receives,
WebSocket upgrades, headers and paths that lie, and how fast each revocation takes effect."""

import base64
import json
import secrets
import socket
import time
import uuid
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from accounts.models import ApiToken
from jobs import endpoints, services
from jobs.choices import JobState
from jobs.models import Endpoint
from k8s_adapters.tenant import QUEUE_API
from tenants import services as tenant_services
from tenants.choices import Role
from tenants.models import Membership
from tests import router as bed
from tests.helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
TRAEFIK, GATEWAY = "traefik.io/v1alpha1", "gateway.networking.k8s.io/v1"
REVOCATION_LIMIT = 30  # seconds, with every cache on


@pytest.fixture
def routing(live_server, settings, router_port):
    """The portal as the router and browsers reach it; endpoints on the router's port."""
    settings.PORTAL_URL = settings.PORTAL_INTERNAL_URL = live_server.url
    settings.ENDPOINT_SCHEME, settings.ENDPOINT_PORT = "http", router_port
    settings.ROUTING_DRIVER = "traefik"
    return bed.RouterClient(router_port)


@pytest.fixture
def other(cluster, team, django_capture_on_commit_callbacks):
    """charlie's own tenant."""
    tenant = tenant_services.create_tenant(
        actor=team["admin"], slug=f"other-{uuid.uuid4().hex[:8]}", display_name="Other", gpu_quota=8
    )
    Membership.objects.create(tenant=tenant, user=team["charlie"], role=Role.RESEARCHER)
    yield tenant
    cluster.delete(QUEUE_API, "Queue", tenant.queue_name)
    cluster.delete("v1", "Namespace", tenant.namespace)


def launch(cluster, upstream, tenant, owner, name, *, private=False):
    """A job exposing `web` (HTTP), its Service backed by the echo app; returns the endpoint
    once the router serves its host."""
    spec = {
        "image": "python:3.12",
        "command": ["python", "-m", "http.server"],
        "tasks": [{"name": "main", "replicas": 1, "gpus": 0}],
        "expose": [{"name": "web", "task": "main", "container_port": 8000, "private": private}],
    }
    job, _ = services.launch_job(tenant, owner, actor=owner, spec_data=spec, name=name)
    endpoint = Endpoint.objects.get(job=job, name="web")
    service = wait_for(
        lambda: cluster.get("v1", "Service", endpoint.service_name, tenant.namespace),
        message="the endpoint's Service",
    )
    cluster.apply_one(bed.endpoint_slice(service, *upstream))
    return endpoint


def served(client, endpoint, token):
    """Wait until the router serves the endpoint's host all the way to the app: a new route
    takes up to a second, and a route loaded before its EndpointSlice answers 500 until the
    router's next reload."""
    auth = {"Authorization": f"Bearer {token}"}
    wait_for(
        lambda: client.get(endpoint.host, **auth).status_code == 200,
        timeout=60,
        message=f"the router to serve {endpoint.host}",
    )


def portal_session(user):
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def handshake(client, endpoint, user, path="/lab?x=1", session=None):
    """What a browser does on its first visit (signed in to the portal with `session`, or a
    session of its own): returns (its endpoint cookie, the answers)."""
    import requests

    first = client.get(endpoint.host, path, Accept="text/html")
    assert first.status_code == 302
    state = set_cookie(first)  # the browser keeps it for the endpoint's host
    assert state.startswith("gpp-state=")
    start = first.headers["Location"]
    back = requests.get(
        start,
        headers={"Cookie": f"sessionid={session or portal_session(user)}"},
        allow_redirects=False,
        timeout=30,
    )
    if back.status_code != 302:
        return None, (first, back)
    target = urlsplit(back.headers["Location"])
    assert target.netloc == f"{endpoint.host}:{client.port}"  # only this endpoint's own host
    landed = client.get(
        endpoint.host, f"{target.path}?{target.query}", Accept="text/html", Cookie=state
    )
    return set_cookie(landed), (first, back, landed)


def set_cookie(response):
    """The cookie an answer sets, as a browser sends it back."""
    name, _, rest = response.headers["Set-Cookie"].partition("=")
    return f"{name}={rest.split(';', 1)[0]}"


def echoed(response):
    """What the job's app received, as the echo app reports it."""
    assert response.status_code == 200, response.text[:300]
    data = response.json()
    return data["path"], {k.lower(): v for k, v in data["headers"]}


def test_a_browser_signs_in_through_the_portal_and_the_app_sees_only_its_identity(
    cluster, team, upstream, routing
):
    endpoint = launch(cluster, upstream, team["tenant"], team["bob"], "hs")
    served(routing, endpoint, ApiToken.issue(team["bob"], "t")[1])
    cookie, (first, back, landed) = handshake(routing, endpoint, team["bob"])
    assert first.headers["Location"].startswith(
        f"{routing_portal()}/auth/endpoint/{endpoint.pk}/start?next=%2Flab%3Fx%3D1&state="
    )
    assert landed.status_code == 302
    assert landed.headers["Location"] == "/lab?x=1"
    issued = landed.headers["Set-Cookie"]
    assert cookie.startswith("gpp-endpoint=")
    assert "HttpOnly" in issued
    assert "SameSite=Lax" in issued
    assert "Path=/" in issued
    assert "Domain" not in issued  # this host alone

    sent = f"{cookie}; app=1; sessionid=stolen; csrftoken=stolen"
    path, headers = echoed(routing.get(endpoint.host, "/lab?x=1", Cookie=sent))
    assert path == "/lab?x=1"
    assert headers["x-auth-request-user"] == "bob"
    assert headers["x-auth-request-groups"] == team["tenant"].slug
    assert headers["cookie"] == "app=1"  # no endpoint, session or CSRF cookie
    assert "authorization" not in headers

    # The code was for one use: replaying it gets nothing.
    returned = urlsplit(back.headers["Location"])
    replay = routing.get(
        endpoint.host, f"{returned.path}?{returned.query}", Cookie=set_cookie(first)
    )
    assert replay.status_code == 403


def test_a_sign_in_link_made_for_one_browser_signs_no_other_in(cluster, team, upstream, routing):
    """Login CSRF: mallory (a member too) starts the sign-in, stops before her code is used,
    and sends the link to bob. His browser, which never asked, is not signed in as her; nor is
    a browser already signed in to the endpoint, whatever code it is sent."""
    import requests

    endpoint = launch(cluster, upstream, team["tenant"], team["bob"], "csrf")
    served(routing, endpoint, ApiToken.issue(team["bob"], "t")[1])
    mallory = team["alice"]

    def code_for(user):
        first = routing.get(endpoint.host, "/", Accept="text/html")
        back = requests.get(
            first.headers["Location"],
            headers={"Cookie": f"sessionid={portal_session(user)}"},
            allow_redirects=False,
            timeout=30,
        )
        returned = urlsplit(back.headers["Location"])
        return f"{returned.path}?{returned.query}", set_cookie(first)

    link, _ = code_for(mallory)
    fresh = routing.get(endpoint.host, "/", Accept="text/html")  # bob's own state
    taken = routing.get(endpoint.host, link, Accept="text/html", Cookie=set_cookie(fresh))
    assert taken.status_code == 403
    assert "opened in another browser" in taken.text
    assert "Set-Cookie" not in taken.headers

    bobs_cookie, _ = handshake(routing, endpoint, team["bob"])
    link, _ = code_for(mallory)
    kept = routing.get(endpoint.host, link, Accept="text/html", Cookie=bobs_cookie)
    assert (kept.status_code, kept.headers["Location"]) == (302, "/")  # the code dropped
    assert "Set-Cookie" not in kept.headers
    seen = echoed(routing.get(endpoint.host, "/", Cookie=bobs_cookie))[1]
    assert seen["x-auth-request-user"] == "bob"


def test_identity_headers_a_client_spells_with_underscores_never_reach_the_app(
    cluster, team, upstream, routing
):
    """Some app servers read X_Auth_Request_User as X-Auth-Request-User (CGI names both
    HTTP_X_AUTH_REQUEST_USER): a member must not pass for another that way."""
    endpoint = launch(cluster, upstream, team["tenant"], team["bob"], "under")
    token = ApiToken.issue(team["bob"], "t")[1]
    served(routing, endpoint, token)
    forged = {
        "X_Auth_Request_User": "alice",
        "X-Auth_Request-User": "alice",
        "X_Auth_Request_Email": "alice@example.org",
        "X-Auth-Request_Groups": "admins",
    }
    _, seen = echoed(routing.get(endpoint.host, "/", Authorization=f"Bearer {token}", **forged))
    assert seen["x-auth-request-user"] == "bob"
    assert not [name for name in seen if "_" in name], seen


def routing_portal():
    from django.conf import settings

    return settings.PORTAL_URL


MATRIX = [
    # (who, credential, status on the public endpoint, status on bob's private endpoint)
    ("anonymous", "none", 401, 401),
    ("bob", "token", 200, 200),
    ("bob", "cookie", 200, 200),
    ("alice", "token", 200, 403),
    ("dave", "token", 200, 403),
    ("dave", "cookie", 200, None),  # the private endpoint gives dave no cookie at all
    ("charlie", "token", 403, 403),
    ("admin", "token", 403, 403),  # platform admins are not members of every tenant
    ("bob", "revoked", 401, 401),
    ("bob", "expired", 401, 401),
    ("bob", "garbage", 401, 401),
]


def credential(client, endpoint, user, kind):
    if kind == "none":
        return {}
    if kind == "cookie":
        cookie, _ = handshake(client, endpoint, user)
        return {"Cookie": cookie} if cookie else None
    if kind == "garbage":
        return {"Authorization": "Bearer gpp_0000_" + secrets.token_urlsafe(8)}
    token, raw = ApiToken.issue(user, kind)
    if kind == "revoked":
        ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    if kind == "expired":
        ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(1))
    return {"Authorization": f"Bearer {raw}"}


def test_the_access_matrix_through_the_router(cluster, team, upstream, routing):
    admin = get_user_model().objects.get(username="admin")
    public = launch(cluster, upstream, team["tenant"], team["bob"], "pub")
    private = launch(cluster, upstream, team["tenant"], team["bob"], "priv", private=True)
    for endpoint in (public, private):
        served(routing, endpoint, ApiToken.issue(team["bob"], "t")[1])
    users = {**{k: v for k, v in team.items() if k != "tenant"}, "admin": admin}
    failures = []
    for who, kind, on_public, on_private in MATRIX:
        for endpoint, expected in ((public, on_public), (private, on_private)):
            headers = credential(routing, endpoint, users.get(who), kind)
            if headers is None:
                assert expected is None, f"{who}/{kind} got no cookie for {endpoint.name}"
                continue
            answer = routing.get(endpoint.host, "/x", **headers)
            if answer.status_code != expected:
                failures.append((who, kind, endpoint.job.name, answer.status_code, expected))
            if answer.status_code == 200:
                _, seen = echoed(answer)
                assert seen["x-auth-request-user"] == who
                assert "authorization" not in seen
                assert "cookie" not in seen
    assert failures == []


def test_requests_that_lie_are_judged_by_the_route_they_take(
    cluster, team, other, upstream, routing
):
    mine = launch(cluster, upstream, team["tenant"], team["bob"], "mine")
    theirs = launch(cluster, upstream, other, team["charlie"], "theirs")
    bob, charlie = ApiToken.issue(team["bob"], "t")[1], ApiToken.issue(team["charlie"], "t")[1]
    served(routing, mine, bob)
    served(routing, theirs, charlie)
    bobs_cookie, _ = handshake(routing, mine, team["bob"])

    lies = {
        "X-Forwarded-Host": mine.host,
        "X-Original-URL": f"http://{mine.host}/",
        "X-Forwarded-Uri": "/",
        "X-Auth-Request-User": "bob",
    }
    # charlie, claiming in every header to be on bob's endpoint, is still on his own route...
    answer = routing.get(theirs.host, "/", Authorization=f"Bearer {charlie}", **lies)
    assert echoed(answer)[1]["x-auth-request-user"] == "charlie"
    # ...and bob's endpoint refuses him whatever he claims.
    lies["X-Forwarded-Host"] = lies["X-Original-URL"] = theirs.host
    assert routing.get(mine.host, "/", Authorization=f"Bearer {charlie}", **lies).status_code == 403
    # bob's cookie is bound to his endpoint: sent to another host it opens nothing.
    assert routing.get(theirs.host, "/", Cookie=bobs_cookie).status_code == 401
    for path in ("/%2e%2e/%2e%2e/", "/..%2f..%2ftheirs", "//theirs/../", "/a/./../b"):
        assert routing.get(mine.host, path, Authorization=f"Bearer {charlie}").status_code == 403
        assert (
            echoed(routing.get(mine.host, path, Cookie=bobs_cookie))[1]["x-auth-request-user"]
            == "bob"
        )


def websocket(port, host, **headers):
    """The status line of a WebSocket upgrade through the router, and the echo of one message."""
    key = base64.b64encode(secrets.token_bytes(16)).decode()
    lines = [
        "GET /ws HTTP/1.1",
        f"Host: {host}:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                break
            head += chunk
        status = head.split(b"\r\n", 1)[0].decode()
        if " 101 " not in status:
            return status, None
        payload, mask = b"hello", secrets.token_bytes(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        sock.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + masked)
        frame = sock.recv(4096)
        return status, frame[2 : 2 + frame[1]].decode()


def test_a_websocket_upgrade_is_authorized_at_the_upgrade(
    cluster, team, other, upstream, routing, router_port
):
    endpoint = launch(cluster, upstream, team["tenant"], team["bob"], "ws")
    bob = ApiToken.issue(team["bob"], "t")[1]
    served(routing, endpoint, bob)
    cookie, _ = handshake(routing, endpoint, team["bob"])
    status, echo = websocket(router_port, endpoint.host, Cookie=cookie)
    assert " 101 " in status
    assert echo == "echo: hello"
    charlie = ApiToken.issue(team["charlie"], "t")[1]
    assert " 403 " in websocket(router_port, endpoint.host, Authorization=f"Bearer {charlie}")[0]
    assert " 401 " in websocket(router_port, endpoint.host)[0]


def revoke(cause, team, endpoint, token):
    bob = team["bob"]
    if cause == "membership":
        Membership.objects.filter(user=bob, tenant=team["tenant"]).delete()
    elif cause == "token":
        ApiToken.objects.filter(user=bob).update(revoked_at=timezone.now())
    elif cause == "user":
        type(bob).objects.filter(pk=bob.pk).update(is_active=False)
    elif cause == "password":
        bob.set_password("a new password, changed after a leak")
        bob.save(update_fields=["password"])
    elif cause == "expiry":
        Endpoint.objects.filter(pk=endpoint.pk).update(expires_at=timezone.now())
    elif cause == "reclaim":
        endpoints.reclaim_now(endpoint, actor=team["admin"])


def refused(answer):
    """Refused by forward-auth, or sent to the portal's closed page once its route is gone."""
    closed = answer.status_code == 302 and "/endpoints/closed/" in answer.headers["Location"]
    return answer.status_code in (401, 403, 404) or closed


@pytest.mark.parametrize(
    ("cause", "credential_kind"),
    [
        ("membership", "cookie"),
        ("membership", "token"),
        ("token", "token"),
        ("user", "cookie"),
        ("password", "cookie"),
        ("expiry", "cookie"),
        ("reclaim", "token"),
    ],
)
def test_each_revocation_is_refused_within_30_seconds(
    cluster, team, upstream, routing, cause, credential_kind
):
    endpoint = launch(cluster, upstream, team["tenant"], team["bob"], f"rv-{cause[:5]}")
    token = ApiToken.issue(team["bob"], "t")[1]
    served(routing, endpoint, token)
    if credential_kind == "cookie":
        headers = {"Cookie": handshake(routing, endpoint, team["bob"])[0]}
    else:
        headers = {"Authorization": f"Bearer {token}"}
    assert routing.get(endpoint.host, "/", **headers).status_code == 200  # warm every cache
    revoked_at = time.monotonic()
    revoke(cause, team, endpoint, token)
    wait_for(
        lambda: refused(routing.get(endpoint.host, "/", **headers)),
        timeout=REVOCATION_LIMIT,
        interval=0.5,
        message=f"a refusal after the {cause} was revoked",
    )
    assert time.monotonic() - revoked_at < REVOCATION_LIMIT


def sign_out(session):
    """Sign the portal session out, as its browser's Sign out button does."""
    import re

    import requests

    browser = requests.Session()
    browser.cookies.set("sessionid", session)
    url = f"{routing_portal()}/accounts/logout/"
    page = browser.get(url, timeout=30).text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    answer = browser.post(
        url, data={"csrfmiddlewaretoken": token}, headers={"Referer": url}, timeout=30
    )
    assert answer.ok, answer.status_code


def test_signing_out_of_the_portal_ends_the_endpoint_access_of_that_browser(
    cluster, team, upstream, routing
):
    """On a shared machine, the next person must not keep the previous one's access to the
    apps they opened; another browser of the same person, still signed in, keeps its own."""
    endpoint = launch(cluster, upstream, team["tenant"], team["bob"], "so")
    served(routing, endpoint, ApiToken.issue(team["bob"], "t")[1])
    session = portal_session(team["bob"])
    shared = {"Cookie": handshake(routing, endpoint, team["bob"], session=session)[0]}
    other = {"Cookie": handshake(routing, endpoint, team["bob"])[0]}
    assert routing.get(endpoint.host, "/", **shared).status_code == 200
    assert routing.get(endpoint.host, "/", **other).status_code == 200
    signed_out_at = time.monotonic()
    sign_out(session)
    wait_for(
        lambda: refused(routing.get(endpoint.host, "/", **shared)),
        timeout=REVOCATION_LIMIT,
        interval=0.5,
        message="the signed-out browser's endpoint cookie to be refused",
    )
    assert time.monotonic() - signed_out_at < REVOCATION_LIMIT
    assert routing.get(endpoint.host, "/", **other).status_code == 200


def test_the_gateway_api_route_lets_members_in_and_keeps_others_out(
    cluster, team, upstream, routing, settings
):
    settings.ROUTING_DRIVER = "gateway-api"
    endpoint = launch(cluster, upstream, team["tenant"], team["bob"], "gw")
    bob = ApiToken.issue(team["bob"], "t")[1]
    served(routing, endpoint, bob)
    route = cluster.get(
        "gateway.networking.k8s.io/v1", "HTTPRoute", endpoint.service_name, team["tenant"].namespace
    )
    assert route is not None
    assert (
        cluster.get(
            "traefik.io/v1alpha1", "IngressRoute", endpoint.service_name, team["tenant"].namespace
        )
        is None
    )
    cookie, _ = handshake(routing, endpoint, team["bob"])
    assert echoed(routing.get(endpoint.host, "/", Cookie=cookie))[1]["x-auth-request-user"] == "bob"
    charlie = ApiToken.issue(team["charlie"], "t")[1]
    assert routing.get(endpoint.host, "/", Authorization=f"Bearer {charlie}").status_code == 403
    assert json.loads(routing.get(endpoint.host, "/", Authorization=f"Bearer {bob}").text)


def closed_target(answer, host):
    """Where the router's redirect of a request for `host` goes, on the portal: its path and
    query, after checking they name that host and nothing else. (The portal's own address in
    it is whatever the last worker to apply the fallback had; the test's is this test's.)"""
    assert answer.status_code == 302, answer.text[:300]
    target = urlsplit(answer.headers["Location"])
    assert (target.path, target.query) == ("/endpoints/closed/", f"host={host}")
    return f"{target.path}?{target.query}"


def closed_page(target, user=None, accept="text/html"):
    """The portal's page at `target`, as a browser (signed in as `user`, or not) or an API
    client sees it."""
    import requests

    cookies = {"sessionid": portal_session(user)} if user else {}
    url = f"{routing_portal()}{target}"
    return requests.get(url, headers={"Accept": accept}, cookies=cookies, timeout=30)


@pytest.fixture
def fallback(cluster, settings):
    """Applies the router's fallback for closed endpoints; removes what any driver left."""
    from jobs.tasks import ensure_router_fallback

    yield ensure_router_fallback
    for api, kind in ((TRAEFIK, "IngressRoute"), (TRAEFIK, "Middleware"), (GATEWAY, "HTTPRoute")):
        cluster.delete(api, kind, "gpu-portal-closed-endpoints", settings.ROUTER_NAMESPACE)


def test_a_closed_endpoints_address_sends_the_browser_to_the_portal_saying_why(
    cluster, team, upstream, routing, settings, fallback, django_capture_on_commit_callbacks
):
    """The router's fallback (its lowest-priority route, for the whole wildcard domain) sends an
    address no route serves to the portal's page, naming the host and nothing else: a path or
    query may hold the app's own token. Only who may see the job learns which job it was."""
    from tests.jobs.conftest import settle

    endpoint = launch(cluster, upstream, team["tenant"], team["bob"], "gone")
    bob = ApiToken.issue(team["bob"], "t")[1]
    served(routing, endpoint, bob)
    fallback()
    nowhere = f"nothing-here.{settings.ENDPOINT_WILDCARD_DOMAIN}"
    first = wait_for(
        lambda: (answer := routing.get(nowhere, "/lab?token=secret")).status_code == 302 and answer,
        timeout=30,
        message="the router to load its fallback route",
    )
    closed_target(first, nowhere)
    # A live endpoint keeps its own route, sign-in and all: the fallback never takes it.
    assert echoed(routing.get(endpoint.host, "/", Authorization=f"Bearer {bob}"))
    assert routing.get(endpoint.host, "/").status_code == 401
    # A form posted to a closed address is not resent to the portal (a 307 would carry its
    # body, a password say): the router refuses it itself.
    posted = routing.http.post(
        f"http://127.0.0.1:{routing.port}/login",
        headers={"Host": f"{nowhere}:{routing.port}"},
        data={"password": "hunter2"},
        allow_redirects=False,
        timeout=30,
    )
    assert posted.status_code == 404
    assert "Location" not in posted.headers
    anonymous = closed_page(closed_target(first, nowhere))
    assert anonymous.status_code == 404
    assert "Nothing is open at this address" in anonymous.text

    with django_capture_on_commit_callbacks(execute=True):
        services.cancel_job(endpoint.job, actor=team["bob"])
    settle(endpoint.job, JobState.CANCELLED)
    gone = wait_for(
        lambda: (
            (answer := routing.get(endpoint.host, "/lab?token=secret")).status_code == 302
            and answer
        ),
        timeout=30,
        message="the ended job's route to go",
    )
    where = closed_target(gone, endpoint.host)
    page = closed_page(where, team["bob"])
    assert page.status_code == 404
    assert "The endpoint web is closed" in page.text
    assert "It closed when its job gone ended (cancelled)." in page.text
    assert f'href="/tenants/{team["tenant"].slug}/jobs/gone/"' in page.text
    api = closed_page(where, team["bob"], accept="application/json")
    assert api.json()["detail"].startswith("The endpoint web of job gone: It closed when")
    for who in (team["charlie"], None):  # not a member, not signed in: nothing of the job
        page = closed_page(where, who)
        assert page.status_code == 404
        assert "Nothing is open at this address" in page.text
        assert "<strong>gone</strong>" not in page.text
        assert 'data-testid="job-link"' not in page.text

    # The Gateway API driver runs on Traefik too, with the same fallback: every endpoint's
    # HTTPRoute wins over it, as its IngressRoutes do.
    settings.ROUTING_DRIVER = "gateway-api"
    fallback()
    gateway = launch(cluster, upstream, team["tenant"], team["bob"], "gw-live")
    assert cluster.get(GATEWAY, "HTTPRoute", gateway.service_name, team["tenant"].namespace)
    served(routing, gateway, bob)
    assert routing.get(gateway.host, "/").status_code == 401  # its sign-in, not the fallback
    assert routing.get(nowhere, "/").status_code == 302


def test_a_starting_apps_address_answers_503_not_the_closed_page(
    cluster, team, upstream, routing, settings, fallback
):
    """A job's route exists from its launch, before any pod is ready: the router keeps it
    (Traefik's allowEmptyServices) and answers 503, rather than dropping it and letting the
    fallback say the endpoint is closed."""
    fallback()
    nowhere = f"nothing-here.{settings.ENDPOINT_WILDCARD_DOMAIN}"
    wait_for(lambda: routing.get(nowhere, "/").status_code == 302, timeout=30, message="fallback")
    spec = {
        "image": "python:3.12",
        "command": ["python", "-m", "http.server"],
        "tasks": [{"name": "main", "replicas": 1, "gpus": 0}],
        "expose": [{"name": "web", "task": "main", "container_port": 8000}],
    }
    job, _ = services.launch_job(
        team["tenant"], team["bob"], actor=team["bob"], spec_data=spec, name="starting"
    )
    endpoint = Endpoint.objects.get(job=job, name="web")
    wait_for(
        lambda: cluster.get(TRAEFIK, "IngressRoute", endpoint.service_name, job.tenant.namespace),
        message="the endpoint's route",
    )
    bob = {"Authorization": f"Bearer {ApiToken.issue(team['bob'], 't')[1]}"}
    # No EndpointSlice: no pod of the app is ready.
    wait_for(
        lambda: routing.get(endpoint.host, "/", **bob).status_code == 503,
        timeout=30,
        message="the router to load the route without a ready pod",
    )
    assert routing.get(endpoint.host, "/").status_code == 401  # signed out: its sign-in first


@pytest.mark.browser
def test_in_chromium_a_member_opens_the_app_and_another_tenants_app_says_why_not(
    cluster, team, other, upstream, routing, page, live_server, tmp_path
):
    from tests.conftest import sign_in

    mine = launch(cluster, upstream, team["tenant"], team["bob"], "br")
    theirs = launch(cluster, upstream, other, team["charlie"], "br-other")
    served(routing, mine, ApiToken.issue(team["bob"], "t")[1])
    served(routing, theirs, ApiToken.issue(team["charlie"], "t")[1])
    sign_in(page, live_server.url, "bob", "pw-bob")
    page.goto(f"{live_server.url}/tenants/{team['tenant'].slug}/jobs/br/")
    link = page.locator("[data-testid=endpoint-link]")
    assert link.inner_text() == f"http://{mine.host}:{routing.port}/"
    link.click()
    page.wait_for_url(f"http://{mine.host}:{routing.port}/")
    seen = {k.lower(): v for k, v in json.loads(page.locator("body").inner_text())["headers"]}
    page.screenshot(path=tmp_path / "app.png")
    assert seen["x-auth-request-user"] == "bob"
    assert "sessionid" not in seen.get("cookie", "")  # the portal's cookie stays on its origin

    page.goto(f"http://{theirs.host}:{routing.port}/")
    page.wait_for_selector("[data-testid=refused]")
    page.screenshot(path=tmp_path / "refused.png")
    refused = page.locator("main").inner_text()
    assert "a tenant you are not a member of" in refused
    assert other.slug not in refused  # whose it is, is not said to outsiders
    assert page.url.startswith(f"{live_server.url}/auth/endpoint/{theirs.pk}/start")
