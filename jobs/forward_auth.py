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
from http.cookies import SimpleCookie
from urllib.parse import quote, unquote

from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model
from django.contrib.sessions.backends.base import SessionBase
from django.http import HttpResponse, HttpResponseRedirect
from django.utils import timezone
from django.utils.module_loading import import_string
from django.views.decorators.cache import never_cache

from accounts.models import TOKEN_PREFIX, ApiToken, hash_token
from tenants.models import Membership

from .models import Endpoint
from .routes import endpoint_key


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


def current_user(authorization, session_key):
    if authorization.startswith(f"Bearer {TOKEN_PREFIX}"):
        raw = authorization.split(" ", 1)[1]
        return _cache.get(("token", hash_token(raw)), lambda: _token_user(raw))
    if not session_key:
        return None
    return _cache.get(("session", session_key), lambda: _session_user(session_key))


def original_url(headers):
    """The URL nginx (X-Original-URL) or Traefik (X-Forwarded-*) asks about."""
    if headers.get("X-Original-URL"):
        return headers["X-Original-URL"]
    proto = headers.get("X-Forwarded-Proto", "https")
    return f"{proto}://{headers.get('X-Forwarded-Host', '')}{headers.get('X-Forwarded-Uri', '/')}"


def _cache_seconds(facts=None):
    """How long nginx's auth cache may reuse an answer: with the portal's own cache, a
    revocation takes effect within 30 s, and an allowed answer never outlives the endpoint."""
    seconds = max(30 - settings.FORWARD_AUTH_CACHE_SECONDS, 0)
    if facts is not None:
        remaining = (facts.expires_at - timezone.now()).total_seconds()
        seconds = max(min(seconds, int(remaining)), 0)
    return str(seconds)


def decide(url, *, authorization="", session_key="", redirect=False):
    """(status, headers, body) for one request to an endpoint."""
    key = endpoint_key(url)
    facts = _cache.get(("endpoint", key), lambda: _endpoint_facts(key)) if key else None
    if facts is None:
        return 403, {"X-Accel-Expires": _cache_seconds()}, "no such endpoint"
    user = current_user(authorization, session_key)
    if user is None:
        if redirect:
            return 302, {"Location": f"{settings.PORTAL_URL}/auth/signin?rd={quote(url)}"}, ""
        return 401, {"X-Accel-Expires": _cache_seconds()}, "sign in first"
    if timezone.now() >= facts.expires_at:
        return 403, {"X-Accel-Expires": _cache_seconds()}, "this endpoint has expired"
    if user.id not in facts.members or (facts.private and user.id != facts.owner_id):
        return 403, {"X-Accel-Expires": _cache_seconds()}, "not allowed"
    return (
        200,
        {
            "X-Auth-Request-User": user.username,
            "X-Auth-Request-Email": user.email,
            "X-Auth-Request-Groups": facts.tenant,
            "X-Accel-Expires": _cache_seconds(facts),
        },
        "ok",
    )


@never_cache
def forward_auth(request):
    status, headers, body = decide(
        original_url(request.headers),
        authorization=request.headers.get("Authorization", ""),
        session_key=request.COOKIES.get(settings.SESSION_COOKIE_NAME, ""),
        redirect=bool(request.GET.get("redirect")),
    )
    response = HttpResponse(body, status=status, content_type="text/plain")
    for name, value in headers.items():
        response[name] = value
    return response


class FastPath:
    """WSGI middleware answering /auth/endpoint before Django's middleware stack: it runs for
    every request to every endpoint and needs none of sessions-on-write, CSRF or messages. The
    same decide() serves it, so behaviour is identical."""

    path = "/auth/endpoint"

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO") != self.path:
            return self.app(environ, start_response)
        headers = {
            "X-Original-URL": environ.get("HTTP_X_ORIGINAL_URL", ""),
            "X-Forwarded-Proto": environ.get("HTTP_X_FORWARDED_PROTO", "https"),
            "X-Forwarded-Host": environ.get("HTTP_X_FORWARDED_HOST", ""),
            "X-Forwarded-Uri": environ.get("HTTP_X_FORWARDED_URI", "/"),
        }
        cookies = SimpleCookie()
        cookies.load(environ.get("HTTP_COOKIE", ""))
        session = cookies.get(settings.SESSION_COOKIE_NAME)
        status, extra, body = decide(
            original_url(headers),
            authorization=environ.get("HTTP_AUTHORIZATION", ""),
            session_key=session.value if session else "",
            redirect="redirect=1" in environ.get("QUERY_STRING", ""),
        )
        payload = body.encode()
        start_response(
            f"{status} {_REASONS[status]}",
            [
                ("Content-Type", "text/plain"),
                ("Content-Length", str(len(payload))),
                ("Cache-Control", "no-store"),
                *extra.items(),
            ],
        )
        return [payload]


_REASONS = {200: "OK", 302: "Found", 401: "Unauthorized", 403: "Forbidden"}


def signin(request):
    """Where ingress-nginx sends anonymous browsers (`rd` = where they were going)."""
    query = request.META.get("QUERY_STRING", "")
    # Everything after rd= is the target, escaped (ingress-nginx) or not (plain nginx).
    target = unquote(query.split("rd=", 1)[1]) if "rd=" in query else "/"
    return HttpResponseRedirect(f"/accounts/login/?next={quote(target)}")
