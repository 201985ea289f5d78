"""Writes to a tenant's volumes and templates that a careless or hostile client gets wrong: the
same request twice at once, a name nothing in the cluster could take, an archived tenant, a
template that would change colleagues' launches. Each answer says what to fix, and nothing is
half-created."""

import pytest
from django.core.management import call_command

from core.cluster import node_gpus
from jobs import services
from jobs.models import DataVolume, Job, JobTemplate, JobTemplateVersion
from tenants.choices import Role, TenantState
from tenants.models import Membership, Tenant
from tests.helpers import ONE_GPU_SPEC as SPEC
from tests.helpers import api_as as api
from tests.helpers import at_once
from tests.tenants.conftest import make_user

pytestmark = pytest.mark.django_db


def volumes_url(team):
    return f"/api/v1/tenants/{team['tenant'].slug}/volumes/"


def test_a_volume_with_a_storage_class_no_cluster_could_have_is_refused(team, client):
    for bad in ["'; DROP TABLE--", "Fast_NVMe", "a" * 254, "-fast"]:
        answer = api(team["bob"]).post(
            volumes_url(team), {"name": "data", "size_gib": 1, "storage_class": bad}, format="json"
        )
        assert answer.status_code == 400, bad
        message = answer.json()["errors"]["storage_class"][0]["message"]
        assert message.startswith("Name a StorageClass: lowercase letters, digits"), message
    client.force_login(team["bob"])
    page = client.post(
        f"/tenants/{team['tenant'].slug}/volumes/",
        {"name": "data", "size_gib": 1, "storage_class": "Fast_NVMe"},
    ).content.decode()
    assert "Name a StorageClass" in page
    assert not DataVolume.objects.exists()
    ok = api(team["bob"]).post(
        volumes_url(team), {"name": "data", "size_gib": 1, "storage_class": "fast.nvme-1"}
    )
    assert ok.status_code == 201


@pytest.mark.django_db(transaction=True)
def test_the_same_volume_created_twice_at_once_is_one_volume_and_field_errors(team):
    def create():
        return api(team["bob"]).post(
            volumes_url(team), {"name": "shared", "size_gib": 1}, format="json"
        )

    answers = at_once(6, create)
    assert sorted(a.status_code for a in answers) == [201] + [400] * 5
    for answer in answers:
        if answer.status_code == 400:
            assert answer.json()["errors"]["name"][0] == {
                "code": "duplicate",
                "message": f"A volume named 'shared' already exists in {team['tenant'].slug}.",
            }
    assert DataVolume.objects.filter(name="shared").count() == 1


def test_an_archived_tenant_gets_no_new_volumes_or_templates(team):
    Tenant.objects.filter(pk=team["tenant"].pk).update(state=TenantState.ARCHIVED)
    volume = api(team["bob"]).post(volumes_url(team), {"name": "late", "size_gib": 1})
    assert volume.status_code == 400
    assert volume.json()["detail"] == "This tenant is archived; it cannot get new volumes."
    template = api(team["bob"]).post(
        "/api/v1/templates/",
        {"name": "late", "tenant": team["tenant"].slug, "spec": SPEC},
        format="json",
    )
    assert template.status_code == 400
    assert template.json()["detail"] == "This tenant is archived; it cannot get new templates."
    assert not DataVolume.objects.exists()
    assert not JobTemplate.objects.exists()


def test_a_researchers_template_changes_no_colleagues_launches(team):
    """A tenant template named like a global one replaces it in every launch of the tenant, and a
    new version of a template changes what its launches run: those are the creator's or a
    tenant admin's to make."""
    services.save_template(name="single-gpu", spec_data=SPEC, overridable=[], actor=team["admin"])
    slug = team["tenant"].slug

    def save(who, name):
        return api(team[who]).post(
            "/api/v1/templates/", {"name": name, "tenant": slug, "spec": SPEC}, format="json"
        )

    shadow = save("bob", "single-gpu")
    assert shadow.status_code == 400
    assert shadow.json()["errors"]["name"][0]["message"].startswith(
        "'single-gpu' is a global template; a tenant template of that name would replace it"
    )
    assert services.template_version(team["tenant"], "single-gpu").template.tenant is None

    assert save("bob", "bobs-recipe").status_code == 201
    assert save("bob", "bobs-recipe").status_code == 201  # his own: a second version
    carol = make_user("carol")
    Membership.objects.create(tenant=team["tenant"], user=carol, role=Role.RESEARCHER)
    team["carol"] = carol
    theirs = save("carol", "bobs-recipe")
    assert theirs.status_code == 400
    assert theirs.json()["errors"]["name"][0]["message"] == (
        "The template 'bobs-recipe' is bob's: only they or a tenant admin can add versions. "
        "Save yours under another name."
    )
    assert JobTemplateVersion.objects.filter(template__name="bobs-recipe").count() == 2

    assert save("alice", "bobs-recipe").status_code == 201  # a tenant admin may
    assert save("alice", "single-gpu").status_code == 201  # and may replace a global one
    assert services.template_version(team["tenant"], "single-gpu").template.tenant is not None


@pytest.mark.django_db(transaction=True)
def test_versions_saved_at_once_are_numbered_in_turn(team):
    def save():
        return api(team["alice"]).post(
            "/api/v1/templates/",
            {"name": "busy", "tenant": team["tenant"].slug, "spec": SPEC},
            format="json",
        )

    answers = at_once(6, save)
    assert [a.status_code for a in answers] == [201] * 6
    versions = JobTemplateVersion.objects.filter(template__name="busy")
    assert sorted(versions.values_list("version", flat=True)) == [1, 2, 3, 4, 5, 6]


def test_a_template_a_user_may_not_version_is_shown_read_only(team, client):
    version = services.save_template(
        name="global-one", spec_data=SPEC, overridable=[], actor=team["admin"]
    )
    client.force_login(team["alice"])  # a tenant admin, not a platform admin
    page = client.get(f"/templates/{version.template_id}/").content.decode()
    assert "Only platform admins add versions of global templates" in page
    assert "Save as a new version" not in page
    refused = client.post(f"/templates/{version.template_id}/", {"spec": "image: x"})
    assert refused.status_code == 403
    assert JobTemplateVersion.objects.filter(template=version.template).count() == 1


def test_a_job_no_node_could_ever_hold_says_so_while_it_waits(team, templates, client, launch):
    """Nodes may join later, so the launch is a warning, not a refusal; but the waiting job's
    page says it can never start as the cluster is, instead of 'waits until GPUs are free'."""
    largest = node_gpus().largest
    job = launch(templates["single-gpu"], overrides={"gpus": largest + 1}, name="too-wide")
    client.force_login(team["bob"])
    page = client.get(f"/tenants/{team['tenant'].slug}/jobs/too-wide/status/").content.decode()
    assert (
        f"Task main asks for {largest + 1} GPUs per replica but no node has more than "
        f"{largest}; it could never be scheduled. Cancel it and launch it with less, or ask a "
        "platform admin for such nodes."
    ) in page
    assert job.state in ("queued", "pending")


def test_a_job_page_offers_only_what_its_reader_may_do_and_who_opens_each_endpoint(
    team, templates, client, launch
):
    launch(templates["jupyter-ssh"], name="nb", overrides={"workspace_gib": 1})
    url = f"/tenants/{team['tenant'].slug}/jobs/nb/"
    client.force_login(team["bob"])  # its owner
    page = client.get(url).content.decode()
    for offered in ("Cancel</button>", "Delete</button>", "+ hours"):
        assert offered in page
    assert 'data-testid="endpoint-who">only bob<' in page  # the notebook: a shell as bob
    assert f'data-testid="endpoint-who">members of {team["tenant"].slug}<' in page  # ssh
    client.force_login(team["dave"])  # a viewer of the tenant
    page = client.get(url).content.decode()
    for offered in ("Cancel</button>", "Delete</button>", "+ hours"):
        assert offered not in page
    refused = client.post(f"{url}cancel/")
    assert refused.status_code == 403
    assert "Only the job&#x27;s owner or a tenant admin can change it." in refused.content.decode()


def test_the_launch_picker_lists_a_replaced_global_template_once_as_the_tenants(team, client):
    services.save_template(name="notebook", spec_data=SPEC, overridable=[], actor=team["admin"])
    services.save_template(
        name="notebook", spec_data=SPEC, overridable=[], actor=team["alice"], tenant=team["tenant"]
    )
    client.force_login(team["bob"])
    page = client.get(f"/tenants/{team['tenant'].slug}/jobs/launch/").content.decode()
    assert page.count("<strong>notebook</strong>") == 1
    assert "(replaces the global one)" in page


def test_a_field_the_api_does_not_take_is_an_error_not_a_default(team, templates):
    """A typo in a launch ('gpu' for 'gpus') launched the template's default; now it is a
    field error that lists what the call takes, and nothing is launched."""
    answer = api(team["bob"]).post(
        f"/api/v1/tenants/{team['tenant'].slug}/jobs/",
        {"template": "single-gpu", "gpu": 2, "name": "typo"},
        format="json",
    )
    assert answer.status_code == 400
    message = answer.json()["errors"]["gpu"][0]["message"]
    assert message.startswith("Unknown field; this takes ")
    assert "gpus" in message
    assert not Job.objects.exists()
    echoed = api(team["bob"]).post(volumes_url(team), {"name": "v", "size_gib": 1, "id": 7})
    assert echoed.status_code == 201  # read-only fields sent back from a read are ignored


def test_the_built_in_templates_follow_their_fixes_unless_an_admin_made_them_theirs(team):
    """An installation seeded before the notebook was made private gets a new version with
    the fix; jobs keep the version they ran; a template an admin saved is left as it is."""
    call_command("seed_templates", verbosity=0)
    notebook = JobTemplate.objects.get(name="jupyter-ssh", tenant__isnull=True)
    old = notebook.latest
    old.spec = {**old.spec, "expose": [{**e, "private": False} for e in old.spec["expose"]]}
    old.save()  # as an older release published it
    call_command("seed_templates", verbosity=0)
    call_command("seed_templates", verbosity=0)  # once: nothing changes the second time
    assert list(notebook.versions.order_by("version").values_list("version", flat=True)) == [1, 2]
    assert {e["name"]: e.get("private", False) for e in notebook.latest.spec["expose"]} == {
        "jupyter": True,
        "ssh": False,
    }
    single = JobTemplate.objects.get(name="single-gpu", tenant__isnull=True)
    services.save_template(name="single-gpu", spec_data=SPEC, overridable=[], actor=team["admin"])
    call_command("seed_templates", verbosity=0)
    assert single.latest.spec == SPEC  # the admin's


def test_an_emptied_launch_field_says_it_takes_the_templates_value(team, templates, client):
    client.force_login(team["bob"])
    page = client.get(
        f"/tenants/{team['tenant'].slug}/jobs/launch/?template=pytorch-ddp"
    ).content.decode()
    assert 'placeholder="empty: template 8"' in page  # GPUs per replica
    assert 'placeholder="empty: template 2"' in page  # worker replicas
    assert 'placeholder="empty: template 200"' in page  # workspace GiB
