"""IP pools in the browser and the API: platform admins manage them, members see theirs."""

import uuid

import pytest
from rest_framework.test import APIClient

from k8s_adapters.multus import NAD_API
from networking import services
from networking.models import IPPool
from tenants.choices import TenantState
from tenants.models import AuditEvent, Tenant
from tests.conftest import sign_in

NAD = "NetworkAttachmentDefinition"


def api(user):
    client = APIClient()
    client.force_login(user)
    return client


POOL = {
    "name": "mgmt-a",
    "purpose": "management",
    "cidr": "10.88.0.0/24",
    "range_start": "10.88.0.10",
    "range_end": "10.88.0.12",
    "gateway": "10.88.0.1",
    "master": "enp5s0",
    "vlan": 88,
}


@pytest.mark.django_db
def test_only_platform_admins_manage_pools_and_members_see_the_pools_of_their_tenant(team, admin):
    services.create_pool(actor=admin, tenants=[team["tenant"]], **POOL)
    services.create_pool(actor=admin, **{**POOL, "name": "hidden", "vlan": 89})
    for who in ["alice", "bob", "dave", "charlie"]:
        assert api(team[who]).get("/network/pools/").status_code == 403
        assert (
            api(team[who])
            .post("/api/v1/ip-pools/", {**POOL, "name": "x", "vlan": 90}, format="json")
            .status_code
            == 403
        )
    names = [p["name"] for p in api(team["bob"]).get("/api/v1/ip-pools/").json()["results"]]
    assert names == ["mgmt-a"]
    assert api(team["charlie"]).get("/api/v1/ip-pools/").json()["results"] == []
    assert api(team["charlie"]).get("/api/v1/ip-pools/mgmt-a/").status_code == 404
    assert api(team["bob"]).get("/api/v1/ip-pools/mgmt-a/reservations/").status_code == 403


@pytest.mark.django_db
def test_the_api_refuses_bad_pools_with_field_errors_and_answers_409_when_full(team, admin):
    client = api(admin)
    response = client.post("/api/v1/ip-pools/", {**POOL, "range_end": "10.88.0.255"}, format="json")
    assert response.status_code == 400
    assert "broadcast (10.88.0.255)" in response.json()["errors"]["range_end"][0]["message"]
    response = client.post(
        "/api/v1/ip-pools/", {**POOL, "tenants": [team["tenant"].slug]}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["usage"] == {
        "total": 3,
        "excluded": 0,
        "reserved": 0,
        "allocated": 0,
        "free": 3,
    }
    url = "/api/v1/ip-pools/mgmt-a/reservations/"
    body = {"tenant": team["tenant"].slug, "owner": "bob"}
    made = [client.post(url, body, format="json").json() for _ in range(2)]
    made.append(client.post(url, {**body, "pinned": False}, format="json").json())
    assert [r["ip"] for r in made] == ["10.88.0.10", "10.88.0.11", "10.88.0.12"]
    # As on the pool page: reserved for the owner's jobs (only a pinned one goes to a launch).
    assert [r["pinned"] for r in made] == [True, True, False]
    full = client.post(url, body, format="json")
    assert full.status_code == 409
    assert full.json()["detail"] == "Pool mgmt-a has no free address left."
    assert AuditEvent.objects.filter(action="ip_reservation.create").count() == 3


@pytest.mark.django_db
def test_a_member_sees_a_shared_pool_without_who_else_uses_it(team, admin):
    """A pool open to two tenants: a member of one sees neither the other tenant nor the
    addresses its pods hold; a tenant admin's change is refused before it is read."""
    other = Tenant.objects.create(slug=f"other-{uuid.uuid4().hex[:6]}", display_name="Other")
    pool = services.create_pool(actor=admin, tenants=[team["tenant"], other], **POOL)
    IPPool.objects.filter(pk=pool.pk).update(
        observed_allocations=[{"address": "10.88.0.10", "podref": f"{other.namespace}/secret-pod"}],
        sync_message=f'forbidden: namespace "{other.namespace}" is being terminated',
    )
    seen = api(team["bob"]).get("/api/v1/ip-pools/mgmt-a/").json()
    assert seen["tenants"] == [team["tenant"].slug]
    assert seen["observed_allocations"] == []
    assert "secret-pod" not in str(seen)
    assert other.namespace not in str(seen)  # nor a sync error naming its namespace
    everything = api(admin).get("/api/v1/ip-pools/mgmt-a/").json()
    assert sorted(everything["tenants"]) == sorted([team["tenant"].slug, other.slug])
    assert "secret-pod" in str(everything["observed_allocations"])
    for body in ({"tenants": ["no-such-tenant"]}, {"tenants": [other.slug]}, {"vlan": "x"}):
        answer = api(team["alice"]).patch("/api/v1/ip-pools/mgmt-a/", body, format="json")
        assert answer.status_code == 403, answer.json()
        assert answer.json()["detail"] == "Only platform admins can do this."
    assert api(team["charlie"]).patch("/api/v1/ip-pools/mgmt-a/", {}).status_code == 404


@pytest.mark.django_db
def test_an_address_is_reserved_only_for_a_member_of_its_tenant(team, admin):
    services.create_pool(actor=admin, tenants=[team["tenant"]], **POOL)
    url = "/api/v1/ip-pools/mgmt-a/reservations/"
    answer = api(admin).post(url, {"tenant": team["tenant"].slug, "owner": "charlie"})
    assert answer.status_code == 400
    assert answer.json()["errors"]["owner"][0]["message"] == (
        f"charlie is not a member of {team['tenant'].slug}; add them first."
    )
    assert not services.IPReservation.objects.exists()
    assert api(admin).post(url, {"tenant": team["tenant"].slug, "owner": "dave"}).status_code == 201


@pytest.mark.browser
def test_an_admin_creates_a_pool_in_the_browser_and_the_tenant_gets_its_nad(
    page, live_server, worker, cluster, team
):
    sign_in(page, live_server.url, "admin", "pw-admin")
    page.goto(f"{live_server.url}/network/pools/new/")
    page.fill("#id_name", "compute-b")
    page.select_option("#id_purpose", "compute")
    page.fill("#id_cidr", "10.99.0.0/16")
    page.fill("#id_range_start", "10.99.1.0")
    page.fill("#id_range_end", "10.99.9.255")
    page.fill("#id_gateway", "10.99.0.1")
    page.fill("#id_exclusions", "10.99.1.0-10.99.1.9\n10.99.2.0/24")
    page.fill("#id_master", "bond1")
    page.fill("#id_vlan", "300")
    page.fill("#id_mtu", "9000")
    page.get_by_label(team["tenant"].display_name).first.check()
    page.click("text=Save")
    page.wait_for_url("**/network/pools/compute-b/")
    assert "2038 free of 2304 · 266 excluded" in page.locator("[data-testid=usage]").inner_text()
    from tests.helpers import wait_for

    nad = wait_for(  # the worker reconciles it; generous on a busy machine
        lambda: cluster.get(NAD_API, NAD, "pool-compute-b", team["tenant"].namespace),
        timeout=60,
        message="the NetworkAttachmentDefinition",
    )
    assert '"master": "bond1.300"' in nad["spec"]["config"]

    page.goto(f"{live_server.url}/network/pools/new/")
    page.fill("#id_name", "compute-c")
    page.fill("#id_cidr", "10.99.0.0/16")
    page.fill("#id_range_start", "10.99.5.0")
    page.fill("#id_range_end", "10.99.5.255")
    page.fill("#id_master", "bond1")
    page.fill("#id_vlan", "300")
    page.click("text=Save")
    assert page.locator("ul.errorlist", has_text="overlaps pool 'compute-b'").count() == 1
    assert not IPPool.objects.filter(name="compute-c").exists()


@pytest.mark.django_db
def test_pools_larger_than_whereabouts_copes_with_are_saved_with_a_warning(team, admin):
    big = {**POOL, "name": "big", "cidr": "10.89.0.0/18", "range_start": "10.89.0.1"}
    big.update(range_end="10.89.63.254", gateway=None, vlan=91)
    response = api(admin).post("/api/v1/ip-pools/", big, format="json")
    assert response.status_code == 201
    assert response.json()["warnings"] == [
        "This range holds 16382 addresses. Whereabouts keeps all allocations of a range in one "
        "object, which the cluster refuses to store past about 10,000 allocations, and each "
        "allocation takes over a second from about 4,000 on. Split it into pools of at most "
        "8192 addresses."
    ]
    fits = {**big, "name": "fits", "cidr": "10.90.0.0/19", "range_start": "10.90.0.1"}
    fits.update(range_end="10.90.31.254", vlan=93)
    assert api(admin).post("/api/v1/ip-pools/", fits, format="json").json()["warnings"] == []

    client = api(admin)
    form = {**big, "name": "big-form", "vlan": "92", "cni_type": "ipvlan-l2", "mtu": "1500"}
    form.update(purpose="compute", gateway="", exclusions="")
    page = client.post("/network/pools/new/", form, follow=True).content.decode()
    assert "This range holds 16382 addresses." in page


@pytest.mark.django_db
def test_two_admins_editing_a_pool_keep_each_others_changes(team, admin):
    """The edit page sends back every box: read against the pool as it was when the form came
    back, a box another admin changed meanwhile counted as changed back (one admin's MTU undid
    the other's new tenant). Only what each changed is changed, and a box both changed is
    refused with what it is now."""
    pool = services.create_pool(actor=admin, tenants=[], **POOL)
    client = api(admin)
    url = f"/network/pools/{pool.name}/edit/"
    form = client.get(url).context["form"]
    sent = {f.name: f.value() for f in form if f.value() not in (None, "")}
    sent["exclusions"] = ""
    other = Tenant.objects.create(slug=f"other-{uuid.uuid4().hex[:6]}", display_name="Other")
    services.update_pool(pool, actor=admin, tenants=[other], vlan=89)  # another admin, meanwhile
    saved = client.post(url, {**sent, "mtu": "9000"})
    assert saved.status_code == 302, saved.context["form"].errors
    pool.refresh_from_db()
    assert (pool.mtu, pool.vlan, [t.slug for t in pool.tenants.all()]) == (9000, 89, [other.slug])

    clash = client.post(url, {**sent, "vlan": "90", "tenants": [team["tenant"].pk]})
    assert clash.status_code == 200
    assert clash.context["form"].errors == {
        "vlan": [
            "Another admin changed this to 89 since you opened the page; reload it and decide "
            "again."
        ],
        "tenants": [
            f"Another admin changed this to {other.slug} since you opened the page; reload it "
            "and decide again."
        ],
    }
    pool.refresh_from_db()
    assert (pool.vlan, [t.slug for t in pool.tenants.all()]) == (89, [other.slug])
    altered = client.post(url, {**sent, "shown": "forged", "mtu": "1400"})
    assert "This page was altered" in altered.content.decode()


@pytest.mark.django_db
def test_an_api_client_puts_a_pool_only_over_the_pool_it_read(team, admin):
    """A PUT sends every field: over a change another admin made since the client's read, it
    would undo it. Sent with the ETag of that read in If-Match, it is refused (412) and changes
    nothing; with the tag read again, it goes through."""
    pool = services.create_pool(actor=admin, tenants=[team["tenant"]], **POOL)
    client, url = api(admin), f"/api/v1/ip-pools/{pool.name}/"
    read = client.get(url)
    body = {k: v for k, v in read.json().items() if k in {*POOL, "mtu", "tenants"}}
    other = Tenant.objects.create(slug=f"other-{uuid.uuid4().hex[:6]}", display_name="Other")
    services.update_pool(pool, actor=admin, tenants=[team["tenant"], other])  # meanwhile

    stale = client.put(url, {**body, "mtu": 9000}, format="json", HTTP_IF_MATCH=read["ETag"])
    assert stale.status_code == 412
    assert stale.json()["detail"].startswith(f"The pool {pool.name} changed since you read it")
    pool.refresh_from_db()
    assert pool.mtu != 9000
    assert pool.tenants.count() == 2  # not undone

    again = client.get(url)
    body = {k: v for k, v in again.json().items() if k in {*POOL, "mtu", "tenants"}}
    saved = client.put(url, {**body, "mtu": 9000}, format="json", HTTP_IF_MATCH=again["ETag"])
    assert saved.status_code == 200, saved.json()
    assert saved["ETag"] == client.get(url)["ETag"] != again["ETag"]
    pool.refresh_from_db()
    assert (pool.mtu, pool.tenants.count()) == (9000, 2)
    # A member reads the pool without it: its tag would change when a tenant they cannot see
    # joins the pool, and only platform admins write pools.
    seen_by_member = api(team["bob"]).get(url)
    assert seen_by_member.status_code == 200
    assert "ETag" not in seen_by_member


@pytest.mark.django_db
def test_an_edit_leaves_an_archived_tenant_on_the_pool_and_an_unchanged_form_saves_nothing(
    team, admin
):
    """The form offered only active tenants: any save took an archived one off the pool."""
    pool = services.create_pool(actor=admin, tenants=[team["tenant"]], **POOL)
    Tenant.objects.filter(pk=team["tenant"].pk).update(state=TenantState.ARCHIVED)
    client = api(admin)
    url = f"/network/pools/{pool.name}/edit/"
    form = client.get(url).context["form"]
    sent = {f.name: f.value() for f in form if f.value() not in (None, "")}
    sent["exclusions"] = ""
    unchanged = client.post(url, sent, follow=True)
    assert f"Nothing changed in pool {pool.name}." in unchanged.content.decode()
    assert not AuditEvent.objects.filter(action="ip_pool.update").exists()
    assert client.post(url, {**sent, "mtu": "9000"}).status_code == 302
    pool.refresh_from_db()
    assert (pool.mtu, list(pool.tenants.all())) == (9000, [team["tenant"]])


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"range_start": ""}, "range_start"),
        ({"range_end": "not an address"}, "range_end"),
        ({"cidr": ""}, "cidr"),
    ],
)
def test_a_pool_form_missing_an_address_says_which_and_saves_nothing(admin, change, field):
    form = {**POOL, "name": "half", "cni_type": "ipvlan-l2", "mtu": "1500", "exclusions": ""}
    form.update(purpose="management", **change)
    page = api(admin).post("/network/pools/new/", form)
    assert page.status_code == 200  # the form again, with its error; never a 500
    assert f'id="id_{field}"' in page.content.decode()
    assert page.context["form"].errors[field]
    assert not IPPool.objects.filter(name="half").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("exclusions", [[1], [None], [{"a": 1}], "10.88.0.5"])
def test_exclusions_that_are_not_a_list_of_addresses_are_a_field_error(admin, exclusions):
    body = {**POOL, "name": "excl", "exclusions": exclusions}
    answer = api(admin).post("/api/v1/ip-pools/", body, format="json")
    assert answer.status_code == 400
    assert "exclusions" in answer.json()["errors"]


@pytest.mark.django_db
def test_a_reservation_on_a_pool_deleted_meanwhile_is_a_404_not_a_500(team, admin, monkeypatch):
    """The pool is read, then locked: a delete in between made the service's refusal (a
    message without a field) a crash of the API's error handling."""
    from networking.api import PoolViewSet

    pool = services.create_pool(actor=admin, tenants=[team["tenant"]], **POOL)
    read, found = PoolViewSet.get_object, []

    def read_then_deleted(view):
        if not found:
            found.append(read(view))
            IPPool.objects.filter(pk=pool.pk).delete()  # another admin's, committed between
        return found[0]

    monkeypatch.setattr(PoolViewSet, "get_object", read_then_deleted)
    answer = api(admin).post(
        "/api/v1/ip-pools/mgmt-a/reservations/",
        {"tenant": team["tenant"].slug, "owner": "bob"},
        format="json",
    )
    assert answer.status_code == 404
    assert answer.json()["detail"] == "The pool mgmt-a was deleted meanwhile."


@pytest.mark.django_db
def test_a_pod_reference_with_a_nul_is_refused_in_words(team, admin, client):
    """The API's field refuses it; the page did not, and the audit record's write was a 500."""
    services.create_pool(actor=admin, tenants=[team["tenant"]], **POOL)
    client.force_login(admin)
    url = "/network/pools/mgmt-a/allocations/release/"
    page = client.post(url, {"address": "10.88.0.10", "podref": "ns/p\x00"}, follow=True)
    assert page.status_code == 200
    assert "The pod reference holds a NUL character; copy it again." in page.content.decode()


@pytest.mark.django_db
def test_the_pool_list_costs_the_same_queries_however_many_pools_it_shows(
    team, admin, client, django_assert_max_num_queries
):
    """One query (or four) per pool: a reservations read, a count, and every pool again."""

    def pools(count, start):
        for i in range(start, start + count):
            net = f"10.{60 + i}.0"
            fields = {**POOL, "name": f"list-{i}", "cidr": f"{net}.0/24", "vlan": 60 + i}
            fields |= {"range_start": f"{net}.10", "range_end": f"{net}.12", "gateway": f"{net}.1"}
            made = services.create_pool(actor=admin, tenants=[team["tenant"]], **fields)
            services.reserve_address(made, tenant=team["tenant"], owner=team["bob"], actor=admin)

    def queries(url, who):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as seen:
            assert who.get(url).status_code == 200
        return len(seen)

    client.force_login(admin)
    pools(2, 0)
    few = (queries("/network/pools/", client), queries("/api/v1/ip-pools/", api(admin)))
    member = queries("/api/v1/ip-pools/", api(team["bob"]))
    pools(6, 2)
    assert (queries("/network/pools/", client), queries("/api/v1/ip-pools/", api(admin))) == few
    assert queries("/api/v1/ip-pools/", api(team["bob"])) == member
