"""Where an endpoint is served, in one place: its host and path, and back from a URL to the
(tenant, job, endpoint) it names."""

from urllib.parse import urlsplit

from django.conf import settings


def endpoint_path(tenant: str, job: str, endpoint: str) -> str:
    if settings.ENDPOINT_ROUTE == "host":
        return "/"
    return f"{settings.ENDPOINT_PATH_PREFIX}/{tenant}/{job}/{endpoint}/"


def endpoint_host(tenant: str, job: str, endpoint: str) -> str:
    """The host routes match: one per endpoint in host mode, else ENDPOINT_HOST ("" for any)."""
    if settings.ENDPOINT_ROUTE == "host":
        return f"{endpoint}--{job}--{tenant}.{settings.ENDPOINT_WILDCARD_DOMAIN}"
    return settings.ENDPOINT_HOST


def endpoint_key(url: str) -> tuple[str, str, str] | None:
    """(tenant, job, endpoint) named by a request's URL, or None."""
    parts = urlsplit(url)
    if settings.ENDPOINT_ROUTE == "host":
        label = parts.hostname.split(".", 1)[0] if parts.hostname else ""
        names = label.split("--")
        return (names[2], names[1], names[0]) if len(names) == 3 else None
    prefix = settings.ENDPOINT_PATH_PREFIX.strip("/")
    segments = parts.path.strip("/").split("/")
    if len(segments) >= 4 and segments[0] == prefix:
        return segments[1], segments[2], segments[3]
    return None
