"""Behind a router that ends TLS, requests reach the portal as plain http: what the portal
builds for the browser (the SSO callback it names to the identity provider, the API's
next-page links) still says https, and sign-in limits count clients, not the router."""

import pytest
from rest_framework.test import APIClient

from tenants.models import Tenant
from tests.processes import settings_under
from tests.tenants.conftest import make_user


def settings_of(**env):
    names = [
        "SECURE_PROXY_SSL_HEADER",
        "ACCOUNT_DEFAULT_HTTP_PROTOCOL",
        "ALLAUTH_TRUSTED_PROXY_COUNT",
        "CSRF_TRUSTED_ORIGINS",
    ]
    return settings_under(names, **env)


def test_the_chart_s_settings_say_https_and_count_clients_behind_one_router():
    header, protocol, proxies, origins = settings_of(
        PORTAL_URL="https://portal.example.org", TRUSTED_PROXY_COUNT="1"
    )
    assert header == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert (protocol, proxies) == ("https", 1)
    assert "https://portal.example.org" in origins
    # A laptop's make run: plain http, no router in front, X-Forwarded-Proto never trusted.
    header, protocol, proxies, _ = settings_of(
        PORTAL_URL="http://127.0.0.1:8000", TRUSTED_PROXY_COUNT="0"
    )
    assert (header, protocol, proxies) == (None, "http", 0)


@pytest.mark.django_db
def test_api_next_page_links_say_https_behind_the_router(settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    Tenant.objects.bulk_create(
        [
            Tenant(slug=f"page-{i:02d}", display_name="P")
            for i in range(settings.REST_FRAMEWORK["PAGE_SIZE"] + 1)
        ]
    )
    api = APIClient()
    api.force_login(make_user("admin", staff=True))
    page = api.get("/api/v1/tenants/", HTTP_X_FORWARDED_PROTO="https").json()
    assert page["next"].startswith("https://")
