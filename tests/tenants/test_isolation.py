"""Every tenant page and API endpoint, for every role, against its own and another tenant."""

import pytest
from rest_framework.test import APIClient

from tenants.models import Membership, Tenant
from tests.tenants.conftest import make_user

pytestmark = pytest.mark.django_db

# (name, method, path, data, who may: "member" = any role in the tenant, "admin" = tenant admin,
#  "platform" = platform admins only)
ENDPOINTS = [
    ("page detail", "get", "/tenants/{slug}/", None, "member"),
    ("page sync", "get", "/tenants/{slug}/sync/", None, "member"),
    ("page edit", "get", "/tenants/{slug}/edit/", None, "platform"),
    (
        "page edit post",
        "post",
        "/tenants/{slug}/edit/",
        {
            "display_name": "X",
            "gpu_quota": 16,
            "cpu_quota": 64,
            "memory_quota_gib": 512,
            "storage_quota_gib": 1024,
            "pvc_quota": 50,
            "pod_quota": 256,
            "max_running_jobs": 20,
            "endpoint_default_hours": 8,
            "endpoint_max_hours": 72,
            "queue_weight": 1,
            "queue_guarantee_gpus": 0,
        },
        "platform",
    ),
    ("page archive", "post", "/tenants/{slug}/archive/", {}, "platform"),
    (
        "page add member",
        "post",
        "/tenants/{slug}/members/",
        {"username": "eve", "role": "viewer"},
        "admin",
    ),
    ("page change member", "post", "/tenants/{slug}/members/{mid}/", {"role": "viewer"}, "admin"),
    ("page remove member", "post", "/tenants/{slug}/members/{mid}/", {"remove": "1"}, "admin"),
    ("api detail", "get", "/api/v1/tenants/{slug}/", None, "member"),
    ("api update", "patch", "/api/v1/tenants/{slug}/", {"display_name": "X"}, "platform"),
    ("api archive", "post", "/api/v1/tenants/{slug}/archive/", {}, "platform"),
    ("api members", "get", "/api/v1/tenants/{slug}/members/", None, "member"),
    ("api member", "get", "/api/v1/tenants/{slug}/members/{mid}/", None, "member"),
    (
        "api add member",
        "post",
        "/api/v1/tenants/{slug}/members/",
        {"username": "eve", "role": "viewer"},
        "admin",
    ),
    (
        "api change member",
        "patch",
        "/api/v1/tenants/{slug}/members/{mid}/",
        {"role": "viewer"},
        "admin",
    ),
    ("api remove member", "delete", "/api/v1/tenants/{slug}/members/{mid}/", None, "admin"),
]
ROLES = ["platform", "alice", "bob", "dave"]  # platform admin, tenant admin, researcher, viewer
MAY = {
    "member": {"platform", "alice", "bob", "dave"},
    "admin": {"platform", "alice"},
    "platform": {"platform"},
}


def login(people, admin_user, who):
    client = APIClient()
    client.force_login(admin_user if who == "platform" else people[who])
    return client


def call(client, method, path, data):
    if path.startswith("/api/"):
        return getattr(client, method)(path, data, format="json")
    return getattr(client, method)(path, data or {})


@pytest.mark.parametrize("who", ROLES)
@pytest.mark.parametrize(
    ("name", "method", "path", "data", "needs"), ENDPOINTS, ids=[e[0] for e in ENDPOINTS]
)
def test_access_to_own_tenant_follows_the_role(
    people, admin_user, cluster, who, name, method, path, data, needs
):
    make_user("eve")
    tenant = people["vision"]
    target = Membership.objects.get(tenant=tenant, user=people["bob"])
    url = path.format(slug=tenant.slug, mid=target.pk)
    response = call(login(people, admin_user, who), method, url, data)
    if who in MAY[needs]:
        assert response.status_code < 400, response.content[:300]
    else:
        assert response.status_code == 403


@pytest.mark.parametrize("who", ["alice", "bob", "dave"])
@pytest.mark.parametrize(
    ("name", "method", "path", "data", "needs"), ENDPOINTS, ids=[e[0] for e in ENDPOINTS]
)
def test_another_tenant_does_not_exist_for_outsiders(
    people, admin_user, who, name, method, path, data, needs
):
    other = people["nlp"]
    target = Membership.objects.get(tenant=other, user=people["charlie"])
    url = path.format(slug=other.slug, mid=target.pk)
    before = list(Membership.objects.values_list("pk", "role").order_by("pk"))
    response = call(login(people, admin_user, who), method, url, data)
    assert response.status_code == 404
    assert list(Membership.objects.values_list("pk", "role").order_by("pk")) == before
    assert Tenant.objects.get(pk=other.pk).display_name == "NLP"


@pytest.mark.parametrize(
    ("name", "method", "path", "data", "needs"), ENDPOINTS, ids=[e[0] for e in ENDPOINTS]
)
def test_anonymous_users_are_sent_to_sign_in_or_refused(people, name, method, path, data, needs):
    tenant = people["vision"]
    target = Membership.objects.get(tenant=tenant, user=people["bob"])
    response = call(APIClient(), method, path.format(slug=tenant.slug, mid=target.pk), data)
    if path.startswith("/api/"):
        assert response.status_code in (401, 403)
    else:
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")


def test_lists_show_only_the_users_tenants(people, admin_user):
    own, other = people["vision"].slug, people["nlp"].slug
    for who in ["alice", "bob", "dave"]:
        client = login(people, admin_user, who)
        slugs = [t["slug"] for t in client.get("/api/v1/tenants/").json()["results"]]
        assert slugs == [own]
        page = client.get("/tenants/").content.decode()
        assert own in page
        assert other not in page
    everyone = login(people, admin_user, "platform").get("/api/v1/tenants/").json()["results"]
    assert {own, other} <= {t["slug"] for t in everyone}


@pytest.mark.parametrize("who", ["alice", "bob", "dave"])
def test_only_platform_admins_create_tenants_and_read_the_audit_log(people, admin_user, who):
    client = login(people, admin_user, who)
    assert (
        client.post(
            "/api/v1/tenants/", {"slug": "new", "display_name": "New"}, format="json"
        ).status_code
        == 403
    )
    assert client.get("/tenants/new/").status_code == 403
    assert client.get("/api/v1/audit-events/").status_code == 403
    assert client.get("/audit/").status_code == 403
    assert not Tenant.objects.filter(slug="new").exists()
