"""Retiring a template: no launch offers or names it, it takes no versions, jobs launched from it
keep their version and relaunch; whoever may version it retires and restores it, from the
browser and the API alike."""

import pytest
from django.core.management import call_command

from jobs import services
from jobs.models import Job, JobTemplate
from tenants.choices import Role
from tenants.models import AuditEvent, Membership
from tests.helpers import ONE_GPU_SPEC as SPEC
from tests.helpers import api_as as api

pytestmark = pytest.mark.django_db


def test_a_retired_template_is_offered_to_no_launch_and_its_jobs_keep_their_version(
    team, launch, client
):
    slug = team["tenant"].slug
    version = services.save_template(
        name="recipe", spec_data=SPEC, overridable=["gpus"], actor=team["admin"]
    )
    job = launch(version, name="before", overrides={"gpus": 1})
    client.force_login(team["admin"])
    page = client.get(f"/templates/{version.template_id}/").content.decode()
    assert "Retire</button>" in page
    retired = client.post(f"/templates/{version.template_id}/retire/", {"retire": "1"}, follow=True)
    assert "Retired recipe: no launch offers it" in retired.content.decode()

    client.force_login(team["bob"])
    picker = client.get(f"/tenants/{slug}/jobs/launch/").content.decode()
    assert "<strong>recipe</strong>" not in picker
    refused = api(team["bob"]).post(
        f"/api/v1/tenants/{slug}/jobs/", {"template": "recipe", "name": "after"}, format="json"
    )
    assert refused.status_code == 400
    assert refused.json()["errors"]["template"][0]["message"] == (
        "The template 'recipe' was retired; choose another template, or ask its owner to "
        "restore it."
    )
    form = client.get(f"/tenants/{slug}/jobs/launch/?template=recipe")
    assert form.status_code == 404
    assert "was retired" in form.content.decode()
    assert not Job.objects.filter(name="after").exists()

    # The job launched before keeps its version, and relaunches from it.
    again = api(team["bob"]).post(f"/api/v1/tenants/{slug}/jobs/{job.name}/relaunch/")
    assert again.status_code == 201, again.json()
    assert Job.objects.get(name=again.json()["name"]).template_version == version

    listing = client.get("/templates/").content.decode()
    retired_part = listing.split("<h2>Retired</h2>", 1)[1]
    assert "recipe" in retired_part
    assert f"/templates/{version.template_id}/" in retired_part


def test_a_retired_template_takes_no_versions_until_restored(team):
    version = services.save_template(
        name="recipe", spec_data=SPEC, overridable=[], actor=team["admin"]
    )
    admin = api(team["admin"])
    answer = admin.post(f"/api/v1/templates/{version.template_id}/retire/")
    assert answer.status_code == 200
    assert answer.json()["retired_at"]
    saved = admin.post("/api/v1/templates/", {"name": "recipe", "spec": SPEC}, format="json")
    assert saved.status_code == 400
    assert saved.json()["errors"]["name"][0]["message"] == (
        "The template 'recipe' is retired: restore it first (the Restore button on its page, "
        f"or POST /api/v1/templates/{version.template_id}/restore/), or save under another name."
    )
    assert version.template.versions.count() == 1

    restored = admin.post(f"/api/v1/templates/{version.template_id}/restore/")
    assert restored.status_code == 200
    assert restored.json()["retired_at"] is None
    assert (
        admin.post("/api/v1/templates/", {"name": "recipe", "spec": SPEC}, format="json").json()[
            "latest"
        ]["version"]
        == 2
    )
    again = admin.post(f"/api/v1/templates/{version.template_id}/restore/")
    assert again.status_code == 200  # nothing to restore: nothing changes, nothing recorded
    events = AuditEvent.objects.filter(object_type="JobTemplate").order_by("pk")
    assert [(e.action, e.before["retired"], e.after["retired"]) for e in events] == [
        ("template.retire", False, True),
        ("template.restore", True, False),
    ]


def test_retiring_a_tenants_template_gives_its_launches_the_global_one_back(team):
    services.save_template(name="notebook", spec_data=SPEC, overridable=[], actor=team["admin"])
    own = services.save_template(
        name="notebook", spec_data=SPEC, overridable=[], actor=team["alice"], tenant=team["tenant"]
    )
    assert services.template_version(team["tenant"], "notebook") == own
    services.set_template_retired(own.template, retired=True, actor=team["alice"])
    assert services.template_version(team["tenant"], "notebook").template.tenant is None


def test_only_who_may_version_a_template_retires_or_restores_it(team, client):
    shared = services.save_template(
        name="shared", spec_data=SPEC, overridable=[], actor=team["admin"]
    )
    alices = services.save_template(
        name="alices", spec_data=SPEC, overridable=[], actor=team["alice"], tenant=team["tenant"]
    )
    bobs = services.save_template(
        name="bobs", spec_data=SPEC, overridable=[], actor=team["bob"], tenant=team["tenant"]
    )
    bob = api(team["bob"])
    global_refused = bob.post(f"/api/v1/templates/{shared.template_id}/retire/")
    assert global_refused.status_code == 403
    assert global_refused.json()["detail"] == (
        "Only platform admins retire or restore global templates."
    )
    colleague_refused = bob.post(f"/api/v1/templates/{alices.template_id}/retire/")
    assert colleague_refused.status_code == 403
    assert colleague_refused.json()["detail"] == (
        "Only the template's creator or a tenant admin retires or restores it."
    )
    client.force_login(team["bob"])
    forged = client.post(f"/templates/{alices.template_id}/retire/", {"retire": "1"})
    assert forged.status_code == 403
    page = client.get(f"/templates/{alices.template_id}/").content.decode()
    assert "Retire</button>" not in page
    services.set_template_retired(shared.template, retired=True, actor=team["admin"])
    page = client.get(f"/templates/{shared.template_id}/").content.decode()
    assert "Restore</button>" not in page
    assert "Only platform admins restore global templates." in page
    services.set_template_retired(shared.template, retired=False, actor=team["admin"])
    assert bob.post(f"/api/v1/templates/{bobs.template_id}/retire/").status_code == 200
    # Alice, the tenant's admin, restores bob's template; charlie, of another tenant, sees none.
    assert (
        api(team["alice"]).post(f"/api/v1/templates/{bobs.template_id}/restore/").status_code == 200
    )
    outsider = api(team["charlie"]).post(f"/api/v1/templates/{bobs.template_id}/retire/")
    assert outsider.status_code == 404
    assert JobTemplate.objects.filter(retired_at__isnull=False).count() == 0
    # Bob, demoted to viewer, reads his template and no longer retires it for his colleagues.
    Membership.objects.filter(tenant=team["tenant"], user=team["bob"]).update(role=Role.VIEWER)
    demoted = bob.post(f"/api/v1/templates/{bobs.template_id}/retire/")
    assert demoted.status_code == 403
    assert client.post(f"/templates/{bobs.template_id}/retire/", {"retire": "1"}).status_code == 403
    assert JobTemplate.objects.filter(retired_at__isnull=False).count() == 0


def test_seeding_leaves_a_retired_built_in_template_retired(team):
    call_command("seed_templates", verbosity=0)
    notebook = JobTemplate.objects.get(name="jupyter-ssh", tenant__isnull=True)
    services.set_template_retired(notebook, retired=True, actor=team["admin"])
    old = notebook.latest
    old.spec = {**old.spec, "image": "an-older-release:1"}
    old.save()  # as an older release published it: seeding would add the built-in's fix
    call_command("seed_templates", verbosity=0)
    notebook.refresh_from_db()
    assert notebook.retired_at is not None
    assert notebook.versions.count() == 1


def test_a_retire_form_sends_retire_or_restore_and_nothing_else(team, client):
    version = services.save_template(
        name="recipe", spec_data=SPEC, overridable=[], actor=team["admin"]
    )
    client.force_login(team["admin"])
    url = f"/templates/{version.template_id}/retire/"
    garbage = client.post(url, {"retire": "garbage"}, follow=True).content.decode()
    assert "Use the Retire or Restore button on this page." in garbage
    version.template.refresh_from_db()
    assert version.template.retired_at is None
    page = client.post(url, {"retire": "0"}, follow=True).content.decode()
    assert "was not retired" in page
    assert not AuditEvent.objects.filter(object_type="JobTemplate").exists()
