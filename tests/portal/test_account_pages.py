"""The sign-in library's pages the portal does not offer, and Django's admin signing in only
through the portal's own sign-in."""

import pytest
from allauth.socialaccount.models import SocialAccount
from django.contrib.auth import get_user_model

pytestmark = pytest.mark.django_db

NOT_OFFERED = [
    "/accounts/password/set/",  # an SSO user's own password would outlive the provider's say
    "/accounts/password/reset/",
    "/accounts/password/reset/done/",
    "/accounts/email/",  # the address job apps are told is the identity provider's
    "/accounts/confirm-email/",
    "/accounts/3rdparty/",
    "/accounts/login/code/",
]


def sso_user(name="sam"):
    user = get_user_model().objects.create_user(name)  # no usable password: SSO alone
    SocialAccount.objects.create(user=user, provider="sso", uid=f"{name}-uid")
    return user


@pytest.mark.parametrize("path", NOT_OFFERED)
def test_pages_the_portal_does_not_offer_do_not_exist(client, path):
    client.force_login(sso_user())
    assert client.get(path).status_code == 404
    assert client.post(path, {"password1": "x" * 20, "password2": "x" * 20}).status_code == 404


def test_an_sso_user_gets_no_local_password(client):
    user = sso_user()
    client.force_login(user)
    client.post(
        "/accounts/password/set/", {"password1": "Tr0ub4dor&3xx", "password2": "Tr0ub4dor&3xx"}
    )
    user.refresh_from_db()
    assert not user.has_usable_password()
    anonymous = type(client)()
    assert (
        anonymous.post("/accounts/password/reset/", {"email": "sam@example.org"}).status_code == 404
    )


def test_an_sso_user_with_a_password_from_before_signs_in_through_sso_alone(client):
    """One set while the portal still offered it: not a way past the identity provider."""
    user = sso_user()
    user.set_password("set-before-2026")
    user.save()
    answer = client.post("/accounts/login/", {"login": "sam", "password": "set-before-2026"})
    assert answer.status_code == 200  # the form again
    assert "_auth_user_id" not in client.session


def test_the_pages_sign_in_needs_are_still_there(client):
    assert client.get("/accounts/login/").status_code == 200
    # where an SSO sign-in whose username is taken picks another: not behind the 404s
    assert client.get("/accounts/3rdparty/signup/").status_code != 404
    assert client.get("/accounts/3rdparty/login/error/").status_code == 401  # its own page


def test_djangos_admin_signs_in_only_through_the_portals_sign_in(client, settings):
    """Its own form had no rate limit and ignored PASSWORD_LOGIN=false."""
    get_user_model().objects.create_user("root", password="pw-root-123", is_staff=True)
    page = client.get("/django-admin/login/")
    assert page.status_code == 302
    assert page["Location"].startswith("/accounts/login/?next=")
    posted = client.post("/django-admin/login/", {"username": "root", "password": "pw-root-123"})
    assert posted.status_code == 302
    assert posted["Location"].startswith("/accounts/login/")
    assert "_auth_user_id" not in client.session  # not signed in by the admin's form
    client.force_login(get_user_model().objects.create_user("pat"))  # not staff
    assert client.get("/django-admin/login/").status_code == 403


def test_failed_sign_ins_count_per_account_whatever_host_header_a_client_sends(client):
    """allauth keyed its count by the Host header as sent: `:1`, `:2`... each began afresh."""
    get_user_model().objects.create_user("victim", password="the-right-one-42")
    for port in range(1, 6):
        wrong = {"login": "Victim", "password": f"guess-{port}"}
        client.post("/accounts/login/", wrong, HTTP_HOST=f"testserver:{port}")
    right = {"login": "victim", "password": "the-right-one-42"}
    answer = client.post("/accounts/login/", right, HTTP_HOST="TESTSERVER:6")
    assert answer.status_code == 200  # the form again, not a signed-in redirect
    assert "_auth_user_id" not in client.session
    assert "Too many failed login attempts" in answer.content.decode()


def test_an_sso_name_is_kept_in_unicodes_compatibility_form():
    """A fullwidth `ａlice` would live beside `alice`, alike to read in every member list."""
    from allauth.socialaccount.models import SocialLogin

    from accounts.adapters import SocialAccountAdapter

    login = SocialLogin(user=get_user_model()())
    user = SocialAccountAdapter().populate_user(None, login, {"username": "ａlice"})
    assert user.username == "alice"


def test_someone_in_no_tenant_is_told_whom_to_ask(client, settings):
    settings.PORTAL_ADMIN_CONTACT = "the HPC desk (hpc@lab.example)"
    client.force_login(sso_user())
    page = client.get("/").content.decode()
    assert "Ask the HPC desk (hpc@lab.example) to add you" in page


def test_an_sso_accounts_api_tokens_work_only_while_it_signs_in(settings, client):
    """The provider's groups and its disabling of a person reach the portal at sign-in: an SSO
    account's token stops working SSO_TOKEN_SIGN_IN_DAYS after its last sign-in, on the API
    and at endpoints alike, and works again after the next sign-in. Tokens of local accounts
    keep their own expiry."""
    from datetime import timedelta

    from django.utils import timezone
    from rest_framework.test import APIClient

    from accounts.models import ApiToken
    from jobs import forward_auth

    settings.SSO_TOKEN_SIGN_IN_DAYS = 30
    sam, local = sso_user(), get_user_model().objects.create_user("lou", password="pw-lou")
    answers = {}
    for user in (sam, local):
        user.last_login = timezone.now() - timedelta(days=31)
        user.save(update_fields=["last_login"])
        _, raw = ApiToken.issue(user, "ci")
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        answers[user.username] = (api.get("/api/v1/tenants/"), raw)
    refused, raw = answers["sam"]
    assert refused.status_code == 401
    assert "its API tokens work for 30 days after a sign-in" in refused.json()["detail"]
    assert forward_auth.token_user(f"Bearer {raw}") is None
    assert answers["lou"][0].status_code == 200
    client.force_login(sam)  # signs in again (Django records it)
    sam.refresh_from_db()
    assert timezone.now() - sam.last_login < timedelta(minutes=1)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/v1/tenants/").status_code == 200
    forward_auth._cache.data.clear()  # a cached refusal lasts FORWARD_AUTH_CACHE_SECONDS at most
    assert forward_auth.token_user(f"Bearer {raw}").id == sam.pk
    page = client.get("/profile/").content.decode()  # the page says until when, and why
    assert "You sign in through SSO: your tokens work until" in page
    client.force_login(local)
    assert 'data-testid="tokens-lapse"' not in client.get("/profile/").content.decode()
