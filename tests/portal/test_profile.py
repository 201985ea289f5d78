from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import MAX_SSH_KEYS, ApiToken, SSHKey
from tests.tenants.conftest import make_user

pytestmark = pytest.mark.django_db
ED25519 = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl bob@laptop"
)


def new_key():
    key = Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode() + " me@host"


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
    page = client.post("/profile/", {"add_token": "1", "name": "notebook", "days": 30}, follow=True)
    assert [hop[1] for hop in page.redirect_chain] == [302]  # a reload sends no second POST
    raw = page.context["new_token"]
    assert raw.startswith("gpp_")
    assert raw in page.content.decode()
    assert page["Cache-Control"].startswith("max-age=0")  # nor is it kept in the cache
    assert raw not in client.get("/profile/").content.decode()  # shown once
    assert ApiToken.objects.filter(user=bob).count() == 1
    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert bearer.get("/api/v1/tenants/").status_code == 200
    token = ApiToken.objects.get(user=bob)
    client.post(f"/profile/tokens/{token.pk}/revoke/")
    assert bearer.get("/api/v1/tenants/").status_code == 401


def test_an_ssh_key_is_one_whole_line_of_bounded_size(bob_client, client):
    """Every key of a user goes into each of their jobs (one Secret of at most 1 MiB, lines of
    authorized_keys): a key that is not one whole public key is refused when added, not when a
    job fails to start."""
    bob, api = bob_client
    kind, blob, _ = ED25519.split()
    refused = {
        f"{kind} {blob} " + "x" * 9000: "one line of at most 8192 characters",
        f"{kind} {blob} bob\nssh-rsa AAAA attacker": "with no line breaks",
        f"{kind} AAAAC3NzaC1lZDI1NTE5 bob": "incomplete or damaged",
        f"{kind} {blob[:-8]} bob": "damaged",
    }
    for key, words in refused.items():
        answer = api.post("/api/v1/me/ssh-keys/", {"name": "k", "public_key": key}, format="json")
        assert answer.status_code == 400, key[:80]
        assert words in answer.json()["errors"]["public_key"][0]["message"]
    client.force_login(bob)
    page = client.post(
        "/profile/", {"add_key": "1", "name": "k", "public_key": f"{kind} AAAAC3NzaC1lZDI1NTE5"}
    ).content.decode()
    assert "incomplete or damaged" in page
    assert not SSHKey.objects.filter(user=bob).exists()

    twice = [api.post("/api/v1/me/ssh-keys/", {"name": n, "public_key": ED25519}) for n in "ab"]
    assert [a.status_code for a in twice] == [201, 400]
    assert twice[1].json()["errors"]["public_key"][0]["message"] == (
        "You added this key already, as 'a'."
    )
    keys = [new_key() for _ in range(MAX_SSH_KEYS)]
    for i, key in enumerate(keys[1:]):
        added = api.post("/api/v1/me/ssh-keys/", {"name": f"k{i}", "public_key": key})
        assert added.status_code == 201
    one_more = api.post("/api/v1/me/ssh-keys/", {"name": "extra", "public_key": keys[0]})
    assert one_more.status_code == 400
    assert one_more.json()["errors"]["public_key"][0]["message"] == (
        f"You have {MAX_SSH_KEYS} keys, the most one may have; delete one first."
    )
    page = client.post(
        "/profile/", {"add_key": "1", "name": "extra", "public_key": keys[0]}
    ).content.decode()
    assert "the most one may have" in page
    listed = client.get("/profile/").content.decode()
    assert SSHKey.objects.get(user=bob, name="a").fingerprint in listed
    assert SSHKey.objects.get(user=bob, name="a").fingerprint.startswith("SHA256:")
    assert SSHKey.objects.filter(user=bob).count() == MAX_SSH_KEYS


def test_a_token_makes_no_tokens_and_adds_no_ssh_keys(bob_client):
    """A leaked token, however short-lived, could make a year-long one that outlives its own
    revocation, or add an SSH key every later job of its user mounts. New credentials come
    from a signed-in person; a token still reads and revokes."""
    bob, session = bob_client
    _, raw = ApiToken.issue(bob, "ci", expires_at=timezone.now() + timedelta(days=1))
    by_token = APIClient()
    by_token.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    minted = by_token.post("/api/v1/me/tokens/", {"name": "x", "days": 365}, format="json")
    keyed = by_token.post(
        "/api/v1/me/ssh-keys/", {"name": "k", "public_key": ED25519}, format="json"
    )
    for refused in (minted, keyed):
        assert refused.status_code == 403
        assert "A token cannot make tokens or add SSH keys" in refused.json()["detail"]
    assert ApiToken.objects.filter(user=bob).count() == 1
    assert not SSHKey.objects.filter(user=bob).exists()
    assert by_token.get("/api/v1/me/tokens/").json()["count"] == 1
    made = session.post("/api/v1/me/tokens/", {"name": "y", "days": 30}, format="json")
    assert made.status_code == 201  # signed in, as the profile page is
    assert by_token.delete(f"/api/v1/me/tokens/{made.json()['id']}/").status_code == 204
