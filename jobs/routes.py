"""Where an endpoint is served: its own host under the wildcard domain, so each job app is an
origin of its own. Hosts are derived once, stored, and never parsed back: forward-auth learns
which endpoint a request is for from the route's auth address, not from the request."""

from urllib.parse import urlsplit

from django.conf import settings


def endpoint_host(host_label: str) -> str:
    return f"{host_label}.{settings.ENDPOINT_WILDCARD_DOMAIN}"


def endpoint_origin(host_label: str) -> str:
    port = f":{settings.ENDPOINT_PORT}" if settings.ENDPOINT_PORT else ""
    return f"{settings.ENDPOINT_SCHEME}://{endpoint_host(host_label)}{port}"


def safe_path(target: str) -> str:
    """A path (and query) on the endpoint's own host, from what a client asked to return to;
    anything naming another host or scheme becomes "/"."""
    parts = urlsplit(target or "/")
    if parts.scheme or parts.netloc or not parts.path.startswith("/") or "\\" in target:
        return "/"
    if parts.path.startswith("//"):
        return "/"
    return parts.path + (f"?{parts.query}" if parts.query else "")
