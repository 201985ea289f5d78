"""Sign-in through a real OpenID Connect provider process (hack/oidc), with the real
authorization-code flow: group claims become memberships, at every login."""

import json
import os
import re
import secrets
import subprocess
from urllib.parse import urljoin

import pytest
import requests
from django.contrib.auth import get_user_model

from tenants.models import Membership, Tenant
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)
PORT = 9411


@pytest.fixture(scope="session")
def oidc(live_server, tmp_path_factory):
    """The provider, registered with the live server's callback URL."""
    state = tmp_path_factory.mktemp("oidc")
    users = state / "users.json"
    users.write_text("{}")
    env = {
        **os.environ,
        "OIDC_PORT": str(PORT),
        "OIDC_STATE": str(state),
        "OIDC_USERS_FILE": str(users),
        "OIDC_CLIENT_ID": "gpu-portal-test",
        "OIDC_CLIENT_SECRET": secrets.token_urlsafe(24),
        "OIDC_REDIRECT_URIS": f"{live_server.url}/accounts/oidc/sso/login/callback/",
    }
    script = str(ROOT / "hack" / "oidc.sh")
    try:  # stopped also when starting fails half-way
        subprocess.run(["bash", script, "start"], env=env, check=True)
        yield {"url": f"http://127.0.0.1:{PORT}", "users": users, "env": env}
    finally:
        subprocess.run(["bash", script, "stop"], env=env, check=False)


@pytest.fixture
def sso(oidc, settings):
    env = oidc["env"]
    settings.SOCIALACCOUNT_PROVIDERS = {
        "openid_connect": {
            "OAUTH_PKCE_ENABLED": True,
            "APPS": [
                {
                    "provider_id": "sso",
                    "name": "Test IdP",
                    "client_id": env["OIDC_CLIENT_ID"],
                    "secret": env["OIDC_CLIENT_SECRET"],
                    "settings": {
                        "server_url": oidc["url"],
                        "scope": ["openid", "profile", "email", "groups"],
                    },
                }
            ],
        }
    }
    return oidc


def set_users(oidc, **users):
    oidc["users"].write_text(
        json.dumps(
            {
                name: {
                    "password": f"pw-{name}",
                    "email": f"{name}@example.org",
                    "name": name.title(),
                    "groups": groups,
                }
                for name, groups in users.items()
            }
        )
    )


def sso_login(base_url, username, password=None):
    """Click 'Sign in with Test IdP', log in at the provider, come back signed in."""
    http = requests.Session()
    page = http.get(f"{base_url}/accounts/login/").text
    action = re.search(
        r'<form method="post" action="([^"]+)">\s*<input type="hidden" '
        r'name="csrfmiddlewaretoken" value="([^"]+)"',
        page,
    )
    response = http.post(
        urljoin(base_url, action.group(1).replace("&amp;", "&")),
        data={"csrfmiddlewaretoken": action.group(2)},
        headers={"Referer": f"{base_url}/accounts/login/"},
    )
    assert "/interaction/" in response.url, response.text[:500]
    form_action = re.search(r'action="([^"]+)"', response.text).group(1)
    response = http.post(
        urljoin(response.url, form_action),
        data={"login": username, "password": password or f"pw-{username}"},
    )
    return http, response


def roles(username):
    return {
        m.tenant.slug: m.role
        for m in Membership.objects.filter(user__username=username).select_related("tenant")
    }


def test_group_claims_place_a_user_in_the_right_tenants_with_the_right_roles(live_server, sso):
    Tenant.objects.create(slug="vision", display_name="Vision")
    Tenant.objects.create(slug="nlp", display_name="NLP")
    set_users(sso, erin=["gpu-portal:vision:researcher", "gpu-portal:nlp:viewer", "staff"])
    http, response = sso_login(live_server.url, "erin")
    assert response.url == f"{live_server.url}/"
    assert "Your tenants" in response.text
    assert roles("erin") == {"vision": "researcher", "nlp": "viewer"}
    assert http.get(f"{live_server.url}/api/v1/tenants/").json()["count"] == 2


def test_changing_groups_changes_access_at_the_next_login(live_server, sso):
    Tenant.objects.create(slug="vision", display_name="Vision")
    Tenant.objects.create(slug="nlp", display_name="NLP")
    set_users(sso, frank=["gpu-portal:vision:admin"])
    sso_login(live_server.url, "frank")
    assert roles("frank") == {"vision": "admin"}

    set_users(sso, frank=["gpu-portal:nlp:researcher"])
    http, response = sso_login(live_server.url, "frank")
    assert roles("frank") == {"nlp": "researcher"}
    assert http.get(f"{live_server.url}/tenants/vision/").status_code == 404
    assert http.get(f"{live_server.url}/tenants/nlp/").status_code == 200


def test_manual_memberships_survive_sso_logins(live_server, sso):
    vision = Tenant.objects.create(slug="vision", display_name="Vision")
    set_users(sso, gina=[])
    sso_login(live_server.url, "gina")
    Membership.objects.create(
        user=get_user_model().objects.get(username="gina"), tenant=vision, role="viewer"
    )
    sso_login(live_server.url, "gina")
    assert roles("gina") == {"vision": "viewer"}


def test_a_user_with_no_mapped_group_is_told_whom_to_ask(live_server, sso):
    set_users(sso, henry=["staff", "gpu-portal:unknown-team:researcher"])
    _, response = sso_login(live_server.url, "henry")
    assert "You are not in any tenant yet" in response.text
    assert "gpu-portal:&lt;team&gt;:researcher" in response.text
    assert roles("henry") == {}


def test_the_platform_admin_group_makes_a_platform_admin_and_removing_it_revokes(live_server, sso):
    set_users(sso, ivy=["gpu-portal:platform-admins"])
    http, _ = sso_login(live_server.url, "ivy")
    assert http.get(f"{live_server.url}/audit/").status_code == 200
    set_users(sso, ivy=[])
    http, _ = sso_login(live_server.url, "ivy")
    assert http.get(f"{live_server.url}/audit/").status_code == 403


def test_a_wrong_password_at_the_provider_signs_nobody_in(live_server, sso):
    set_users(sso, jack=["gpu-portal:vision:admin"])
    http, response = sso_login(live_server.url, "jack", password="wrong")
    assert "Invalid username or password" in response.text
    assert not get_user_model().objects.filter(username="jack").exists()
    assert http.get(f"{live_server.url}/tenants/", allow_redirects=False).status_code == 302


def test_password_login_can_be_switched_off(live_server, sso, settings):
    settings.SOCIALACCOUNT_ONLY = True
    get_user_model().objects.create_user("kate", password="pw-kate")
    http = requests.Session()
    page = http.get(f"{live_server.url}/accounts/login/").text
    assert "Sign in with Test IdP" in page
    assert 'name="password"' not in page
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    http.post(
        f"{live_server.url}/accounts/login/",
        data={"csrfmiddlewaretoken": token, "login": "kate", "password": "pw-kate"},
        headers={"Referer": f"{live_server.url}/accounts/login/"},
    )
    assert http.get(f"{live_server.url}/tenants/", allow_redirects=False).status_code == 302
