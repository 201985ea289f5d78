"""Endpoints in the API server: a Service and, for HTTP, a route per endpoint on a host of its
own, from every routing driver; direct exposure only where allowed; expiry and extension.
Requests through the real router are in test_endpoint_router.py."""

import importlib
from datetime import timedelta

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.utils import timezone

from jobs import endpoints, services
from jobs.choices import JobState
from jobs.models import Endpoint
from jobs.tasks import reclaim_endpoints
from k8s_adapters.routing import GATEWAY_API, TRAEFIK_API, UNDERSCORED_IDENTITY_HEADERS
from tenants import services as tenant_services
from tenants.choices import Role
from tenants.models import Membership, Tenant
from tests.jobs.conftest import deleted, submitted

pytestmark = pytest.mark.django_db
INGRESS = ("networking.k8s.io/v1", "Ingress")
ROUTE = (TRAEFIK_API, "IngressRoute")


def launch(team, template, name, *, spec=None, capture):
    """bob launches; reconciled inline until the Volcano job exists."""
    with capture(execute=True):
        if spec is not None:
            job = services.launch_job(
                team["tenant"], team["bob"], actor=team["bob"], spec_data=spec, name=name
            )[0]
        else:
            job = services.launch_job(
                team["tenant"], team["bob"], actor=team["bob"], template_version=template, name=name
            )[0]
    return submitted(job)


@pytest.fixture
def notebook(team, templates, cluster, django_capture_on_commit_callbacks):
    """bob's Jupyter dev box: jupyter (HTTP, routed) and ssh (TCP)."""
    return launch(team, templates["jupyter-ssh"], "nb", capture=django_capture_on_commit_callbacks)


def test_each_http_endpoint_gets_its_own_host_service_and_forward_auth_by_id(
    cluster, team, notebook, settings
):
    ns, slug = team["tenant"].namespace, team["tenant"].slug
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    assert jupyter.host == f"jupyter--nb--{slug}.{settings.ENDPOINT_WILDCARD_DOMAIN}"
    assert jupyter.service_name == f"ep{jupyter.pk}-nb-jupyter"
    service = cluster.get("v1", "Service", jupyter.service_name, ns)
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == {
        "volcano.sh/job-name": "nb",
        "volcano.sh/task-spec": "dev",
    }
    middleware = cluster.get(TRAEFIK_API, "Middleware", jupyter.service_name, ns)["spec"][
        "forwardAuth"
    ]
    assert middleware["address"] == (
        f"{settings.PORTAL_INTERNAL_URL}/auth/endpoint/{jupyter.pk}?mode=redirect"
    )
    assert middleware["authResponseHeaders"] == [
        "X-Auth-Request-User",
        "X-Auth-Request-Email",
        "X-Auth-Request-Groups",
        "Cookie",
        "Authorization",
        *UNDERSCORED_IDENTITY_HEADERS,  # so a client's forged X_Auth_Request_User goes too
    ]
    assert "X_Auth_Request_User" in middleware["authResponseHeaders"]
    route = cluster.get(*ROUTE, jupyter.service_name, ns)["spec"]["routes"]
    assert [(r["match"], r["services"][0]["name"]) for r in route] == [
        (f"Host(`{jupyter.host}`)", jupyter.service_name)
    ]
    assert jupyter.url == f"{settings.ENDPOINT_SCHEME}://{jupyter.host}/"
    env = dict(notebook.job_spec().extra_env)
    assert env["GPU_PORTAL_URL_JUPYTER"] == f"{settings.ENDPOINT_SCHEME}://{jupyter.host}"


def test_a_job_launched_again_under_a_deleted_jobs_name_gets_a_host_never_given_before(
    cluster, team, templates, notebook, django_capture_on_commit_callbacks
):
    """A browser keeps what a job's app left at its origin (cookies, storage, a service worker
    that answers for the origin): a job launched under the name of a deleted one, another
    member's perhaps, must not be served at its host."""
    ns = team["tenant"].namespace
    hosts, job = [], notebook
    for _ in range(3):
        jupyter = Endpoint.objects.get(job=job, name="jupyter")
        route = cluster.get(*ROUTE, jupyter.service_name, ns)["spec"]["routes"]
        assert [r["match"] for r in route] == [f"Host(`{jupyter.host}`)"]
        hosts.append(jupyter.host)
        with django_capture_on_commit_callbacks(execute=True):
            services.delete_job(job, actor=team["bob"])
        deleted(job)
        job = launch(
            team, templates["jupyter-ssh"], "nb", capture=django_capture_on_commit_callbacks
        )
    assert hosts[0].startswith(f"jupyter--nb--{team['tenant'].slug}.")  # readable, the first
    assert len(set(hosts)) == 3, hosts
    served = {r["match"] for o in cluster.list(*ROUTE, namespace=ns) for r in o["spec"]["routes"]}
    assert not served & {f"Host(`{host}`)" for host in hosts}  # the last job's is new too
    assert Endpoint.objects.get(job=job, name="jupyter").host not in hosts


def test_a_name_launched_before_the_upgrade_that_noted_names_gets_a_host_of_its_own(
    cluster, team, templates, django_capture_on_commit_callbacks
):
    """A job deleted before the portal noted launched names is known by its launch's audit
    record: the upgrade notes its name, and a job launched under it later is not served at
    its host."""
    from django.apps import apps

    from tenants.models import AuditEvent

    upgrade = importlib.import_module("jobs.migrations.0017_launched_names")
    tenant = team["tenant"]
    AuditEvent.objects.create(
        action="job.launch", tenant=tenant, object_type="Job", after={"name": "old-nb"}
    )
    upgrade.note_launched(apps, None)
    job = launch(
        team, templates["jupyter-ssh"], "old-nb", capture=django_capture_on_commit_callbacks
    )
    host = Endpoint.objects.get(job=job, name="jupyter").host
    assert not host.startswith(f"jupyter--old-nb--{tenant.slug}.")
    assert host.startswith("jupyter--old-nb--"), host  # still readable at its start


def test_tcp_ports_stay_inside_the_cluster_unless_the_tenant_may_expose_them(
    cluster, team, templates, notebook, django_capture_on_commit_callbacks
):
    ns = team["tenant"].namespace
    ssh = Endpoint.objects.get(job=notebook, name="ssh")
    assert ssh.mode == "podip"
    assert cluster.get("v1", "Service", ssh.service_name, ns)["spec"]["clusterIP"] == "None"
    spec = {
        **templates["single-gpu"].spec,
        "expose": [{"name": "ssh", "task": "main", "container_port": 22, "protocol": "ssh"}],
    }
    spec["expose"][0]["mode"] = "nodeport"
    with pytest.raises(ValidationError) as caught:
        launch(team, None, "np", spec=spec, capture=django_capture_on_commit_callbacks)
    assert "exposes the port without sign-in" in caught.value.message_dict["expose[0].mode"][0]

    Tenant.objects.filter(pk=team["tenant"].pk).update(allow_direct_exposure=True)
    team["tenant"].refresh_from_db()
    job = launch(team, None, "np", spec=spec, capture=django_capture_on_commit_callbacks)
    row = Endpoint.objects.get(job=job, name="ssh")
    service = cluster.get("v1", "Service", row.service_name, ns)
    assert service["spec"]["type"] == "NodePort"
    policy = cluster.get("networking.k8s.io/v1", "NetworkPolicy", row.service_name, ns)["spec"]
    assert policy["ingress"] == [{"ports": [{"port": 22, "protocol": "TCP"}]}]
    assert policy["podSelector"]["matchLabels"] == {
        "volcano.sh/job-name": "np",
        "volcano.sh/task-spec": "main",
    }
    row.refresh_from_db()
    assert row.observed["node_port"] == service["spec"]["ports"][0]["nodePort"]

    # A platform admin takes direct exposure away: what was exposed so closes now, and its
    # owner cannot keep it open by extending it.
    with django_capture_on_commit_callbacks(execute=True):
        tenant_services.update_tenant(
            team["tenant"], actor=team["admin"], allow_direct_exposure=False
        )
    row.refresh_from_db()
    assert row.reclaimed_at is not None
    assert cluster.get("v1", "Service", row.service_name, ns) is None
    assert cluster.get("networking.k8s.io/v1", "NetworkPolicy", row.service_name, ns) is None
    with pytest.raises(ValidationError) as caught:
        endpoints.extend(row, hours=4, actor=team["bob"])
    assert "which {} may no longer do".format(team["tenant"].slug) in caught.value.messages[0]


@pytest.mark.parametrize("protocol", ["http", "tcp", "ssh"])
@pytest.mark.parametrize("cluster_mode", ["nodeport", "loadbalancer"])
def test_a_cluster_that_exposes_ports_directly_does_so_only_for_tenants_allowed(
    settings, protocol, cluster_mode
):
    # HTTP ports took the cluster's NodePort mode whatever the tenant: a notebook that relies
    # on the portal's sign-in opened to anyone who reaches a node.
    settings.ENDPOINT_MODE = settings.ENDPOINT_TCP_MODE = cluster_mode
    assert endpoints.default_mode(protocol, Tenant(allow_direct_exposure=False)) == "podip"
    assert endpoints.default_mode(protocol, Tenant(allow_direct_exposure=True)) == cluster_mode


@pytest.mark.parametrize("driver", ["gateway-api", "ingress-nginx"])
def test_every_driver_routes_each_endpoint_by_its_host_to_the_portal_by_id(
    cluster, team, templates, settings, driver, django_capture_on_commit_callbacks
):
    settings.ROUTING_DRIVER = driver
    job = launch(team, templates["jupyter-ssh"], "nb-d", capture=django_capture_on_commit_callbacks)
    ns = team["tenant"].namespace
    jupyter = Endpoint.objects.get(job=job, name="jupyter")
    if driver == "gateway-api":
        route = cluster.get(GATEWAY_API, "HTTPRoute", jupyter.service_name, ns)["spec"]
        assert route["hostnames"] == [jupyter.host]
        gateway_ns, gateway = settings.ROUTING_GATEWAY.split("/")
        assert route["parentRefs"] == [
            {
                "group": "gateway.networking.k8s.io",
                "kind": "Gateway",
                "name": gateway,
                "namespace": gateway_ns,
            }
        ]
        assert route["rules"][0]["filters"][0]["extensionRef"]["name"] == jupyter.service_name
        assert cluster.get(TRAEFIK_API, "Middleware", jupyter.service_name, ns) is not None
    else:
        ingress = cluster.get(*INGRESS, jupyter.service_name, ns)
        notes = ingress["metadata"]["annotations"]
        prefix = "nginx.ingress.kubernetes.io/"
        assert notes[f"{prefix}auth-url"] == (
            f"{settings.PORTAL_INTERNAL_URL}/auth/endpoint/{jupyter.pk}"
        )
        assert notes[f"{prefix}auth-signin"] == (
            f"{settings.PORTAL_URL}/auth/endpoint/{jupyter.pk}/start"
        )
        # No auth cache: it would outlive an endpoint's expiry and swallow sign-in codes.
        assert not any(note.startswith(f"{prefix}auth-cache") for note in notes)
        assert ingress["spec"]["rules"][0]["host"] == jupyter.host
    assert cluster.get(*ROUTE, jupyter.service_name, ns) is None


@pytest.mark.parametrize("driver", ["traefik", "gateway-api", "ingress-nginx"])
def test_every_driver_sends_hosts_no_route_serves_to_the_portals_page(settings, driver):
    """What each driver's fallback asks of its router. Traefik's and the Gateway API's run
    through the real router in test_endpoint_router.py; ingress-nginx is not part of the test
    bed, so its Ingress is checked here only as ingress-nginx documents it."""
    settings.ROUTING_DRIVER = driver
    settings.PORTAL_URL = "https://portal.example.org"
    settings.ENDPOINT_WILDCARD_DOMAIN = "endpoints.example.org"
    closed = "https://portal.example.org/endpoints/closed/"
    objects = {o["kind"]: o for o in endpoints.fallback_objects()}
    if driver == "ingress-nginx":
        (ingress,) = objects.values()
        assert ingress["metadata"]["namespace"] == settings.ROUTER_NAMESPACE
        assert ingress["metadata"]["annotations"] == {
            "nginx.ingress.kubernetes.io/temporal-redirect": closed
        }
        assert ingress["spec"]["rules"][0]["host"] == "*.endpoints.example.org"
        return
    redirect = objects["Middleware"]["spec"]["redirectRegex"]
    assert redirect["replacement"] == f"{closed}?host=${{1}}"
    assert redirect["permanent"] is False  # the address opens again with a relaunch
    # The Gateway API driver runs on Traefik: its fallback is the same IngressRoute.
    route = objects["IngressRoute"]["spec"]["routes"][0]
    assert route["match"] == (
        r"HostRegexp(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?\.endpoints\.example\.org\.?$`) && "
        "(Method(`GET`) || Method(`HEAD`))"  # a form's body is never resent to the portal
    )
    assert route["priority"] == 1  # below every endpoint's own route
    assert objects["IngressRoute"]["metadata"]["namespace"] == settings.ROUTER_NAMESPACE


@pytest.mark.parametrize(
    "url",
    [
        "http://a--b--c.endpoints.example.org:18080/lab?token=secret#x",
        "https://A--B--C.Endpoints.Example.Org./",
        "http://a--b--c.endpoints.example.org:/",
        "http://a--b--c.endpoints.example.org?next=/",
    ],
)
def test_the_fallback_redirect_carries_the_host_alone(settings, url):
    """What Traefik's RedirectRegex makes of a request's URL (Go's regexp and Python's agree on
    this pattern): the host, never its port, a path or a query."""
    import re

    settings.PORTAL_URL = "https://portal.example.org"
    settings.ROUTING_DRIVER = "traefik"
    redirect = {o["kind"]: o for o in endpoints.fallback_objects()}["Middleware"]
    rule = redirect["spec"]["redirectRegex"]
    target = re.sub(rule["regex"], rule["replacement"].replace("${1}", r"\1"), url)
    assert target.lower() == (
        "https://portal.example.org/endpoints/closed/?host=a--b--c.endpoints.example.org"
    )


@pytest.mark.parametrize(
    ("host", "label"),
    [
        ("jupyter--nb--team.endpoints.localhost", "jupyter--nb--team"),
        ("JUPYTER--nb--team.Endpoints.Localhost:18080", "jupyter--nb--team"),
        ("jupyter--nb--team.endpoints.localhost.", "jupyter--nb--team"),
        ("a.b.endpoints.localhost", ""),
        ("endpoints.localhost", ""),
        ("jupyter.endpoints.localhost.evil.org", ""),
        ("portal.example.org", ""),
        ("-x.endpoints.localhost", ""),
        ("jüpyter.endpoints.localhost", ""),
        ("<script>.endpoints.localhost", ""),
        ("", ""),
    ],
)
def test_the_closed_page_reads_a_host_only_under_the_endpoint_domain(settings, host, label):
    from jobs.routes import label_of_host

    settings.ENDPOINT_WILDCARD_DOMAIN = "endpoints.localhost"
    assert label_of_host(host) == label


def test_the_closed_page_tells_members_why_and_what_to_do(client, team, notebook):
    """The router's fallback sends a closed endpoint's address here: its owner learns it
    expired and may extend it, a viewer-level member who may not is told who can, and anyone
    outside the tenant only that nothing is open there."""
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    url = f"/endpoints/closed/?host={jupyter.host}"
    client.force_login(team["bob"])
    waiting = client.get(url, HTTP_ACCEPT="text/html").content.decode()
    assert f"Its job {notebook.name} is not running yet" in waiting
    ssh = Endpoint.objects.get(job=notebook, name="ssh")
    inside = client.get(f"/endpoints/closed/?host={ssh.host}", HTTP_ACCEPT="text/html")
    assert "It is reached inside the cluster" in inside.content.decode()
    notebook.__class__.objects.filter(pk=notebook.pk).update(state=JobState.RUNNING)
    opened = client.get(url, HTTP_ACCEPT="text/html")
    assert opened.status_code == 200  # open after all: the router had no route yet
    assert f'href="/auth/endpoint/{jupyter.pk}/start"' in opened.content.decode()

    Endpoint.objects.filter(pk=jupyter.pk).update(expires_at=timezone.now())
    expired = client.get(url, HTTP_ACCEPT="text/html").content.decode()
    assert "Its time ran out. Extend it from the job&#x27;s page to open it again." in expired
    client.force_login(team["dave"])  # a viewer
    dave = client.get(url, HTTP_ACCEPT="text/html").content.decode()
    assert "The job&#x27;s owner or a tenant admin can extend it" in dave
    client.force_login(team["charlie"])
    outsider = client.get(url, HTTP_ACCEPT="text/html")
    assert outsider.status_code == 404
    assert "Nothing is open at this address" in outsider.content.decode()
    told = outsider.content.decode()  # nothing of the job (a bare "nb" may be in a token)
    assert f"<strong>{notebook.name}</strong>" not in told
    assert 'data-testid="job-link"' not in told
    assert client.get(url).json()["detail"].startswith("No endpoint is open at this address.")
    assert client.post(url).status_code == 405  # the router redirects GET and HEAD only
    client.force_login(team["bob"])
    notebook.__class__.objects.filter(pk=notebook.pk).update(cancel_requested=True)
    cancelling = client.get(url, HTTP_ACCEPT="text/html").content.decode()
    assert f"Its job {notebook.name} is being cancelled" in cancelling


def test_expired_endpoints_are_reclaimed_and_an_extension_brings_them_back(
    cluster, team, notebook, django_capture_on_commit_callbacks
):
    ns = team["tenant"].namespace
    later = timezone.now() + timedelta(hours=team["tenant"].endpoint_default_hours, minutes=1)
    with time_machine.travel(later), django_capture_on_commit_callbacks(execute=True):
        reclaim_endpoints()
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    assert cluster.get(*ROUTE, jupyter.service_name, ns) is None
    assert cluster.get("v1", "Service", jupyter.service_name, ns) is None
    assert jupyter.reclaimed_at is not None
    with django_capture_on_commit_callbacks(execute=True):
        endpoints.extend(jupyter, hours=4, actor=team["bob"])
    assert cluster.get(*ROUTE, jupyter.service_name, ns) is not None
    assert cluster.get("v1", "Service", jupyter.service_name, ns) is not None


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
    # At least that long from now: one with more time left keeps it (it was cut to 2 hours).
    most = team["tenant"].endpoint_max_hours
    later = endpoints.extend(jupyter, hours=most, actor=team["alice"]).expires_at
    assert later > timezone.now() + timedelta(hours=most - 1)
    assert endpoints.extend(jupyter, hours=2, actor=team["alice"]).expires_at == later
    # Its owner, demoted to viewer, reads the job and no longer changes it (the API refused,
    # the page's form did not).
    Membership.objects.filter(tenant=team["tenant"], user=team["bob"]).update(role=Role.VIEWER)
    with pytest.raises(endpoints.PermissionDenied):
        endpoints.extend(jupyter, hours=2, actor=team["bob"])


def test_a_finished_job_loses_its_routes(
    cluster, team, notebook, django_capture_on_commit_callbacks
):
    from tests.jobs.conftest import settle

    settle(notebook, JobState.RUNNING)
    with django_capture_on_commit_callbacks(execute=True):
        services.cancel_job(notebook, actor=team["bob"])  # it ends through Volcano's abort
    settle(notebook, JobState.CANCELLED)
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    assert cluster.get(*ROUTE, jupyter.service_name, team["tenant"].namespace) is None


def test_a_finished_jobs_endpoints_show_closed_and_are_not_extended(
    client, cluster, team, notebook, django_capture_on_commit_callbacks
):
    from tests.jobs.conftest import settle

    settle(notebook, JobState.RUNNING)
    raw = team["bob"].api_tokens.model.issue(team["bob"], "t")[1]
    job_url = f"/api/v1/tenants/{team['tenant'].slug}/jobs/{notebook.name}/"

    def closed():
        shown = client.get(job_url, HTTP_AUTHORIZATION=f"Bearer {raw}").json()["endpoints"]
        return {e["name"]: e["closed"] for e in shown}

    assert closed() == {"jupyter": False, "ssh": False}
    with django_capture_on_commit_callbacks(execute=True):
        services.cancel_job(notebook, actor=team["bob"])
    settle(notebook, JobState.CANCELLED)
    assert closed() == {"jupyter": True, "ssh": True}
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    Endpoint.objects.filter(pk=jupyter.pk).update(expires_at=timezone.now() + timedelta(hours=2))
    page_url = f"/tenants/{team['tenant'].slug}/jobs/{notebook.name}/"
    client.force_login(team["bob"])
    page = client.get(page_url).content.decode()
    assert 'data-testid="endpoint-closed"' in page
    assert 'data-testid="endpoint-link"' not in page
    assert "/extend/" not in page  # no form to extend what is closed
    refused = (
        f"The job {notebook.name} has ended and its endpoints closed with it; relaunch the job "
        "to open them again."
    )
    answer = client.post(f"{page_url}endpoints/jupyter/extend/", {"hours": "5"}, follow=True)
    assert refused in answer.content.decode()
    api = client.post(
        f"/api/v1/tenants/{team['tenant'].slug}/jobs/{notebook.name}/endpoints/jupyter/extend/",
        {"hours": 5},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert api.status_code == 400
    assert api.json()["detail"] == refused
    client.force_login(team["admin"])
    board = client.get("/console/endpoints/")
    assert notebook.name not in [e.job.name for e in board.context["expiring"]]
    jupyter.refresh_from_db()
    assert jupyter.expires_at < timezone.now() + timedelta(hours=3)  # not extended
    assert cluster.get(*ROUTE, jupyter.service_name, team["tenant"].namespace) is None


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


@pytest.mark.parametrize(
    "name", ["CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "GPU_PORTAL_JOB"]
)
def test_jobs_may_not_choose_devices_or_speak_for_the_portal(team, templates, name):
    data = {**templates["single-gpu"].spec, "env": {name: "0,1,2,3"}}
    with pytest.raises(ValidationError) as caught:
        services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name="greedy"
        )
    assert f"'{name}' is set by the cluster or the portal" in caught.value.message_dict["env"][0]


def test_tenant_namespaces_are_isolated_and_job_pods_hold_no_api_credentials(
    cluster, team, notebook, settings
):
    ns = team["tenant"].namespace
    labels = cluster.get("v1", "Namespace", ns)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    policy = cluster.get("networking.k8s.io/v1", "NetworkPolicy", "gpu-portal-isolation", ns)
    assert policy["spec"]["podSelector"] == {}
    assert policy["spec"]["ingress"] == [
        {
            "from": [
                {"podSelector": {}},
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": settings.ROUTER_NAMESPACE}
                    }
                },
            ]
        }
    ]
    # ... and reach neither the cloud's metadata service (the node's credentials) nor any
    # range an admin closed; their namespace and DNS stay open. (Applied here, enforced by
    # the cluster's CNI: the test bed runs none that enforces NetworkPolicies.)
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    outside = policy["spec"]["egress"][-1]["to"]
    assert outside[0]["ipBlock"] == {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32"]}
    assert outside[1]["ipBlock"] == {"cidr": "::/0", "except": ["fd00:ec2::254/128"]}
    vcjob = cluster.get("batch.volcano.sh/v1alpha1", "Job", "nb", ns)
    pod = vcjob["spec"]["tasks"][0]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False


def test_forward_auth_makes_no_database_query_once_warm(
    client, team, notebook, settings, django_assert_num_queries
):
    settings.FORWARD_AUTH_CACHE_SECONDS = 30
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    raw = team["bob"].api_tokens.model.issue(team["bob"], "t")[1]
    url = f"/auth/endpoint/{jupyter.pk}"
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    with django_assert_num_queries(0):
        assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200


def test_the_wsgi_fast_path_answers_like_the_view(team, notebook):
    from jobs.forward_auth import state_cookie_name
    from portal.wsgi import application

    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    raw = team["bob"].api_tokens.model.issue(team["bob"], "t")[1]
    answers = []

    def call(authorization="", query="", accept="*/*"):
        environ = {
            "REQUEST_METHOD": "GET",
            "PATH_INFO": f"/auth/endpoint/{jupyter.pk}",
            "QUERY_STRING": query,
            "HTTP_X_FORWARDED_URI": "/lab?x=1",
            "HTTP_AUTHORIZATION": authorization,
            "HTTP_ACCEPT": accept,
            "HTTP_COOKIE": "app=1; sessionid=s; csrftoken=c",
            "SERVER_NAME": "portal",
            "SERVER_PORT": "80",
            "wsgi.url_scheme": "http",
        }
        body = application(environ, lambda status, headers: answers.append((status, dict(headers))))
        return answers[-1], b"".join(body)

    (status, headers), _ = call(f"Bearer {raw}")
    assert (status, headers["X-Auth-Request-User"]) == ("200 OK", "bob")
    assert headers["Cookie"] == "app=1"  # never the portal's session or CSRF cookie
    assert call()[0][0] == "401 Unauthorized"
    (status, headers), _ = call(query="mode=redirect", accept="text/html")
    assert status == "302 Found"
    assert f"/auth/endpoint/{jupyter.pk}/start?next=%2Flab%3Fx%3D1&state=" in headers["Location"]
    assert headers["Set-Cookie"].startswith(f"{state_cookie_name()}=")


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
    assert cluster.get(*ROUTE, jupyter.service_name, team["tenant"].namespace) is None
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/console/endpoints/", {"endpoint": jupyter.pk, "hours": "3", "extend": "1"})
    jupyter.refresh_from_db()
    assert jupyter.expires_at < timezone.now() + timedelta(hours=3)  # not extended
    assert cluster.get(*ROUTE, jupyter.service_name, team["tenant"].namespace) is not None
    assert list(
        AuditEvent.objects.filter(action__startswith="endpoint.")
        .values_list("action", "actor_name")
        .order_by("id")
    ) == [("endpoint.reclaim", "admin"), ("endpoint.extend", "admin")]
    for hours in ("1.5", "abc", "-2"):
        page = client.post(
            "/console/endpoints/", {"endpoint": jupyter.pk, "hours": hours}, follow=True
        ).content.decode()
        assert "Give the hours as a whole number, for example 8." in page
        assert "invalid literal" not in page
    assert client.post("/console/endpoints/", {"endpoint": "x", "hours": "1"}).status_code == 404
    assert AuditEvent.objects.filter(action__startswith="endpoint.").count() == 2


def test_the_job_page_reads_its_job_endpoints_and_events_once(
    client, team, notebook, django_assert_num_queries
):
    """The page every launch lands on (and its owner reloads): one query each for the user, the
    tenant, the job with its template, its endpoints (listed, and in its manifests) and its
    events."""
    client.force_login(team["bob"])
    url = f"/tenants/{team['tenant'].slug}/jobs/{notebook.name}/"
    client.get(url)
    with django_assert_num_queries(5):
        html = client.get(url).content.decode()
    assert 'data-testid="endpoint-jupyter"' in html
    assert 'data-testid="endpoint-ssh"' in html
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    assert f"name: {jupyter.service_name}" in html  # its Service, among the manifests
    assert f"by bob · 1 GPU · {notebook.template_version}" in html


def test_starting_an_endpoint_that_cannot_open_says_why_and_gives_no_code(client, team, notebook):
    """The sign-in hand-off gives a code only for an endpoint that is routed and open; a member
    following an old link to a closed or in-cluster one is told why, not sent to a host that
    answers 404."""
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    ssh = Endpoint.objects.get(job=notebook, name="ssh")
    client.force_login(team["bob"])
    opened = client.get(f"/auth/endpoint/{jupyter.pk}/start")
    # an old link (no state of this browser's): through the endpoint, which starts it afresh
    assert (opened.status_code, opened["Location"]) == (302, jupyter.url)
    unrouted = client.get(f"/auth/endpoint/{ssh.pk}/start")
    assert unrouted.status_code == 403
    assert "reached inside the cluster" in unrouted.content.decode()
    client.force_login(team["charlie"])  # not a member: learns nothing of the job's state
    assert "you are not a member" in client.get(f"/auth/endpoint/{ssh.pk}/start").content.decode()

    notebook.__class__.objects.filter(pk=notebook.pk).update(state=JobState.SUCCEEDED)
    client.force_login(team["bob"])
    closed = client.get(f"/auth/endpoint/{jupyter.pk}/start")
    assert closed.status_code == 403
    assert "closed when its job ended" in closed.content.decode()
    assert "Location" not in closed.headers


def test_under_ingress_nginx_the_code_and_path_are_read_from_the_url_nginx_sets(
    client, settings, team, notebook
):
    """ingress-nginx tells the auth service the request's URL in X-Original-URL, which it sets
    itself, and passes a client's own headers through: a code or path in a client's
    X-Forwarded-Uri is never read, and the real one is (else every sign-in went round again)."""
    from urllib.parse import parse_qs, urlsplit

    from django.test import Client

    from portal.wsgi import application

    settings.ROUTING_DRIVER = "ingress-nginx"
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    client.force_login(team["bob"])

    def code():
        answer = client.get(f"/auth/endpoint/{jupyter.pk}/start?rd=https://{jupyter.host}/lab")
        return parse_qs(urlsplit(answer["Location"]).query)["gpp_code"][0]

    def ask(original, forwarded="/"):
        headers = {"HTTP_X_ORIGINAL_URL": original, "HTTP_X_FORWARDED_URI": forwarded}
        return Client().get(f"/auth/endpoint/{jupyter.pk}", **headers)

    url = f"https://{jupyter.host}/lab"
    planted = ask(url, forwarded=f"/lab?gpp_code={code()}")
    assert planted.status_code == 401  # the client's header: not read
    signed_in = ask(f"{url}?gpp_code={code()}")
    assert signed_in.status_code == 200
    assert signed_in["X-Auth-Request-User"] == "bob"
    assert "Set-Cookie" in signed_in.headers

    answers = []  # the WSGI fast path reads the same header
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": f"/auth/endpoint/{jupyter.pk}",
        "QUERY_STRING": "",
        "HTTP_X_ORIGINAL_URL": f"{url}?gpp_code={code()}",
        "HTTP_X_FORWARDED_URI": "/",
        "SERVER_NAME": "portal",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
    }
    application(environ, lambda status, headers: answers.append((status, dict(headers))))
    assert answers[-1][0] == "200 OK"
    assert answers[-1][1]["X-Auth-Request-User"] == "bob"


def test_a_full_forward_auth_cache_drops_its_oldest_entry_not_all(settings):
    """A flood of unknown tokens (each a miss, each stored) must not empty the cache of the
    endpoints and users every request of every member needs."""
    from jobs.forward_auth import TTLCache

    settings.FORWARD_AUTH_CACHE_SECONDS = 60
    cache = TTLCache(size=3)
    loads = []

    def load(key):
        return lambda: loads.append(key) or key

    for key in ("member", "a", "b"):
        cache.get(key, load(key))
    cache.get("member", load("member"))  # a hit: not loaded again
    for key in ("c", "d"):
        cache.get(key, load(key))
    assert loads == ["member", "a", "b", "c", "d"]
    assert list(cache.data) == ["b", "c", "d"]  # the two stored longest ago went, one by one


def test_forward_auth_tells_outsiders_nothing_of_an_endpoint(client, team, notebook):
    """Forward-auth answers anyone who reaches the portal, about any endpoint id. Before
    signing in, an id that exists is answered as one that does not; a signed-in non-member
    learns only that they may not open it: not whose it is, not that it expired, not whether
    it exists. Its members are told it expired."""
    from accounts.models import ApiToken
    from jobs.forward_auth import decide

    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    missing = Endpoint.objects.order_by("-pk").first().pk + 1000

    def asked(endpoint_id, **headers):
        answer = decide(endpoint_id, uri="/", **headers)
        return answer.status, answer.body, answer.headers.get("Location", "").split("?")[0]

    for how in ({"accept": "*/*"}, {"accept": "text/html", "redirect": True}):
        there, gone = asked(jupyter.pk, **how), asked(missing, **how)
        assert there[:2] == gone[:2]
        assert there[0] in (302, 401)
    outsider = f"Bearer {ApiToken.issue(team['charlie'], 't')[1]}"
    member = f"Bearer {ApiToken.issue(team['bob'], 't')[1]}"
    refused = asked(jupyter.pk, authorization=outsider, accept="*/*")
    assert refused == asked(missing, authorization=outsider, accept="*/*")
    assert refused[0] == 403
    assert team["tenant"].slug not in refused[1]
    assert asked(jupyter.pk, authorization=member, accept="*/*")[0] == 200

    with time_machine.travel(jupyter.expires_at + timedelta(minutes=1)):
        assert asked(jupyter.pk, authorization=outsider, accept="*/*") == refused
        expired = asked(jupyter.pk, authorization=member, accept="*/*")
    assert (expired[0], "expired" in expired[1]) == (403, True)

    client.force_login(team["charlie"])  # the sign-in hand-off says the same of both
    pages = [client.get(f"/auth/endpoint/{pk}/start") for pk in (jupyter.pk, missing)]
    assert [p.status_code for p in pages] == [403, 403]
    for page in pages:
        html = page.content.decode()
        assert "It does not exist any more (its job was deleted" in html
        assert team["tenant"].slug not in html


def test_an_expired_portal_session_ends_the_endpoint_access_it_opened(
    client, team, notebook, settings
):
    """A shared machine where nobody signed out: once the portal session expires, the apps it
    opened in that browser close with it, not hours later."""
    from jobs.forward_auth import SessionStore, decide
    from tests.helpers import wait_for
    from tests.jobs.conftest import opened_endpoint

    settings.FORWARD_AUTH_CACHE_SECONDS = 0
    settings.SESSION_COOKIE_AGE = 3
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    signed_in = client.post("/accounts/login/", {"login": "bob", "password": "pw-bob"})
    assert signed_in.status_code == 302

    cookie = opened_endpoint(client, jupyter)
    assert decide(jupyter.pk, cookie=cookie).status == 200
    wait_for(
        lambda: decide(jupyter.pk, cookie=cookie).status == 401,
        timeout=10,
        interval=0.5,
        message="the endpoint cookie to go with its expired session",
    )
    # A session ended without a sign-out (flushed by a sign-in, or removed by an admin) too.
    settings.SESSION_COOKIE_AGE = 3600
    client.post("/accounts/login/", {"login": "bob", "password": "pw-bob"})
    cookie = opened_endpoint(client, jupyter)
    assert decide(jupyter.pk, cookie=cookie).status == 200
    SessionStore(client.session.session_key).delete()
    assert decide(jupyter.pk, cookie=cookie).status == 401


def test_urls_python_cannot_read_send_the_browser_home_never_a_500(
    client, settings, team, notebook
):
    from django.test import Client

    from jobs.forward_auth import decide

    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    assert decide(jupyter.pk, uri="//[x").status == 401
    answer = decide(jupyter.pk, uri="//[x", redirect=True, accept="text/html")
    assert "next=%2F&" in answer.headers["Location"]
    client.force_login(team["bob"])
    state = "0" * 32
    start = client.get(f"/auth/endpoint/{jupyter.pk}/start?next=//[x&state={state}")
    assert start["Location"].startswith(f"{jupyter.url}?gpp_code=")

    settings.ROUTING_DRIVER = "ingress-nginx"
    url = f"/auth/endpoint/{jupyter.pk}"
    assert Client().get(url, HTTP_X_ORIGINAL_URL="https://h//[x").status_code == 401
    start = client.get(f"{url}/start?rd=http://[x")
    assert start["Location"].startswith(f"{jupyter.url}?gpp_code=")


def test_an_endpoint_cookie_another_app_added_locks_nobody_out(client, team, notebook):
    """Over plain HTTP the cookie has no __Host- prefix: another endpoint's app can set one of
    its name for the whole domain, which the browser sends beside the real one."""
    from jobs.forward_auth import decide
    from tests.jobs.conftest import opened_endpoint

    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    client.force_login(team["bob"])
    cookie = opened_endpoint(client, jupyter)
    name = cookie.split("=", 1)[0]
    for sent in (f"{cookie}; {name}=junk", f"{name}=junk; {cookie}"):
        answer = decide(jupyter.pk, cookie=sent)
        assert (answer.status, answer.headers["X-Auth-Request-User"]) == (200, "bob")


def test_a_cached_token_is_refused_the_moment_it_expires(settings, team, notebook):
    from accounts.models import ApiToken
    from jobs.forward_auth import decide

    settings.FORWARD_AUTH_CACHE_SECONDS = 60
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    ends = timezone.now() + timedelta(minutes=5)
    raw = ApiToken.issue(team["bob"], "t", expires_at=ends)[1]
    assert decide(jupyter.pk, authorization=f"Bearer {raw}").status == 200
    with time_machine.travel(ends + timedelta(seconds=1)):
        assert decide(jupyter.pk, authorization=f"Bearer {raw}").status == 401


def test_a_code_made_just_before_the_endpoint_expired_opens_nothing_after(
    client, settings, team, notebook
):
    from urllib.parse import parse_qs, urlsplit

    from jobs.forward_auth import decide

    settings.ROUTING_DRIVER = "ingress-nginx"  # its code answer is the request itself (200)
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    client.force_login(team["bob"])
    start = client.get(f"/auth/endpoint/{jupyter.pk}/start?rd=https://{jupyter.host}/")
    code = parse_qs(urlsplit(start["Location"]).query)["gpp_code"][0]
    with time_machine.travel(jupyter.expires_at + timedelta(seconds=1)):
        answer = decide(jupyter.pk, uri=f"/?gpp_code={code}")
    assert answer.status == 403
    assert "expired" in answer.body


def test_a_code_sent_to_a_browser_signed_in_already_is_used_up(client, settings, team, notebook):
    """Ignored there (the browser keeps its own sign-in), it is not left usable in the app's
    URL and logs: under ingress-nginx codes are bound to the endpoint alone."""
    from urllib.parse import parse_qs, urlsplit

    from jobs.forward_auth import decide
    from tests.jobs.conftest import opened_endpoint

    settings.ROUTING_DRIVER = "ingress-nginx"
    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    client.force_login(team["bob"])
    cookie = opened_endpoint(client, jupyter)
    start = client.get(f"/auth/endpoint/{jupyter.pk}/start?rd=https://{jupyter.host}/")
    code = parse_qs(urlsplit(start["Location"]).query)["gpp_code"][0]
    assert decide(jupyter.pk, uri=f"/?gpp_code={code}", cookie=cookie).status == 200
    assert decide(jupyter.pk, uri=f"/?gpp_code={code}").status == 403  # used up


def test_the_api_offers_the_expiry_board_to_platform_admins(
    cluster, team, notebook, django_capture_on_commit_callbacks
):
    """What the expiry board page does: list the endpoints expiring or expired, extend one,
    reclaim one now; platform admins only."""
    from rest_framework.test import APIClient

    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    Endpoint.objects.filter(pk=jupyter.pk).update(expires_at=timezone.now() + timedelta(hours=2))
    api = APIClient()
    api.force_login(team["alice"])  # a tenant admin, not a platform admin
    assert api.get("/api/v1/endpoints/").status_code == 403
    assert api.post(f"/api/v1/endpoints/{jupyter.pk}/reclaim/").status_code == 403
    api.force_login(team["admin"])
    board = api.get("/api/v1/endpoints/").json()["results"]  # a page, as every list
    [row] = [r for r in board if r["id"] == jupyter.pk]
    assert (row["tenant"], row["job"], row["owner"], row["name"]) == (
        team["tenant"].slug,
        notebook.name,
        "bob",
        "jupyter",
    )
    extended = api.post(f"/api/v1/endpoints/{jupyter.pk}/extend/", {"hours": 6}, format="json")
    assert extended.status_code == 200
    assert Endpoint.objects.get(pk=jupyter.pk).expires_at > timezone.now() + timedelta(hours=5)
    with django_capture_on_commit_callbacks(execute=True):
        reclaimed = api.post(f"/api/v1/endpoints/{jupyter.pk}/reclaim/")
    assert reclaimed.status_code == 200
    assert reclaimed.json()["reclaimed_at"] is not None
    assert cluster.get(*ROUTE, jupyter.service_name, team["tenant"].namespace) is None


def test_an_endpoint_a_platform_admin_reclaimed_stays_closed_until_one_opens_it_again(
    client, cluster, team, notebook, django_capture_on_commit_callbacks
):
    """The owner's next extension opened it again at once: reclaiming it was undone."""
    from rest_framework.test import APIClient

    jupyter = Endpoint.objects.get(job=notebook, name="jupyter")
    notebook.__class__.objects.filter(pk=notebook.pk).update(state=JobState.RUNNING)
    with django_capture_on_commit_callbacks(execute=True):
        endpoints.reclaim_now(jupyter, actor=team["admin"])
    api = APIClient()
    api.force_login(team["bob"])
    url = f"/api/v1/tenants/{team['tenant'].slug}/jobs/{notebook.name}/endpoints/jupyter/extend/"
    refused = api.post(url, {"hours": 4}, format="json")
    assert refused.status_code == 400
    assert refused.json()["detail"] == (
        "A platform admin closed jupyter; it stays closed until one of them opens it again "
        "(ask them why)."
    )
    jupyter.refresh_from_db()
    assert jupyter.reclaimed_at is not None
    assert cluster.get(*ROUTE, jupyter.service_name, team["tenant"].namespace) is None
    job_url = f"/api/v1/tenants/{team['tenant'].slug}/jobs/{notebook.name}/"
    [row] = [e for e in api.get(job_url).json()["endpoints"] if e["name"] == "jupyter"]
    assert row["closed_by_admin"] is True
    client.force_login(team["bob"])
    page = client.get(f"/tenants/{team['tenant'].slug}/jobs/{notebook.name}/").content.decode()
    assert 'data-testid="endpoint-closed-by-admin"' in page
    closed = client.get(f"/endpoints/closed/?host={jupyter.host}", HTTP_ACCEPT="text/html")
    assert "A platform admin closed it." in closed.content.decode()

    api.force_login(team["admin"])
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post(url, {"hours": 4}, format="json").status_code == 200
    assert cluster.get(*ROUTE, jupyter.service_name, team["tenant"].namespace) is not None
    api.force_login(team["bob"])  # opened again: its owner extends it as before
    assert api.post(url, {"hours": 2}, format="json").status_code == 200
