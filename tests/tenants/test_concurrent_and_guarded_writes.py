"""Writes that a careless or hostile client gets wrong: the same request sent twice at once, a
tenant left without an admin, an archived tenant changed, a parent queue that cannot be one, a
refusal that gives away what exists. Each answer is a field error that says what to fix."""

import uuid
from dataclasses import replace

import pytest
from rest_framework.test import APIClient

from k8s_adapters.client import Cluster
from k8s_adapters.errors import PermanentK8sError
from k8s_adapters.tenant import QUEUE_API, build_queue
from tenants import services
from tenants.choices import Role, TenantState
from tenants.models import AuditEvent, Membership, Tenant
from tests.helpers import at_once
from tests.tenants.conftest import make_user

pytestmark = pytest.mark.django_db


def api(user):
    client = APIClient()
    client.force_login(user)
    return client


def members_url(tenant, pk=""):
    return f"/api/v1/tenants/{tenant.slug}/members/" + (f"{pk}/" if pk else "")


def test_a_deactivated_admin_is_removed_though_no_other_admin_is_left(people):
    """A deactivated account manages nothing: it does not count as the admin kept."""
    people["admin"] = make_user("admin", staff=True)
    vision, alice = people["vision"], people["alice"]
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    own = Membership.objects.get(tenant=vision, user=alice)
    assert api(people["admin"]).delete(members_url(vision, own.pk)).status_code == 204
    assert not Membership.objects.filter(pk=own.pk).exists()


def test_a_tenants_only_admin_can_neither_step_down_nor_leave(people, client):
    vision, alice = people["vision"], people["alice"]
    own = Membership.objects.get(tenant=vision, user=alice)
    answer = api(alice).patch(members_url(vision, own.pk), {"role": "viewer"}, format="json")
    assert answer.status_code == 400
    assert answer.json()["errors"]["role"][0]["message"] == (
        f"alice is the only active admin of {vision.slug}; make another member admin first."
    )
    assert api(alice).delete(members_url(vision, own.pk)).status_code == 400
    client.force_login(alice)  # the page says the same
    page = client.post(
        f"/tenants/{vision.slug}/members/{own.pk}/", {"remove": "1"}, follow=True
    ).content.decode()
    assert "alice is the only active admin of" in page
    own.refresh_from_db()
    assert own.role == Role.ADMIN
    assert not AuditEvent.objects.filter(action__startswith="membership.").exists()

    bob = Membership.objects.get(tenant=vision, user=people["bob"])
    promoted = api(alice).patch(members_url(vision, bob.pk), {"role": "admin"}, format="json")
    assert promoted.status_code == 200
    # An admin whose account is deactivated manages nothing: she is still the only one.
    type(people["bob"]).objects.filter(pk=people["bob"].pk).update(is_active=False)
    assert api(alice).delete(members_url(vision, own.pk)).status_code == 400
    type(people["bob"]).objects.filter(pk=people["bob"].pk).update(is_active=True)
    assert api(alice).delete(members_url(vision, own.pk)).status_code == 204  # now she may


@pytest.mark.django_db(transaction=True)
def test_two_admins_stepping_down_at_once_leave_one_admin(people):
    vision = people["vision"]
    bob = Membership.objects.get(tenant=vision, user=people["bob"])
    services.change_member_role(bob, Role.ADMIN, actor=people["alice"])
    admins = list(Membership.objects.filter(tenant=vision, role=Role.ADMIN))
    calls = iter(admins)

    def step_down():
        membership = next(calls)
        return api(membership.user).patch(
            members_url(vision, membership.pk), {"role": "researcher"}, format="json"
        )

    answers = at_once(2, step_down)
    assert sorted(a.status_code for a in answers) == [200, 400]
    assert Membership.objects.filter(tenant=vision, role=Role.ADMIN).count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_same_member_added_twice_at_once_is_one_member_and_field_errors(people):
    vision, alice = people["vision"], people["alice"]

    def add():
        return api(alice).post(
            members_url(vision), {"username": "charlie", "role": "viewer"}, format="json"
        )

    answers = at_once(6, add)
    assert sorted(a.status_code for a in answers) == [201] + [400] * 5
    for answer in answers:
        if answer.status_code == 400:
            assert answer.json()["errors"]["username"][0]["message"] == (
                f"charlie is already a member of {vision.slug}."
            )
    assert Membership.objects.filter(tenant=vision, user=people["charlie"]).count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_same_tenant_created_twice_at_once_is_one_tenant_and_field_errors(admin_user, new_slug):
    slug = new_slug("race")

    def create():
        return api(admin_user).post(
            "/api/v1/tenants/", {"slug": slug, "display_name": "Race"}, format="json"
        )

    answers = at_once(4, create)
    assert sorted(a.status_code for a in answers) == [201, 400, 400, 400]
    for answer in answers:
        if answer.status_code == 400:
            assert "already exists" in answer.json()["errors"]["slug"][0]["message"]
    assert Tenant.objects.filter(slug=slug).count() == 1
    assert AuditEvent.objects.filter(action="tenant.create").count() == 1


def test_an_archived_tenants_members_stay_as_they_were(people):
    vision, alice = people["vision"], people["alice"]
    Tenant.objects.filter(pk=vision.pk).update(state=TenantState.ARCHIVED)
    added = api(alice).post(
        members_url(vision), {"username": "charlie", "role": "viewer"}, format="json"
    )
    assert added.status_code == 400
    assert added.json()["detail"] == "This tenant is archived; its members cannot be changed."
    bob = Membership.objects.get(tenant=vision, user=people["bob"])
    assert api(alice).delete(members_url(vision, bob.pk)).status_code == 400
    assert set(vision.memberships.values_list("user__username", flat=True)) == {
        "alice",
        "bob",
        "dave",
    }


def test_a_tenant_change_is_refused_before_its_input_is_read(people):
    """A tenant admin learns nothing from the validation of a change that is not theirs to make,
    and someone outside the tenant learns nothing of it at all."""
    url = f"/api/v1/tenants/{people['vision'].slug}/"
    for body in ({"gpu_quota": "abc"}, {"gpu_quota": 4}, {"parent_queue": "no such queue"}):
        answer = api(people["alice"]).patch(url, body, format="json")
        assert answer.status_code == 403, answer.json()
        assert answer.json()["detail"] == "Only platform admins can do this."
        assert api(people["charlie"]).patch(url, body, format="json").status_code == 404
    assert api(people["alice"]).post("/api/v1/tenants/", {}, format="json").status_code == 403


def test_a_parent_queue_is_a_departments_queue_that_exists_and_holds_the_tenants(
    admin_user, people, cluster, tenant_objects_cleanup, django_capture_on_commit_callbacks
):
    """Volcano's queue webhook refuses a child queue that does not fit under its parent: its
    capability above the parent's, or the children's deserved shares (or guarantees) above the
    parent's. The form refuses what the webhook would; else the ResourceQuota changed and the
    queue did not. Each refusal is checked against the real webhook too."""
    vision, nlp = people["vision"], people["nlp"]

    def refused(tenant, field, **change):
        with pytest.raises(services.ValidationError) as caught:
            services.update_tenant(tenant, actor=admin_user, **change)
        return caught.value.message_dict[field][0]

    assert refused(vision, "parent_queue", parent_queue=nlp.queue_name) == (
        f"'{nlp.queue_name}' is the job queue of tenant {nlp.slug}; jobs run in leaf queues, "
        "so name a department's queue instead."
    )
    dept = f"dept-{uuid.uuid4().hex[:6]}"
    assert refused(vision, "parent_queue", parent_queue=dept) == (
        f"There is no Volcano queue '{dept}' in the cluster; create the department's queue "
        "first, or leave this empty."
    )
    room = {"nvidia.com/gpu": "20", "cpu": "100000", "memory": "1000Ti"}
    cluster.apply_one(
        {
            "apiVersion": QUEUE_API,
            "kind": "Queue",
            "metadata": {"name": dept},
            "spec": {"weight": 1, "reclaimable": True, "capability": room},
        }
    )
    tenant_objects_cleanup.extend([vision.slug])
    by_hand = Cluster(cluster.api_client, field_manager="someone-by-hand")

    def webhook_refuses(tenant, **change):
        spec = replace(tenant.to_spec(), **change)
        with pytest.raises(PermanentK8sError) as caught:
            by_hand.apply_one({**build_queue(spec), "metadata": {"name": f"probe-{tenant.slug}"}})
        return caught.value.message

    try:
        with django_capture_on_commit_callbacks(execute=True):  # 16 GPUs under 20
            services.update_tenant(vision, actor=admin_user, parent_queue=dept)
        vision.refresh_from_db()
        assert (vision.parent_queue, vision.sync_state) == (dept, "in_sync"), vision.sync_message
        assert cluster.get(QUEUE_API, "Queue", vision.queue_name)["spec"]["parent"] == dept

        assert refused(vision, "gpu_quota", gpu_quota=24) == (
            f"The department queue {dept} allows 20; this tenant's queue would hold 24. Lower "
            "this, or ask for the department's queue to be raised first."
        )
        assert "exceeds parent queue" in webhook_refuses(vision, gpus=24, parent_queue=dept)
        # nlp's 8 beside vision's 16 deserve more than the department's 20.
        assert refused(nlp, "gpu_quota", parent_queue=dept) == (
            f"The deserved GPUs of {dept}'s queues would add up to 24, and {dept} allows 20. "
            "Lower this, or ask for the department's queue to be raised first."
        )
        assert "deserved" in webhook_refuses(nlp, parent_queue=dept)
        services.update_tenant(nlp, actor=admin_user, parent_queue=dept, queue_deserved_gpus=4)
        # nlp's move is saved and not applied yet: it counts all the same (the cluster's
        # queues alone said 17 fit, and the webhook then refused one of the two queues).
        assert refused(vision, "gpu_quota", gpu_quota=17) == (
            f"The deserved GPUs of {dept}'s queues would add up to 21, and {dept} allows 20. "
            "Lower this, or ask for the department's queue to be raised first."
        )
        services.update_tenant(vision, actor=admin_user, display_name="Vision lab")  # no check
    finally:
        with django_capture_on_commit_callbacks(execute=True):
            services.update_tenant(vision, actor=admin_user, parent_queue="")
        cluster.delete(QUEUE_API, "Queue", dept)


def test_a_queue_of_the_tenants_name_not_the_portals_is_never_taken_over(
    admin_user, cluster, new_slug
):
    slug = new_slug("taken")
    cluster.apply_one(
        {
            "apiVersion": QUEUE_API,
            "kind": "Queue",
            "metadata": {"name": f"tenant-{slug}"},
            "spec": {"weight": 1, "reclaimable": True},
        }
    )
    with pytest.raises(services.ValidationError) as caught:
        services.create_tenant(actor=admin_user, slug=slug, display_name="Taken", gpu_quota=8)
    assert caught.value.message_dict["slug"] == [
        f"The Volcano queue 'tenant-{slug}' already exists in the cluster and is not managed by "
        "the portal for this tenant. Choose another slug."
    ]
    assert not Tenant.objects.filter(slug=slug).exists()


def test_the_member_form_keeps_what_was_typed_with_the_error_and_says_what_it_did(people, client):
    vision = people["vision"]
    client.force_login(people["alice"])
    page = client.post(
        f"/tenants/{vision.slug}/members/", {"username": "nosuchuser", "role": "viewer"}
    )
    assert page.status_code == 400
    text = page.content.decode()
    assert "No user &#x27;nosuchuser&#x27;" in text
    assert 'value="nosuchuser"' in text  # not lost
    added = client.post(
        f"/tenants/{vision.slug}/members/", {"username": "charlie", "role": "viewer"}, follow=True
    ).content.decode()
    assert f"charlie added to {vision.slug} as Viewer." in added
    charlie = Membership.objects.get(tenant=vision, user=people["charlie"])
    changed = client.post(
        f"/tenants/{vision.slug}/members/{charlie.pk}/", {"role": "researcher"}, follow=True
    ).content.decode()
    assert f"charlie is now Researcher in {vision.slug}." in changed
    made_up = client.post(
        f"/tenants/{vision.slug}/members/{charlie.pk}/", {"role": "owner"}, follow=True
    ).content.decode()
    assert "Choose a role: tenant admin, researcher or viewer." in made_up
    charlie.refresh_from_db()
    assert charlie.role == Role.RESEARCHER


def test_a_refused_page_says_why(people, client):
    client.force_login(people["alice"])
    page = client.get("/console/")
    assert page.status_code == 403
    assert "Only platform admins can do this." in page.content.decode()


def test_two_admins_editing_a_tenant_keep_each_others_changes(admin_user, people, client):
    """The edit page sends back every box. Read against the tenant as it was when the form came
    back, a box another admin had changed meanwhile counted as changed back: one admin's rename
    undid the other's quota raise. Now only what each changed is changed, and a box both
    changed is refused with what it is now."""
    vision = people["vision"]
    client.force_login(admin_user)
    url = f"/tenants/{vision.slug}/edit/"
    page = client.get(url)
    form = page.context["form"]
    sent = {
        name: field.value()
        for name, field in ((f.name, f) for f in form)
        if field.value() is not None
    }
    sent = {k: ("on" if v is True else v) for k, v in sent.items() if v is not False}
    services.update_tenant(vision, actor=admin_user, gpu_quota=24)  # the other admin, meanwhile
    renamed = client.post(url, {**sent, "display_name": "Vision Lab"})
    assert renamed.status_code == 302
    vision.refresh_from_db()
    assert (vision.display_name, vision.gpu_quota) == ("Vision Lab", 24)

    clash = client.post(url, {**sent, "gpu_quota": "12"})  # the same old page, a quota both set
    assert clash.status_code == 200
    assert clash.context["form"].errors["gpu_quota"] == [
        "Another admin changed this to 24 since you opened the page; reload it and decide again."
    ]
    vision.refresh_from_db()
    assert vision.gpu_quota == 24


@pytest.mark.django_db(transaction=True)
def test_guarantees_saved_at_once_never_add_up_past_the_cluster(admin_user, new_slug):
    """Each save summed the other tenants' guarantees before the other's was saved: two at
    once guaranteed more GPUs than the cluster has."""
    from django.core.cache import cache

    from core.cluster import node_gpus

    cache.delete("node-gpu-summary")
    held = sum(Tenant.objects.active().values_list("queue_guarantee_gpus", flat=True))
    half = (node_gpus().total - held) // 2 + 1
    slugs = iter([new_slug("guar"), new_slug("guar")])

    def create():
        try:
            services.create_tenant(
                actor=admin_user,
                slug=next(slugs),
                display_name="G",
                gpu_quota=half,
                queue_guarantee_gpus=half,
            )
        except services.ValidationError as exc:
            return exc.message_dict["queue_guarantee_gpus"][0]
        return "created"

    answers = at_once(2, create)
    assert answers.count("created") == 1, answers
    assert "Guarantees would add up to" in [a for a in answers if a != "created"][0]


@pytest.mark.django_db(transaction=True)
def test_two_admins_saving_the_same_box_at_once_are_seen_in_turn(admin_user, people):
    """Both pages showed 16; the check ran before the tenant's lock, so both saves passed it
    and the last silently won."""
    vision = people["vision"]
    values = iter([12, 4])

    def save():
        try:
            services.update_tenant(
                vision, actor=admin_user, seen={"gpu_quota": 16}, gpu_quota=next(values)
            )
        except services.ValidationError as exc:
            return exc.message_dict["gpu_quota"][0]
        return "saved"

    answers = at_once(2, save)
    assert answers.count("saved") == 1, answers
    refused = next(a for a in answers if a != "saved")
    assert refused.startswith("Another admin changed this to ")


def test_an_api_client_writes_only_over_the_tenant_it_read(admin_user, people):
    """Every read and write of a tenant answers with its ETag. A write sent with it in If-Match
    is refused (412) once another admin changed the tenant since, saying so, and changes
    nothing; with the tag read again it goes through. A client that sends no If-Match writes
    as before."""
    vision, url = people["vision"], f"/api/v1/tenants/{people['vision'].slug}/"
    client = api(admin_user)
    read = client.get(url)
    assert read.status_code == 200
    tag = read["ETag"]
    assert client.get(url)["ETag"] == tag  # nothing changed, the same tag

    services.update_tenant(vision, actor=admin_user, gpu_quota=24)  # another admin, meanwhile
    stale = client.patch(url, {"display_name": "Vision Lab"}, format="json", HTTP_IF_MATCH=tag)
    assert stale.status_code == 412
    assert stale.json()["code"] == "stale"
    assert stale.json()["detail"].startswith(f"The tenant {vision.slug} changed since you read it")
    vision.refresh_from_db()
    assert (vision.display_name, vision.gpu_quota) == ("Vision", 24)

    fresh = client.get(url)["ETag"]
    assert fresh != tag
    renamed = client.patch(url, {"display_name": "Vision Lab"}, format="json", HTTP_IF_MATCH=fresh)
    assert renamed.status_code == 200
    assert renamed["ETag"] == client.get(url)["ETag"] != fresh  # the version now, as read next
    vision.refresh_from_db()
    assert (vision.display_name, vision.gpu_quota) == ("Vision Lab", 24)

    whole = {k: v for k, v in renamed.json().items() if k in ("display_name", "gpu_quota")}
    assert client.patch(url, {**whole, "gpu_quota": 8}, format="json").status_code == 200
    assert client.patch(url, {"gpu_quota": 9}, format="json", HTTP_IF_MATCH="*").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_two_api_writes_with_the_same_tag_at_once_are_seen_in_turn(admin_user, people):
    """The tag is compared with the tenant's row locked: of two writes that read the same
    version, one goes through and the other is refused, never both."""
    url = f"/api/v1/tenants/{people['vision'].slug}/"
    tag = api(admin_user).get(url)["ETag"]
    quotas = iter([12, 4])

    def write():
        body = {"gpu_quota": next(quotas)}
        return api(admin_user).patch(url, body, format="json", HTTP_IF_MATCH=tag).status_code

    assert sorted(at_once(2, write)) == [200, 412]
