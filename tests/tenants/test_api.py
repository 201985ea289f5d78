"""The tenant API: same service and checks as the pages, consistent error bodies, tokens."""

import pytest
from rest_framework.test import APIClient

from accounts.models import ApiToken
from tenants.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(admin_user):
    client = APIClient()
    client.force_login(admin_user)
    return client


def test_a_platform_admin_creates_a_tenant_and_it_is_reconciled(
    api, new_slug, cluster, django_capture_on_commit_callbacks
):
    slug = new_slug()
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            "/api/v1/tenants/",
            {"slug": slug, "display_name": "Speech", "gpu_quota": 6, "pod_quota": 40},
            format="json",
        )
    assert response.status_code == 201
    body = response.json()
    assert body["namespace"] == f"tenant-{slug}"
    assert body["queue"] == f"tenant-{slug}"
    quota = cluster.get("v1", "ResourceQuota", "gpu-portal", f"tenant-{slug}")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "6"
    assert quota["spec"]["hard"]["pods"] == "40"  # the API server counts the tenant's pods
    assert api.get(f"/api/v1/tenants/{slug}/").json()["sync_state"] == "in_sync"


def test_errors_name_the_field_with_a_code_and_a_message(api):
    response = api.post(
        "/api/v1/tenants/",
        {"slug": "Bad_Slug", "display_name": "X", "gpu_quota": -3},
        format="json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert set(body["errors"]) == {"gpu_quota"}  # field types are checked first
    assert body["errors"]["gpu_quota"][0]["code"] == "min_value"

    response = api.post(
        "/api/v1/tenants/", {"slug": "Bad_Slug", "display_name": "X"}, format="json"
    )
    body = response.json()
    assert body["errors"]["slug"][0]["code"] == "invalid_dns1123"
    assert "lowercase letters" in body["errors"]["slug"][0]["message"]
    assert not Tenant.objects.exists()


def test_the_slug_cannot_be_changed_through_the_api(api, people):
    vision = people["vision"]
    response = api.patch(
        f"/api/v1/tenants/{vision.slug}/",
        {"slug": "renamed", "display_name": "Renamed"},
        format="json",
    )
    assert response.status_code == 200
    vision.refresh_from_db()
    assert (vision.slug, vision.display_name) == (response.json()["slug"], "Renamed")


def test_a_personal_api_token_authenticates_until_revoked(people):
    token, raw = ApiToken.issue(people["bob"], "laptop")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    slugs = [t["slug"] for t in client.get("/api/v1/tenants/").json()["results"]]
    assert slugs == [people["vision"].slug]
    assert token.token_hash != raw
    assert raw not in str(ApiToken.objects.values())

    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw[:-2]}xx")
    assert client.get("/api/v1/tenants/").status_code == 401
    ApiToken.objects.filter(pk=token.pk).update(revoked_at="2026-01-01T00:00:00Z")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    response = client.get("/api/v1/tenants/")
    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid, expired or revoked API token."


def test_not_found_and_refused_have_the_one_error_body_and_name_no_model(people):
    client = APIClient()
    client.force_login(people["bob"])
    nlp = people["nlp"].slug
    for url in (
        f"/api/v1/tenants/{nlp}/",
        f"/api/v1/tenants/{nlp}/volumes/",
        "/api/v1/templates/999999/",
    ):
        answer = client.get(url)
        assert answer.status_code == 404
        assert answer.json() == {"detail": "Not found.", "code": "not_found", "errors": {}}
    refused = client.post(f"/api/v1/tenants/{people['vision'].slug}/members/", {})
    assert refused.status_code == 403
    assert refused.json() == {
        "detail": f"This needs the tenant admin role in {people['vision'].slug}.",
        "code": "permission_denied",
        "errors": {},
    }
