"""The web's account and the role its reads of tenant namespaces are bound with, as the chart
writes them in the environment."""

import pytest

from tests.processes import settings_refused, settings_under


def test_the_role_and_the_account_are_read_together():
    read = settings_under(
        ["WEB_TENANT_ROLE", "WEB_ACCOUNT"],
        WEB_TENANT_ROLE="portal-prod-web-tenant",
        WEB_ACCOUNT="prod/portal-web",
    )
    assert read == ["portal-prod-web-tenant", "prod/portal-web"]


@pytest.mark.parametrize(
    "env",
    [
        {"WEB_TENANT_ROLE": "portal-web-tenant"},  # bound to whom?
        {"WEB_ACCOUNT": "prod/portal-web"},  # with what?
        {"WEB_TENANT_ROLE": "portal-web-tenant", "WEB_ACCOUNT": "portal-web"},
        {"WEB_TENANT_ROLE": "portal-web-tenant", "WEB_ACCOUNT": "prod/"},
        {"WEB_TENANT_ROLE": "portal-web-tenant", "WEB_ACCOUNT": "a/b/c"},
    ],
)
def test_one_without_the_other_or_an_account_without_its_namespace_stops_the_portal(env):
    said = settings_refused(**{"WEB_TENANT_ROLE": "", "WEB_ACCOUNT": "", **env})
    assert "the web's ServiceAccount as namespace/name" in said
