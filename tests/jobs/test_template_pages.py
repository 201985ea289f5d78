"""Templates in the browser: platform admins publish global ones, researchers their tenant's."""

import pytest
import yaml
from django.test import Client

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
