"""Job pages and API for every role: outsiders get 404, viewers 403 on writes, researchers
change only their own jobs, tenant admins everyone's."""

import pytest
from rest_framework.test import APIClient

from jobs import services
from jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def bobs_job(team, templates, cluster, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        job, _ = services.launch_job(
            team["tenant"],
            team["bob"],
            actor=team["bob"],
            template_version=templates["single-gpu"],
            name="bobs",
        )
    return job


def client_for(user):
    client = APIClient()
    client.force_login(user)
    return client


READS = [
    "/tenants/{slug}/jobs/",
    "/tenants/{slug}/jobs/bobs/",
    "/tenants/{slug}/jobs/bobs/status/",
    "/tenants/{slug}/jobs/bobs/logs/",
    "/tenants/{slug}/volumes/",
    "/api/v1/tenants/{slug}/jobs/",
    "/api/v1/tenants/{slug}/jobs/bobs/",
    "/api/v1/tenants/{slug}/jobs/bobs/events/",
    "/api/v1/tenants/{slug}/jobs/bobs/pods/",
    "/api/v1/tenants/{slug}/volumes/",
]
WRITES = [
    ("post", "/tenants/{slug}/jobs/bobs/cancel/"),
    ("post", "/api/v1/tenants/{slug}/jobs/bobs/cancel/"),
    ("delete", "/api/v1/tenants/{slug}/jobs/bobs/"),
]


@pytest.mark.parametrize("path", READS)
def test_members_read_and_outsiders_do_not_see_the_tenant(team, bobs_job, path):
    url = path.format(slug=team["tenant"].slug)
    for who in ["alice", "bob", "dave", "admin"]:
        assert client_for(team[who]).get(url).status_code == 200, who
    assert client_for(team["charlie"]).get(url).status_code == 404


@pytest.mark.parametrize(("method", "path"), WRITES)
@pytest.mark.parametrize(("who", "expected"), [("charlie", 404), ("dave", 403)])
def test_outsiders_and_viewers_cannot_change_a_job(team, bobs_job, method, path, who, expected):
    url = path.format(slug=team["tenant"].slug)
    assert getattr(client_for(team[who]), method)(url).status_code == expected
    job = Job.objects.get(pk=bobs_job.pk)
    assert (job.cancel_requested, job.delete_requested) == (False, False)


@pytest.mark.parametrize("who", ["bob", "alice", "admin"])
def test_the_owner_and_tenant_admins_cancel(team, bobs_job, who):
    response = client_for(team[who]).post(
        f"/api/v1/tenants/{team['tenant'].slug}/jobs/bobs/cancel/"
    )
    assert response.status_code == 200
    assert Job.objects.get(pk=bobs_job.pk).cancel_requested


def test_a_researcher_cannot_cancel_a_teammates_job(
    team, templates, cluster, bobs_job, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        services.launch_job(
            team["tenant"],
            team["alice"],
            actor=team["alice"],
            template_version=templates["single-gpu"],
            name="alices",
        )
    response = client_for(team["bob"]).post(
        f"/api/v1/tenants/{team['tenant'].slug}/jobs/alices/cancel/"
    )
    assert response.status_code == 403
    assert not Job.objects.get(name="alices").cancel_requested


@pytest.mark.parametrize(("who", "expected"), [("dave", 403), ("charlie", 404)])
def test_viewers_and_outsiders_cannot_launch(team, templates, who, expected):
    slug = team["tenant"].slug
    client = client_for(team[who])
    response = client.post(
        f"/api/v1/tenants/{slug}/jobs/", {"template": "single-gpu"}, format="json"
    )
    assert response.status_code == expected
    assert client.get(f"/tenants/{slug}/jobs/launch/").status_code == expected
    assert not Job.objects.exists()


def test_the_api_launches_from_a_template_with_overrides_and_reports_field_errors(
    team, templates, cluster, django_capture_on_commit_callbacks
):
    client = client_for(team["bob"])
    url = f"/api/v1/tenants/{team['tenant'].slug}/jobs/"
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            url,
            {"template": "pytorch-ddp", "name": "api-ddp", "gpus": 4, "replicas": {"worker": 1}},
            format="json",
        )
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["name"], body["gpus"], body["state"]) == ("api-ddp", 8, "submitting")
    assert response["Location"] == f"{url}api-ddp/"  # where the new job lives
    got = client.get(response["Location"]).json()
    assert got["state"] == "pending", got["message"]

    response = client.post(
        url, {"template": "pytorch-ddp", "name": "Bad Name", "image": "nope nope"}, format="json"
    )
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors["name"][0]["code"] == "invalid_name"


def test_a_tenant_page_reads_the_tenant_and_the_callers_role_in_one_query(
    team, django_assert_num_queries
):
    from django.core.exceptions import PermissionDenied
    from django.http import Http404

    from tenants.access import get_tenant_for_user
    from tenants.choices import Role
    from tenants.models import Membership
    from tests.tenants.conftest import make_user

    for i in range(30):  # however many members the tenant has
        Membership.objects.create(tenant=team["tenant"], user=make_user(f"m{i}"), role=Role.VIEWER)
    slug = team["tenant"].slug
    with django_assert_num_queries(1):
        assert get_tenant_for_user(team["alice"], slug, role=Role.ADMIN) == team["tenant"]
    with django_assert_num_queries(1), pytest.raises(PermissionDenied):
        get_tenant_for_user(team["dave"], slug, role=Role.RESEARCHER)  # a viewer
    with django_assert_num_queries(1), pytest.raises(Http404):
        get_tenant_for_user(team["charlie"], slug)  # not a member
