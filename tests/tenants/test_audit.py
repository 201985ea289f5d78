"""Every change is in the audit log (who, what, before and after, when), filterable by admins."""

import pytest
from rest_framework.test import APIClient

from tenants import services
from tenants.choices import Role
from tenants.models import AuditEvent, Membership
from tests.tenants.conftest import make_user

pytestmark = pytest.mark.django_db


def test_changes_are_recorded_with_actor_before_and_after(people, admin_user, new_slug, cluster):
    tenant = services.create_tenant(
        actor=admin_user, slug=new_slug(), display_name="Audit", gpu_quota=4
    )
    services.update_tenant(tenant, actor=admin_user, gpu_quota=6)
    eve = make_user("eve")
    membership = services.add_member(tenant, eve, Role.VIEWER, actor=admin_user)
    services.change_member_role(membership, Role.RESEARCHER, actor=admin_user)
    services.remove_member(membership, actor=admin_user)

    events = list(AuditEvent.objects.filter(tenant=tenant).order_by("id"))
    assert [e.action for e in events] == [
        "tenant.create",
        "tenant.update",
        "membership.add",
        "membership.change",
        "membership.remove",
    ]
    assert {e.actor_name for e in events} == {"admin"}
    update = events[1]
    assert update.changes() == [("gpu_quota", 4, 6)]
    assert events[3].before["role"] == "viewer"
    assert events[3].after["role"] == "researcher"
    assert events[4].after is None


def test_an_update_that_changes_nothing_is_not_recorded(admin_user, new_slug, cluster):
    tenant = services.create_tenant(actor=admin_user, slug=new_slug(), display_name="Same")
    services.update_tenant(tenant, actor=admin_user, display_name="Same")
    assert AuditEvent.objects.filter(tenant=tenant).count() == 1


def test_platform_admins_filter_the_log_in_the_browser_and_the_api(people, admin_user):
    vision, nlp = people["vision"], people["nlp"]
    services.change_member_role(
        Membership.objects.get(tenant=vision, user=people["bob"]),
        Role.VIEWER,
        actor=people["alice"],
    )
    services.add_member(nlp, people["dave"], Role.VIEWER, actor=admin_user)
    services.change_member_role(
        Membership.objects.get(tenant=nlp, user=people["dave"]),
        Role.RESEARCHER,
        actor=admin_user,
    )
    client = APIClient()
    client.force_login(admin_user)

    page = client.get("/audit/", {"tenant": vision.slug}).content.decode()
    assert "membership.change" in page
    assert "alice" in page
    assert "dave" not in page  # the change in nlp

    rows = client.get("/api/v1/audit-events/", {"actor": "alice"}).json()["results"]
    assert [(r["action"], r["tenant"], r["before"]["role"], r["after"]["role"]) for r in rows] == [
        ("membership.change", vision.slug, "researcher", "viewer")
    ]
    rows = client.get("/api/v1/audit-events/", {"action": "tenant.create"}).json()["results"]
    assert rows == []


@pytest.mark.parametrize(
    "params",
    [{"action": "tenant.create\x00"}, {"actor": "\x00"}, {"since": "2026-02-30"}],
)
def test_hostile_filters_filter_nothing_instead_of_failing(admin_user, params):
    client = APIClient()
    client.force_authenticate(admin_user)
    assert client.get("/api/v1/audit-events/", params).status_code == 200
    assert client.get("/api/v1/audit-events/1/", params).status_code in (200, 404)
