"""Templates in the browser: platform admins publish global ones, researchers their tenant's."""

import pytest
import yaml
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from jobs.models import JobTemplate

pytestmark = pytest.mark.django_db
SPEC = yaml.safe_dump(
    {"image": "python:3.12", "command": ["python", "x.py"], "tasks": [{"name": "main", "gpus": 1}]}
)


def test_a_researcher_saves_a_tenant_template_and_a_second_save_is_a_new_version(client, team):
    client.force_login(team["bob"])
    response = client.post(
        "/templates/new/",
        {"scope": team["tenant"].slug, "name": "mine", "spec": SPEC, "overridable": ["gpus"]},
    )
    assert response.status_code == 302
    template = JobTemplate.objects.get(name="mine")
    assert template.tenant == team["tenant"]
    client.post(
        f"/templates/{template.pk}/",
        {"spec": SPEC.replace("x.py", "y.py"), "overridable": ["gpus", "image"]},
    )
    assert [v.version for v in template.versions.order_by("version")] == [1, 2]
    assert template.latest.spec["command"] == ["python", "y.py"]
    assert template.versions.get(version=1).spec["command"] == ["python", "x.py"]


def test_only_platform_admins_publish_global_templates(client, team):
    client.force_login(team["bob"])
    assert (
        client.post("/templates/new/", {"scope": "", "name": "glob", "spec": SPEC}).status_code
        == 403
    )
    client.force_login(team["admin"])
    assert (
        client.post("/templates/new/", {"scope": "", "name": "glob", "spec": SPEC}).status_code
        == 302
    )
    assert JobTemplate.objects.get(name="glob").tenant is None


def test_a_bad_spec_is_refused_with_its_field_path(client, team):
    client.force_login(team["bob"])
    bad = SPEC.replace("gpus: 1", "gpus: 500")
    response = client.post(
        "/templates/new/", {"scope": team["tenant"].slug, "name": "bad", "spec": bad}
    )
    assert response.status_code == 200
    assert "tasks[0].gpus: Must be between 0 and 64 (got 500)." in response.content.decode()
    assert not JobTemplate.objects.filter(name="bad").exists()


def test_other_tenants_templates_are_invisible(client, team):
    client.force_login(team["bob"])
    client.post("/templates/new/", {"scope": team["tenant"].slug, "name": "private", "spec": SPEC})
    template = JobTemplate.objects.get(name="private")
    other = Client()
    other.force_login(team["charlie"])
    assert other.get(f"/templates/{template.pk}/").status_code == 404
    assert "private" not in other.get("/templates/").content.decode()
    assert other.get("/api/v1/templates/").json()["count"] == 0


COMMENTED = """# Fine-tunes on one GPU; ask the ML-infra channel before raising gpus.
image: python:3.12   # pinned: 3.13 breaks our loader
command: [python, x.py]
tasks:
  - name: main
    gpus: 1   # one is enough for the 7B model
"""


def test_a_template_keeps_its_yaml_as_written_in_the_editor_and_the_api(client, team):
    """Comments and layout are what authors explain a template with: the editor shows the text
    as it was saved, and the API gives it beside the parsed spec and takes it as `source`."""
    from accounts.models import ApiToken

    client.force_login(team["bob"])
    client.post(
        "/templates/new/", {"scope": team["tenant"].slug, "name": "noted", "spec": COMMENTED}
    )
    template = JobTemplate.objects.get(name="noted")
    assert template.latest.spec["tasks"] == [{"name": "main", "gpus": 1}]
    editor = client.get(f"/templates/{template.pk}/").content.decode()
    assert "# pinned: 3.13 breaks our loader" in editor
    assert "# one is enough for the 7B model" in editor

    raw = ApiToken.issue(team["bob"], "t")[1]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    shown = client.get(f"/api/v1/templates/{template.pk}/", **auth).json()
    assert shown["latest"]["source"] == COMMENTED
    saved = client.post(
        "/api/v1/templates/",
        {"name": "noted", "tenant": team["tenant"].slug, "source": COMMENTED + "# v2\n"},
        content_type="application/json",
        **auth,
    )
    assert saved.status_code == 201, saved.content
    assert saved.json()["latest"]["source"].endswith("# v2\n")
    both = client.post(
        "/api/v1/templates/",
        {"name": "noted", "tenant": team["tenant"].slug, "source": COMMENTED, "spec": {}},
        content_type="application/json",
        **auth,
    )
    assert both.status_code == 400
    assert "either as `spec`" in both.json()["detail"]
    # Saved as a mapping (no text), the editor shows the spec in reading order.
    client.post(
        "/api/v1/templates/",
        {"name": "noted", "tenant": team["tenant"].slug, "spec": yaml.safe_load(COMMENTED)},
        content_type="application/json",
        **auth,
    )
    editor = client.get(f"/templates/{template.pk}/").content.decode()
    assert "# pinned" not in editor
    assert "image: python:3.12" in editor


def test_a_refused_save_keeps_the_scope_chosen(client, team):
    """The form comes back with the spec's error and the tenant picked, not the first option
    (Global for a platform admin): fixing the spec and saving again must not publish it."""
    client.force_login(team["admin"])
    data = {"scope": team["tenant"].slug, "name": "scoped", "spec": "tasks: ["}
    page = client.post("/templates/new/", data).content.decode()
    assert f'<option value="{team["tenant"].slug}" selected>' in page
    assert '<option value="" selected>' not in page
    client.post("/templates/new/", {**data, "spec": SPEC})
    assert JobTemplate.objects.get(name="scoped").tenant == team["tenant"]


def test_template_lists_read_the_same_however_many_templates(client, team):
    """The templates page and the launch page read each template's latest version with it,
    not one query per template."""
    client.force_login(team["bob"])
    slug = team["tenant"].slug

    def save(names):
        for name in names:
            client.post("/templates/new/", {"scope": slug, "name": name, "spec": SPEC})

    def counted(url):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        return len(queries)

    pages = ["/templates/", f"/tenants/{slug}/jobs/launch/"]
    save(["t0", "t1"])
    few = [counted(url) for url in pages]
    save([f"t{i}" for i in range(2, 12)])
    for template in JobTemplate.objects.filter(tenant=team["tenant"]):
        client.post(f"/templates/{template.pk}/", {"spec": SPEC.replace("x.py", "y.py")})
    assert [counted(url) for url in pages] == few
    assert client.get("/templates/").content.decode().count("<td>v2</td>") == 12
    launch_page = client.get(pages[1]).content.decode()
    assert launch_page.count("&amp;version=2") == 2 * 12  # the name's link and its button
