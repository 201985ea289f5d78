"""Where an endpoint is served: its own host under the wildcard domain, so each job app is an
origin of its own. Hosts are derived once and stored: forward-auth learns which endpoint a
request is for from the route's auth address, not from the request. A host is read back only to
tell a browser why an address is closed."""

import re
from urllib.parse import urlsplit

from django.conf import settings

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


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


def label_of_host(host: str) -> str:
    """The first label of an endpoint host (any case, with a port or a final dot), or "" for a
    host outside the wildcard domain. Only to say why an address is closed, never to decide
    access: that is decided by the route a request takes."""
    host = host.strip().lower().rstrip(".")
    host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    label, _, domain = host.partition(".")
    if domain != settings.ENDPOINT_WILDCARD_DOMAIN.lower() or not DNS_LABEL.fullmatch(label):
        return ""
    return label
