"""Where an endpoint is served: its own host under the wildcard domain, so each job app is an
origin of its own. Hosts are derived once and stored: forward-auth learns which endpoint a
request is for from the route's auth address, not from the request. A host is read back only to
tell a browser why an address is closed."""

from urllib.parse import SplitResult, urlsplit

from django.conf import settings

from core.validators import DNS1123_LABEL


def endpoint_host(host_label: str) -> str:
    return f"{host_label}.{settings.ENDPOINT_WILDCARD_DOMAIN}"


def endpoint_origin(host_label: str) -> str:
    port = f":{settings.ENDPOINT_PORT}" if settings.ENDPOINT_PORT else ""
    return f"{settings.ENDPOINT_SCHEME}://{endpoint_host(host_label)}{port}"


def parse_url(text: str) -> SplitResult:
    """A URL's parts; one Python cannot read (`//[x`, an unclosed IPv6 host) is "/"."""
    try:
        return urlsplit(text)
    except ValueError:
        return urlsplit("/")


def safe_path(target: str) -> str:
    """A path (and query) on the endpoint's own host, from what a client asked to return to;
    anything naming another host or scheme becomes "/"."""
    parts = parse_url(target or "/")
    if parts.scheme or parts.netloc or not parts.path.startswith("/") or "\\" in target:
        return "/"
    if parts.path.startswith("//"):
        return "/"
    return parts.path + (f"?{parts.query}" if parts.query else "")


def label_of_host(host: str) -> str:
    """The first label of an endpoint host (any case, with a port or a final dot), or "" for a
    host outside the wildcard domain. Only to say why an address is closed, never to decide
    access: that is decided by the route a request takes."""
    host = host.strip().lower().rstrip(".")
    host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    label, _, domain = host.partition(".")
    valid = len(label) <= 63 and DNS1123_LABEL.fullmatch(label)
    if domain != settings.ENDPOINT_WILDCARD_DOMAIN.lower() or not valid:
        return ""
    return label
