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


def test_earlier_secret_keys_are_read_from_the_environment_space_separated():
    """SECRET_KEY_FALLBACKS: a key rotated signs nobody out while its predecessors are kept."""
    assert settings_under(["SECRET_KEY_FALLBACKS"], SECRET_KEY_FALLBACKS="old-1  old-2") == [
        ["old-1", "old-2"]
    ]
    assert settings_under(["SECRET_KEY_FALLBACKS"]) == [[]]


def test_an_endpoint_cookie_signed_with_an_earlier_key_still_opens_its_endpoint(settings):
    from django.core import signing

    from jobs.forward_auth import COOKIE_SALT

    settings.SECRET_KEY = "the-old-key-" * 4
    value = signing.dumps({"e": 1}, salt=COOKIE_SALT)
    settings.SECRET_KEY = "the-new-key-" * 4
    try:
        signing.loads(value, salt=COOKIE_SALT)
    except signing.BadSignature:
        pass
    else:
        raise AssertionError("a cookie of a key no longer kept was taken")
    settings.SECRET_KEY_FALLBACKS = ["the-old-key-" * 4]
    assert signing.loads(value, salt=COOKIE_SALT) == {"e": 1}
