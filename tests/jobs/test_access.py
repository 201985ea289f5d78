"""Job pages and API for every role: outsiders get 404, viewers 403 on writes, researchers
change only their own jobs, tenant admins everyone's."""

import pytest
from rest_framework.test import APIClient

from jobs import services
from jobs.models import DataVolume, Job
from tenants.choices import Role
from tenants.models import Membership
from tests.tenants.conftest import make_user

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


def test_only_a_volumes_creator_or_a_tenant_admin_deletes_it(
    team, templates, django_capture_on_commit_callbacks
):
    """A teammate's finished experiment is not one click away from anyone in the tenant: not
    on the page, not in the API, not by deleting a job of one's own that used it."""
    slug = team["tenant"].slug
    volume = services.create_data_volume(
        team["tenant"], name="corpus", size_gib=10, actor=team["alice"]
    )
    with django_capture_on_commit_callbacks(execute=True):
        job, _ = services.launch_job(
            team["tenant"],
            team["bob"],
            actor=team["bob"],
            template_version=templates["single-gpu"],
            name="reader",
            data_volume=volume,
        )
    Job.objects.filter(pk=job.pk).update(state="succeeded")
    bob = client_for(team["bob"])
    page = bob.get(f"/tenants/{slug}/volumes/").content.decode()
    assert 'name="delete"' not in page
    assert "Expand" in page
    assert bob.post(f"/tenants/{slug}/volumes/{volume.pk}/", {"delete": "1"}).status_code == 403
    assert bob.delete(f"/api/v1/tenants/{slug}/volumes/{volume.pk}/").status_code == 403
    response = bob.delete(f"/api/v1/tenants/{slug}/jobs/reader/?delete_data=true")
    assert response.status_code == 400
    assert "corpus is alice's: only they or a tenant admin delete it" in response.content.decode()
    assert not Job.objects.get(pk=job.pk).delete_requested  # nothing half-done
    assert not DataVolume.objects.get(pk=volume.pk).delete_requested
    viewer_page = client_for(team["dave"]).get(f"/tenants/{slug}/volumes/").content.decode()
    assert "Expand" not in viewer_page
    assert "New data volume" not in viewer_page
    alice = client_for(team["alice"])
    page = alice.get(f"/tenants/{slug}/volumes/").content.decode()
    assert "return confirm('Delete data volume corpus" in page
    assert alice.delete(f"/api/v1/tenants/{slug}/volumes/{volume.pk}/").status_code == 204
    assert DataVolume.objects.get(pk=volume.pk).delete_requested


def test_viewers_are_offered_no_launch_they_would_be_refused(team, bobs_job):
    slug = team["tenant"].slug
    pages = ["/", f"/tenants/{slug}/jobs/", f"/tenants/{slug}/jobs/bobs/"]
    for who, offered in [("dave", False), ("bob", True)]:
        client = client_for(team[who])
        for page in pages:
            text = client.get(page).content.decode()
            launches = f'href="/tenants/{slug}/jobs/launch/"' in text or "Relaunch" in text
            assert launches == offered, (who, page)


def test_a_status_panel_that_lost_its_page_reloads_it(team, bobs_job):
    """Its polling signed out (a redirect to sign in) or after the job went (404) reloads the
    page, which says so; htmx would swap the sign-in page into the panel, or poll for good."""
    url = f"/tenants/{team['tenant'].slug}/jobs/bobs/status/"
    client = client_for(team["bob"])
    assert client.get(url, HTTP_HX_REQUEST="true").status_code == 200
    assert "HX-Refresh" not in client.get(url, HTTP_HX_REQUEST="true")
    client.logout()
    response = client.get(url, HTTP_HX_REQUEST="true")
    assert (response.status_code, response["HX-Refresh"]) == (200, "true")
    assert response.content == b""
    assert client.get(url).status_code == 302  # a plain request is redirected to sign in
    outsider = client_for(team["charlie"])
    assert outsider.get(url, HTTP_HX_REQUEST="true")["HX-Refresh"] == "true"
    assert outsider.get(url).status_code == 404


def test_the_job_lists_next_page_keeps_a_filter_with_a_plus(team, templates):
    """Usernames may hold '+' (e-mail style): the page links encode the filter, or page 2 read
    it as a space and matched nobody."""
    eve = make_user("eve+gpu@lab.example")
    Membership.objects.create(tenant=team["tenant"], user=eve, role=Role.RESEARCHER)
    for i in range(26):
        services.launch_job(
            team["tenant"], eve, actor=eve, template_version=templates["single-gpu"], name=f"e{i}"
        )
    client = client_for(team["bob"])
    url = f"/tenants/{team['tenant'].slug}/jobs/"
    page = client.get(url, {"owner": eve.username}).content.decode()
    assert "&owner=eve%2Bgpu%40lab.example&template=&page=2" in page
    second = client.get(url + "?owner=eve%2Bgpu%40lab.example&page=2").content.decode()
    assert "No jobs match" not in second
    assert f"{url}e0/" in second  # the oldest, alone on page 2


def test_the_api_previews_a_launch_without_creating_anything(team, templates):
    """The launch page's Preview, in the API: what it would apply, its GPUs; the same refusals
    as a launch; viewers and outsiders get none."""
    url = f"/api/v1/tenants/{team['tenant'].slug}/jobs/?dry_run=true"
    body = {"template": "single-gpu", "name": "would-be", "gpus": 2}
    answer = client_for(team["bob"]).post(url, body, format="json")
    assert answer.status_code == 200, answer.json()
    kinds = [o["kind"] for o in answer.json()["objects"]]
    assert kinds[0] == "PersistentVolumeClaim"
    assert kinds[-1] == "Job"
    assert answer.json()["objects"][-1]["metadata"]["name"] == "would-be"
    assert answer.json()["gpus"] == 2
    assert not Job.objects.exists()
    refused = client_for(team["bob"]).post(url, {**body, "gpus": 500}, format="json")
    assert refused.status_code == 400
    assert "gpus" in refused.json()["errors"]
    assert client_for(team["dave"]).post(url, body, format="json").status_code == 403
    assert client_for(team["charlie"]).post(url, body, format="json").status_code == 404
    maybe = client_for(team["bob"]).post(url.replace("true", "maybe"), body, format="json")
    assert maybe.json()["errors"]["dry_run"][0]["message"] == "Use true or false."


def test_the_api_shows_a_jobs_manifests_to_its_tenants_members(team, bobs_job):
    url = f"/api/v1/tenants/{team['tenant'].slug}/jobs/bobs/manifests/"
    manifests = client_for(team["dave"]).get(url).json()
    assert {m["kind"] for m in manifests} >= {"Job", "PersistentVolumeClaim"}
    assert client_for(team["charlie"]).get(url).status_code == 404


def test_a_volumes_and_a_pools_fixed_fields_are_refused_by_name_when_changed(team):
    """The API kept the old name or storage class without a word, or blamed the size."""
    slug = team["tenant"].slug
    bob = client_for(team["bob"])
    made = bob.post(f"/api/v1/tenants/{slug}/volumes/", {"name": "corpus", "size_gib": 10})
    url = f"/api/v1/tenants/{slug}/volumes/{made.json()['id']}/"
    for change in ({"name": "other"}, {"storage_class": "fast"}):
        refused = bob.patch(url, change, format="json")
        assert refused.status_code == 400
        [field] = change
        assert refused.json()["errors"][field][0]["message"].startswith("Set when it is made")
    assert bob.patch(url, {"name": "corpus"}, format="json").status_code == 200  # unchanged
    grown = bob.patch(url, {"size_gib": 20}, format="json")
    assert grown.json()["size_gib"] == 20
    admin = client_for(team["admin"])
    pool = {"name": "mgmt", "purpose": "management", "cidr": "10.77.0.0/24", "master": "eth1"}
    pool |= {"range_start": "10.77.0.10", "range_end": "10.77.0.20"}
    made = admin.post("/api/v1/ip-pools/", pool, format="json")
    assert made.status_code == 201, made.json()
    renamed = admin.patch("/api/v1/ip-pools/mgmt/", {"name": "other"}, format="json")
    assert renamed.status_code == 400
    assert "name" in renamed.json()["errors"]
