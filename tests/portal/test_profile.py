import pytest
from rest_framework.test import APIClient

from accounts.models import ApiToken, SSHKey
from tests.tenants.conftest import make_user

pytestmark = pytest.mark.django_db
ED25519 = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl bob@laptop"
)


@pytest.fixture
def bob_client():
    bob = make_user("bob")
    client = APIClient()
    client.force_login(bob)
    return bob, client


def test_ssh_keys_are_validated_and_private_to_their_owner(bob_client):
    bob, client = bob_client
    response = client.post(
        "/api/v1/me/ssh-keys/", {"name": "laptop", "public_key": ED25519}, format="json"
    )
    assert response.status_code == 201
    bad = client.post(
        "/api/v1/me/ssh-keys/",
        {"name": "oops", "public_key": "-----BEGIN OPENSSH PRIVATE KEY"},
        format="json",
    )
    assert bad.status_code == 400
    assert "never the private key" in bad.json()["errors"]["public_key"][0]["message"]
    other = APIClient()
    other.force_login(make_user("charlie"))
    assert other.get("/api/v1/me/ssh-keys/").json()["count"] == 0
    key_id = SSHKey.objects.get(user=bob).pk
    assert other.delete(f"/api/v1/me/ssh-keys/{key_id}/").status_code == 404


def test_a_token_is_shown_once_then_works_until_revoked_in_the_browser(bob_client, client):
    bob, api = bob_client
    client.force_login(bob)
    page = client.post("/profile/", {"add_token": "1", "name": "notebook", "days": 30})
    raw = page.context["new_token"]
    assert raw.startswith("gpp_")
    assert raw not in client.get("/profile/").content.decode()
    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert bearer.get("/api/v1/tenants/").status_code == 200
    token = ApiToken.objects.get(user=bob)
    client.post(f"/profile/tokens/{token.pk}/revoke/")
    assert bearer.get("/api/v1/tenants/").status_code == 401
