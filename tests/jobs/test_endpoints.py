"""Endpoints: Services and routes in the API server, expiry, and forward-auth through real
nginx configured as ingress-nginx renders external auth."""

import sys
from datetime import timedelta
from urllib.parse import quote

import pytest
import requests
import time_machine
from django.core.exceptions import ValidationError
from django.utils import timezone

from accounts.models import ApiToken
from jobs import endpoints, services
from jobs.models import Endpoint
from jobs.tasks import reclaim_endpoints, reconcile_job
from k8s_adapters.routing import TRAEFIK_API

sys.path.insert(0, "hack")
from nginx_harness import Nginx  # noqa: E402

pytestmark = pytest.mark.django_db
INGRESS = ("networking.k8s.io/v1", "Ingress")


@pytest.fixture
def notebook(team, templates, cluster, django_capture_on_commit_callbacks):
    """bob's Jupyter dev box: jupyter (HTTP, ingress) and ssh (NodePort)."""
    with django_capture_on_commit_callbacks(execute=True):
        job, _ = services.launch_job(
            team["tenant"],
            team["bob"],
            actor=team["bob"],
            template_version=templates["jupyter-ssh"],
            name="nb",
        )
    return job


def test_each_endpoint_gets_a_service_and_http_ones_one_ingress_with_external_auth(
    cluster, team, notebook, settings
):
    ns = team["tenant"].namespace
    jupyter = cluster.get("v1", "Service", "nb-jupyter", ns)
    assert jupyter["spec"]["type"] == "ClusterIP"
    assert jupyter["spec"]["selector"] == {
        "volcano.sh/job-name": "nb",
        "volcano.sh/task-spec": "dev",
    }
    ssh = cluster.get("v1", "Service", "nb-ssh", ns)
    assert ssh["spec"]["type"] == "NodePort"
    ingress = cluster.get(*INGRESS, "nb-endpoints", ns)
    notes = ingress["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/auth-url"] == f"{settings.PORTAL_URL}/auth/endpoint"
    assert notes["nginx.ingress.kubernetes.io/auth-signin"] == f"{settings.PORTAL_URL}/auth/signin"
    assert "X-Auth-Request-User" in notes["nginx.ingress.kubernetes.io/auth-response-headers"]
    paths = ingress["spec"]["rules"][0]["http"]["paths"]
    assert [(p["path"], p["backend"]["service"]["name"]) for p in paths] == [
        (f"/jobs/{team['tenant'].slug}/nb/jupyter/", "nb-jupyter")
    ]
    rows = {e.name: e for e in Endpoint.objects.filter(job=notebook)}
    assert rows["ssh"].observed["node_port"] == ssh["spec"]["ports"][0]["nodePort"]
    assert rows["jupyter"].url.endswith(f"/jobs/{team['tenant'].slug}/nb/jupyter/")
    env = dict(notebook.job_spec().extra_env)
    assert env["GPU_PORTAL_BASE_PATH"] == f"/jobs/{team['tenant'].slug}/nb/jupyter/"


def test_the_traefik_driver_renders_forward_auth_resources_the_crds_accept(
    cluster, team, templates, settings, django_capture_on_commit_callbacks
):
    settings.ROUTING_DRIVER = "traefik"
    with django_capture_on_commit_callbacks(execute=True):
        services.launch_job(
            team["tenant"],
            team["bob"],
            actor=team["bob"],
            template_version=templates["jupyter-ssh"],
            name="nb-t",
        )
    ns = team["tenant"].namespace
    middleware = cluster.get(TRAEFIK_API, "Middleware", "nb-t-auth", ns)
    assert middleware["spec"]["forwardAuth"]["address"].endswith("/auth/endpoint?redirect=1")
    route = cluster.get(TRAEFIK_API, "IngressRoute", "nb-t-endpoints", ns)
    assert route["spec"]["routes"][0]["match"] == (
        f"PathPrefix(`/jobs/{team['tenant'].slug}/nb-t/jupyter/`)"
    )
    assert cluster.get(*INGRESS, "nb-t-endpoints", ns) is None


def test_expired_endpoints_are_reclaimed_and_an_extension_brings_them_back(
    cluster, team, notebook, django_capture_on_commit_callbacks
):
    ns = team["tenant"].namespace
    later = timezone.now() + timedelta(hours=team["tenant"].endpoint_default_hours, minutes=1)
    with time_machine.travel(later), django_capture_on_commit_callbacks(execute=True):
        reclaim_endpoints()
    assert cluster.get(*INGRESS, "nb-endpoints", ns) is None
    assert cluster.get("v1", "Service", "nb-jupyter", ns) is None
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    assert jupyter.reclaimed_at is not None
    with django_capture_on_commit_callbacks(execute=True):
        endpoints.extend(jupyter, hours=4, actor=team["bob"])
    assert cluster.get(*INGRESS, "nb-endpoints", ns) is not None
    assert cluster.get("v1", "Service", "nb-jupyter", ns) is not None


def test_extensions_stay_within_the_tenant_maximum_and_only_owners_or_admins_extend(team, notebook):
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    with pytest.raises(ValidationError) as caught:
        endpoints.extend(jupyter, hours=team["tenant"].endpoint_max_hours + 1, actor=team["bob"])
    assert caught.value.message_dict["hours"] == [
        f"Extend by 1 to {team['tenant'].endpoint_max_hours} hours (the tenant's maximum)."
    ]
    with pytest.raises(endpoints.PermissionDenied):
        endpoints.extend(jupyter, hours=2, actor=team["dave"])
    assert endpoints.extend(jupyter, hours=2, actor=team["alice"]).expires_at > timezone.now()


def test_a_finished_job_loses_its_routes(
    cluster, team, notebook, django_capture_on_commit_callbacks
):
    from tests.jobs.conftest import set_phase

    set_phase(cluster, notebook, "Completed")
    reconcile_job(notebook.pk)
    assert cluster.get(*INGRESS, "nb-endpoints", team["tenant"].namespace) is None


@pytest.mark.parametrize(
    ("expose", "path", "fragment"),
    [
        (
            {
                "name": "ssh",
                "task": "main",
                "container_port": 22,
                "protocol": "ssh",
                "mode": "ingress",
            },
            "expose[0].mode",
            "SSH cannot go through the HTTP ingress",
        ),
        (
            {"name": "web", "task": "main", "container_port": 0},
            "expose[0].container_port",
            "between 1 and 65535",
        ),
        ({"name": "api", "task": "main", "container_port": 80}, "expose[0].name", "reserved"),
    ],
)
def test_bad_exposed_ports_are_refused(team, templates, expose, path, fragment):
    data = {**templates["single-gpu"].spec, "expose": [expose]}
    with pytest.raises(ValidationError) as caught:
        services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name="bad-port"
        )
    assert fragment in caught.value.message_dict[path][0]


def test_forward_auth_makes_no_database_query_once_warm(
    client, team, notebook, settings, django_assert_num_queries
):
    settings.FORWARD_AUTH_CACHE_SECONDS = 30
    client.force_login(team["bob"])
    url = f"http://portal/jobs/{team['tenant'].slug}/nb/jupyter/lab"
    assert client.get("/auth/endpoint", HTTP_X_ORIGINAL_URL=url).status_code == 200
    with django_assert_num_queries(0):
        assert client.get("/auth/endpoint", HTTP_X_ORIGINAL_URL=url).status_code == 200


@pytest.fixture
def nginx(live_server, settings):
    settings.FORWARD_AUTH_CACHE_SECONDS = 0  # decisions follow the database at once
    proxy = Nginx(live_server.url.split("://")[1])
    yield proxy
    proxy.stop()


def session_for(nginx, username):
    """Sign in through nginx: the portal and the endpoints share one host in path mode."""
    http = requests.Session()
    http.get(f"{nginx.url}/accounts/login/")
    http.post(
        f"{nginx.url}/accounts/login/",
        data={
            "csrfmiddlewaretoken": http.cookies["csrftoken"],
            "login": username,
            "password": f"pw-{username}",
        },
        headers={"Referer": f"{nginx.url}/accounts/login/"},
    )
    assert "sessionid" in http.cookies
    return http


@pytest.mark.django_db(transaction=True)
def test_nginx_lets_only_tenant_members_in_until_the_endpoint_expires(
    nginx, live_server, team, notebook
):
    url = f"{nginx.url}/jobs/{team['tenant'].slug}/nb/jupyter/tree?x=1"
    anonymous = requests.get(url, allow_redirects=False, timeout=10)
    assert anonymous.status_code == 302
    assert anonymous.headers["Location"] == f"{nginx.url}/auth/signin?rd={url}"
    to_login = requests.get(anonymous.headers["Location"], allow_redirects=False, timeout=10)
    assert to_login.headers["Location"] == f"/accounts/login/?next={quote(url, safe='/')}"

    bob = session_for(nginx, "bob")
    response = bob.get(url)
    assert (response.status_code, response.text) == (200, "user=bob\n")
    assert session_for(nginx, "charlie").get(url).status_code == 403
    assert session_for(nginx, "dave").get(url).text == "user=dave\n"  # viewers may look

    token, raw = ApiToken.issue(team["bob"], "sdk")
    assert (
        requests.get(url, headers={"Authorization": f"Bearer {raw}"}, timeout=10).text
        == "user=bob\n"
    )

    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    with time_machine.travel(jupyter.expires_at + timedelta(seconds=1)):
        assert bob.get(url).status_code == 403
        endpoints.extend(jupyter, hours=2, actor=team["bob"])
        assert bob.get(url).status_code == 200
    from tenants.models import Membership

    Membership.objects.filter(user=team["bob"], tenant=team["tenant"]).delete()
    assert bob.get(url).status_code == 403


def test_the_wsgi_fast_path_answers_like_the_view(team, notebook, client):
    from portal.wsgi import application

    client.force_login(team["bob"])
    session = client.cookies["sessionid"].value
    url = f"http://portal/jobs/{team['tenant'].slug}/nb/jupyter/"
    answers = []

    def call(cookie, query=""):
        environ = {
            "REQUEST_METHOD": "GET",
            "PATH_INFO": "/auth/endpoint",
            "QUERY_STRING": query,
            "HTTP_X_ORIGINAL_URL": url,
            "HTTP_COOKIE": cookie,
            "SERVER_NAME": "portal",
            "SERVER_PORT": "80",
            "wsgi.url_scheme": "http",
        }
        body = application(environ, lambda status, headers: answers.append((status, dict(headers))))
        return answers[-1], b"".join(body)

    (status, headers), body = call(f"sessionid={session}")
    assert (status, headers["X-Auth-Request-User"], body) == ("200 OK", "bob", b"ok")
    assert call("")[0][0] == "401 Unauthorized"
    assert call("", "redirect=1")[0][1]["Location"].endswith(
        f"/auth/signin?rd={url}".replace("://", "%3A//")
    )


def test_a_private_endpoint_lets_only_its_owner_in(
    team, templates, client, settings, django_capture_on_commit_callbacks
):
    settings.FORWARD_AUTH_CACHE_SECONDS = 0
    data = {
        **templates["single-gpu"].spec,
        "expose": [{"name": "board", "task": "main", "container_port": 6006, "private": True}],
    }
    with django_capture_on_commit_callbacks(execute=True):
        services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name="private-job"
        )
    url = f"http://portal/jobs/{team['tenant'].slug}/private-job/board/"
    for who, status in [("bob", 200), ("alice", 403), ("dave", 403)]:
        client.force_login(team[who])
        assert client.get("/auth/endpoint", HTTP_X_ORIGINAL_URL=url).status_code == status, who


def test_the_expiry_board_lists_endpoints_and_admins_extend_or_reclaim_them(
    client, team, notebook, cluster, django_capture_on_commit_callbacks
):
    from tenants.models import AuditEvent

    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    Endpoint.objects.filter(pk=jupyter.pk).update(expires_at=timezone.now() + timedelta(hours=2))
    Endpoint.objects.filter(job=notebook, name="ssh").update(
        expires_at=timezone.now() - timedelta(minutes=5)
    )
    client.force_login(team["bob"])
    assert client.get("/console/endpoints/").status_code == 403
    client.force_login(team["admin"])
    page = client.get("/console/endpoints/")
    assert [e.name for e in page.context["expiring"]] == ["jupyter"]
    assert [e.name for e in page.context["expired"]] == ["ssh"]

    with django_capture_on_commit_callbacks(execute=True):
        client.post("/console/endpoints/", {"endpoint": jupyter.pk, "reclaim": "1"})
    jupyter.refresh_from_db()
    assert jupyter.reclaimed_at is not None
    assert cluster.get(*INGRESS, "nb-endpoints", team["tenant"].namespace) is None
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/console/endpoints/", {"endpoint": jupyter.pk, "hours": "3", "extend": "1"})
    jupyter.refresh_from_db()
    assert jupyter.reclaimed_at is None
    assert cluster.get(*INGRESS, "nb-endpoints", team["tenant"].namespace) is not None
    assert list(
        AuditEvent.objects.filter(action__startswith="endpoint.")
        .values_list("action", "actor_name")
        .order_by("id")
    ) == [("endpoint.reclaim", "admin"), ("endpoint.extend", "admin")]
