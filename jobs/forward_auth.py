"""The forward-auth endpoint every request to every job endpoint goes through.

2xx for a signed-in member of the job's tenant (the owner only for a private endpoint) while
the endpoint has not expired; 401 for anonymous requests (ingress-nginx then sends the browser
to the sign-in URL; with ?redirect=1, for Traefik, the portal answers that 302 itself); 403 for
everyone else. The common case makes no database query: sessions, tokens and endpoints are
cached in this process for FORWARD_AUTH_CACHE_SECONDS, so a revoked membership or session
stops working within that time, and expiry is checked against the clock on every request.
"""

import time
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.sessions.backends.base import SessionBase
from django.http import HttpResponse, HttpResponseRedirect
from django.utils import timezone
from django.utils.module_loading import import_string
from django.views.decorators.cache import never_cache

from portal.models import TOKEN_PREFIX, ApiToken, hash_token
from tenants.models import Membership

from .models import Endpoint


@dataclass(frozen=True)
class EndpointFacts:
    tenant: str
    owner_id: int
    private: bool
    expires_at: object
    members: frozenset


@dataclass(frozen=True)
class UserFacts:
    id: int
    username: str
    email: str


class TTLCache:
    """A small per-process cache; entries live `ttl` seconds."""

    def __init__(self, size=10_000):
        self.size, self.data = size, {}

    def get(self, key, load):
        now = time.monotonic()
        hit = self.data.get(key)
        if hit and hit[0] > now:
            return hit[1]
        value = load()
        if len(self.data) >= self.size:
            self.data.clear()
        self.data[key] = (now + settings.FORWARD_AUTH_CACHE_SECONDS, value)
        return value


_cache = TTLCache()


def endpoint_key(original_url):
    """(tenant, job, endpoint) named by the original request's URL, or None."""
    parts = urlsplit(original_url)
    if settings.ENDPOINT_ROUTE == "host":
        label = parts.hostname.split(".", 1)[0] if parts.hostname else ""
        names = label.split("--")
        return (names[2], names[1], names[0]) if len(names) == 3 else None
    prefix = settings.ENDPOINT_PATH_PREFIX.strip("/")
    segments = parts.path.strip("/").split("/")
    if len(segments) >= 4 and segments[0] == prefix:
        return segments[1], segments[2], segments[3]
    return None


def _endpoint_facts(key):
    endpoint = (
        Endpoint.objects.select_related("job__tenant")
        .filter(job__tenant__slug=key[0], job__name=key[1], name=key[2])
        .filter(reclaimed_at__isnull=True)
        .first()
    )
    if endpoint is None:
        return None
    members = frozenset(
        Membership.objects.filter(tenant_id=endpoint.job.tenant_id).values_list(
            "user_id", flat=True
        )
    )
    return EndpointFacts(
        endpoint.job.tenant.slug,
        endpoint.job.owner_id,
        endpoint.private,
        endpoint.expires_at,
        members,
    )


def _user_facts(user):
    if user is None or not user.is_active:
        return None
    return UserFacts(user.pk, user.get_username(), user.email or "")


def _session_user(session_key):
    from django.contrib.auth import get_user_model

    store = import_string(settings.SESSION_ENGINE + ".SessionStore")(session_key)
    user_id = store.get(SESSION_KEY) if isinstance(store, SessionBase) else None
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    return _user_facts(user)


def _token_user(raw):
    key_id = raw[len(TOKEN_PREFIX) :].split("_", 1)[0]
    token = ApiToken.objects.usable().select_related("user").filter(key_id=key_id).first()
    if token is None or token.token_hash != hash_token(raw):
        return None
    return _user_facts(token.user)


def current_user(request):
    header = request.headers.get("Authorization", "")
    if header.startswith(f"Bearer {TOKEN_PREFIX}"):
        raw = header.split(" ", 1)[1]
        return _cache.get(("token", hash_token(raw)), lambda: _token_user(raw))
    session_key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    if not session_key:
        return None
    return _cache.get(("session", session_key), lambda: _session_user(session_key))


def original_url(request):
    if request.headers.get("X-Original-URL"):  # ingress-nginx
        return request.headers["X-Original-URL"]
    host = request.headers.get("X-Forwarded-Host", "")  # Traefik
    proto = request.headers.get("X-Forwarded-Proto", "https")
    return f"{proto}://{host}{request.headers.get('X-Forwarded-Uri', '/')}"


def _decided(response, facts=None):
    """Tell nginx's auth cache how long it may reuse this answer: with the portal's own cache,
    a revocation takes effect within 30 s, and an allowed answer never outlives the endpoint."""
    seconds = max(30 - settings.FORWARD_AUTH_CACHE_SECONDS, 0)
    if facts is not None:
        remaining = (facts.expires_at - timezone.now()).total_seconds()
        seconds = max(min(seconds, int(remaining)), 0)
    response["X-Accel-Expires"] = str(seconds)
    return response


@never_cache
def forward_auth(request):
    url = original_url(request)
    key = endpoint_key(url)
    facts = _cache.get(("endpoint", key), lambda: _endpoint_facts(key)) if key else None
    if facts is None:
        return _decided(HttpResponse("no such endpoint", status=403, content_type="text/plain"))
    user = current_user(request)
    if user is None:
        if request.GET.get("redirect"):
            return HttpResponseRedirect(f"{settings.PORTAL_URL}/auth/signin?rd={quote(url)}")
        return _decided(HttpResponse("sign in first", status=401, content_type="text/plain"))
    if timezone.now() >= facts.expires_at:
        return _decided(
            HttpResponse("this endpoint has expired", status=403, content_type="text/plain")
        )
    if user.id not in facts.members or (facts.private and user.id != facts.owner_id):
        return _decided(HttpResponse("not allowed", status=403, content_type="text/plain"))
    response = HttpResponse("ok", content_type="text/plain")
    response["X-Auth-Request-User"] = user.username
    response["X-Auth-Request-Email"] = user.email
    response["X-Auth-Request-Groups"] = facts.tenant
    return _decided(response, facts)


def signin(request):
    """Where ingress-nginx sends anonymous browsers (`rd` = where they were going)."""
    query = request.META.get("QUERY_STRING", "")
    # Everything after rd= is the target, escaped (ingress-nginx) or not (plain nginx).
    target = unquote(query.split("rd=", 1)[1]) if "rd=" in query else "/"
    return HttpResponseRedirect(f"/accounts/login/?next={quote(target)}")
