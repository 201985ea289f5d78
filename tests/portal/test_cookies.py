"""The portal's own cookies cannot be planted by a job app on a sibling domain."""

from tests.processes import settings_under


def cookie_settings(**env):
    return settings_under(
        ["SESSION_COOKIE_NAME", "CSRF_COOKIE_NAME", "SESSION_COOKIE_SECURE"], **env
    )


def test_over_https_the_portals_cookies_are_host_only_by_name():
    """A job app at x.endpoints.example.org may set a cookie for all of example.org, which the
    browser then sends to portal.example.org too; browsers refuse a __Host- cookie with a
    Domain, so it cannot stand in for the portal's session or CSRF token."""
    secure = cookie_settings(
        SESSION_COOKIE_SECURE="true",
        PORTAL_URL="https://portal.example.org",
        ENDPOINT_WILDCARD_DOMAIN="endpoints.example.org",
    )
    assert secure == ["__Host-sessionid", "__Host-csrftoken", True]
    # Plain HTTP (a laptop's make run): browsers take __Host- cookies over HTTPS only.
    plain = cookie_settings(SESSION_COOKIE_SECURE="false")
    assert plain == ["sessionid", "csrftoken", False]
