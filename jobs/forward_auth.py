"""Forward-auth for job endpoints, and the handshake that gives a browser an endpoint cookie.

Every endpoint is its own origin (`<port>--<job>--<tenant>.<wildcard domain>`), so the
portal's session and CSRF cookies never reach a job app. The router asks
`/auth/endpoint/<id>` about every request: the id comes from the route's own auth address, so
a request routed to endpoint B is checked against B whatever the client puts in its headers.

Credentials: `Authorization: Bearer gpp_...` (scripts) or the endpoint cookie, a signed value
bound to that endpoint, the user and their password, that only the handshake issues:

1. A browser without a cookie gets a redirect to the portal's `/auth/endpoint/<id>/start`
   (Traefik: the portal answers the 302 itself, and sets a state cookie on the endpoint's host
   whose hash rides along; ingress-nginx: a 401 makes it redirect).
2. There the portal checks its own session and the membership, and sends the browser back to
   the endpoint with a one-time code (60 s) bound to that endpoint and to that state.
3. Forward-auth redeems the code, only in the browser holding the state, and sets the cookie,
   scoped to the endpoint's host alone. So a code someone else was given (sent to a victim in
   a link) signs nobody in as them. A browser already signed in to the endpoint ignores codes.
   Under ingress-nginx, whose redirect carries no cookie of the portal's, codes are bound to the
   endpoint only.

An allowed request goes on with the user's identity in X-Auth-Request-* headers and the
caller's cookies without the endpoint cookie; Authorization never reaches the app. Nothing is
read from the database per request: endpoints, users and tokens are cached in this process for
FORWARD_AUTH_CACHE_SECONDS, so a removed membership, a revoked token, a deactivated user, a
changed password or a reclaimed endpoint is refused within that time; expiry is checked
against the clock on every request.
"""

import hashlib
import logging
import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from importlib import import_module
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.core.cache import cache
from django.db import DatabaseError
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils import timezone
from django.utils.html import escape
from django.views.decorators.cache import never_cache
from redis.exceptions import RedisError

from accounts.models import TOKEN_PREFIX, ApiToken, hash_token
from core import metrics
from core.validators import WHOLE_NUMBER, whole_number
from tenants.models import Membership

from .models import Endpoint
from .routes import endpoint_origin, parse_url, safe_path

SessionStore = import_module(settings.SESSION_ENGINE).SessionStore
log = logging.getLogger(__name__)

CODE_PARAM = "gpp_code"
CODE_SECONDS = 60
COOKIE_SALT = "gpu-portal.endpoint-cookie"
STATE_SECONDS = 600  # from the sign-in redirect to the code's return, SSO sign-in included
STATE = re.compile(r"[0-9a-f]{32}")


def cookie_name() -> str:
    """`__Host-` pins the cookie to the endpoint's host (Secure, Path=/, no Domain): another
    endpoint's app cannot set it there for its whole domain."""
    return "__Host-gpp-endpoint" if settings.ENDPOINT_SCHEME == "https" else "gpp-endpoint"


def state_cookie_name() -> str:
    return "__Host-gpp-state" if settings.ENDPOINT_SCHEME == "https" else "gpp-state"


def state_hash(nonce: str) -> str:
    return hashlib.sha256(f"{COOKIE_SALT}:state:{nonce}".encode()).hexdigest()[:32]


def codes_bound() -> bool:
    """Whether codes are bound to the browser that asked for them: where forward-auth answers
    the browser's sign-in redirect itself (Traefik, and the Gateway API driver on Traefik)."""
    return settings.ROUTING_DRIVER != "ingress-nginx"


@dataclass(frozen=True)
class EndpointFacts:
    id: int
    tenant: str
    owner_id: int
    private: bool
    expires_at: datetime
    members: frozenset[int]
    host_label: str
    closed: bool = False  # its job ended: its routes are gone
    routed: bool = True  # reached through the router (not only inside the cluster)


@dataclass(frozen=True)
class UserFacts:
    id: int
    username: str
    email: str
    auth_hash: str  # changes with the password


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: str = ""


class TTLCache:
    """A small per-process cache; entries live FORWARD_AUTH_CACHE_SECONDS. When full, the entry
    stored longest ago goes: a flood of unknown tokens or endpoint ids (each a miss, each
    stored) wears the cache down one entry at a time, never empties it for everyone at once."""

    def __init__(self, size: int = 10_000):
        self.size, self.data = size, {}
        self.lock = threading.Lock()  # the server's threads share it

    def get(self, key: Any, load: Any) -> Any:
        now = time.monotonic()
        hit = self.data.get(key)
        if hit and hit[0] > now:
            return hit[1]
        value = load()  # outside the lock: other threads' hits never wait for a load
        with self.lock:
            self.data.pop(key, None)  # stored again: now the newest
            while len(self.data) >= self.size:
                self.data.pop(next(iter(self.data)))
            self.data[key] = (now + settings.FORWARD_AUTH_CACHE_SECONDS, value)
        return value


_cache = TTLCache()


def _load_endpoint(endpoint_id: int) -> EndpointFacts | None:
    endpoint = (
        Endpoint.objects.select_related("job__tenant")
        .filter(pk=endpoint_id, reclaimed_at__isnull=True, job__delete_requested=False)
        .first()
    )
    if endpoint is None:
        return None
    tenant = endpoint.job.tenant
    members = Membership.objects.filter(tenant_id=tenant.pk).values_list("user_id", flat=True)
    return EndpointFacts(
        endpoint.pk,
        tenant.slug,
        endpoint.job.owner_id,
        endpoint.private,
        endpoint.expires_at,
        frozenset(members),
        endpoint.host_label,
        closed=endpoint.is_closed,
        routed=endpoint.routed,
    )


def _load_user(user_id: int) -> UserFacts | None:
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None:
        return None
    return UserFacts(user.pk, user.get_username(), user.email or "", user.get_session_auth_hash())


def _load_token(raw: str) -> tuple[int, datetime | None] | None:
    """(its user, when it expires): a cached token is refused the moment it expires."""
    key_id = raw[len(TOKEN_PREFIX) :].split("_", 1)[0]
    token = ApiToken.objects.checked().filter(key_id=key_id).first()
    if token is None or not secrets.compare_digest(token.token_hash, hash_token(raw)):
        return None
    return token.user_id, token.works_until()


def endpoint_facts(endpoint_id: int) -> EndpointFacts | None:
    return _cache.get(("endpoint", endpoint_id), lambda: _load_endpoint(endpoint_id))


def user_facts(user_id: int | None) -> UserFacts | None:
    if user_id is None:
        return None
    return _cache.get(("user", user_id), lambda: _load_user(user_id))


def token_user(authorization: str) -> UserFacts | None:
    raw = authorization.split(" ", 1)[1].strip() if " " in authorization else ""
    if not raw.startswith(TOKEN_PREFIX):
        return None
    token = _cache.get(("token", hash_token(raw)), lambda: _load_token(raw))
    if token is None or (token[1] is not None and timezone.now() >= token[1]):
        return None
    return user_facts(token[0])


def allowed(user: UserFacts, facts: EndpointFacts) -> bool:
    """Members of the endpoint's tenant; only the owner for a private endpoint."""
    if facts.private:
        return user.id == facts.owner_id and user.id in facts.members
    return user.id in facts.members


# The portal sessions that opened endpoints: an endpoint cookie holds a hash of its session's
# key (never the key, which stays on the server, in this index) and is taken only while that
# session is signed in as its user. Signing out, a session that expired, and another user
# signing in on the same browser (which ends the session) all end the access of its endpoint
# cookies, on a shared machine too. Should the cache lose an entry, its cookies go through the
# portal's hand-off again (at once, for a browser still signed in).
SESSION_INDEX = "endpoint-session:{}"


def session_mark(session_key: str) -> str:
    return hashlib.sha256(f"{COOKIE_SALT}:{session_key}".encode()).hexdigest()[:40]


def remember_session(session) -> str:
    mark = session_mark(session.session_key)
    cache.set(SESSION_INDEX.format(mark), session.session_key, session.get_expiry_age())
    return mark


def session_user(mark: str) -> int | None:
    """The user the portal session of this mark is signed in as now, or None."""
    return _cache.get(("session", mark), lambda: _load_session_user(mark))


def _load_session_user(mark: str) -> int | None:
    try:
        key = cache.get(SESSION_INDEX.format(mark)) if mark else None
        data = SessionStore(session_key=key).load() if key else {}
    except (RedisError, DatabaseError):  # refused, not a 500: the hand-off says what is wrong
        log.exception("could not read the portal session behind an endpoint cookie")
        return None
    return whole_number(data.get(SESSION_KEY))


def issue_cookie(facts: EndpointFacts, user: UserFacts, mark: str) -> str:
    payload = {"e": facts.id, "u": user.id, "h": user.auth_hash, "s": mark}
    return signing.dumps(payload, salt=COOKIE_SALT)


def cookie_user(value: str, facts: EndpointFacts) -> UserFacts | None:
    try:
        data = signing.loads(value, salt=COOKIE_SALT, max_age=settings.ENDPOINT_COOKIE_SECONDS)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or data.get("e") != facts.id:
        return None
    user = user_facts(data.get("u"))
    if user is None or not secrets.compare_digest(user.auth_hash, str(data.get("h", ""))):
        return None  # deactivated, or the password changed since the cookie was issued
    if session_user(str(data.get("s", ""))) != user.id:
        return None  # its portal session signed out
    return user


@dataclass(frozen=True)
class Cookies:
    mine: list[str]  # every endpoint cookie sent (another app may have added one of the name)
    state: str  # the sign-in state cookie
    others: str  # the app's own cookies, as a Cookie header


def split_cookies(header: str) -> Cookies:
    """The portal's cookies, and the app's own. The portal's session and CSRF cookies never
    reach an app, even from a client that sends them on purpose."""
    mine, state, others = [], "", []
    portal = {settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME, state_cookie_name()}
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name == cookie_name():
            mine.append(value)
        elif sep and name == state_cookie_name():
            state = value
        if part.strip() and name not in portal and name != cookie_name():
            others.append(part.strip())
    return Cookies(mine, state, "; ".join(others))


def _set_cookie(value: str) -> str:
    secure = "; Secure" if settings.ENDPOINT_SCHEME == "https" else ""
    max_age = settings.ENDPOINT_COOKIE_SECONDS
    return f"{cookie_name()}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}"


def _identity(user: UserFacts, facts: EndpointFacts, other_cookies: str) -> dict[str, str]:
    headers = {
        # Percent-encoded UTF-8: header values are bytes, usernames may be Unicode.
        "X-Auth-Request-User": quote(user.username, safe="@.+-_~"),
        "X-Auth-Request-Email": quote(user.email, safe="@.+-_~"),
        "X-Auth-Request-Groups": facts.tenant,
    }
    if other_cookies:
        headers["Cookie"] = other_cookies
    return headers


def _refusal(status: int, text: str, *, browser: bool) -> Answer:
    """A short answer (the router limits auth bodies); browsers get a small page."""
    if not browser:
        return Answer(status, {"Content-Type": "text/plain; charset=utf-8"}, text)
    portal = escape(settings.PORTAL_URL)
    body = (
        f"<!doctype html><title>GPU Portal</title><h1>{escape(text)}</h1>"
        f'<p><a href="{portal}/">Back to GPU Portal</a></p>'
    )
    return Answer(status, {"Content-Type": "text/html; charset=utf-8"}, body)


def _split_code(uri: str) -> tuple[str, str]:
    """(the one-time code in the request's query, the last one given, and the path and query
    without any)."""
    parts = parse_url(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    code = next((v for k, v in reversed(query) if k == CODE_PARAM), "")
    rest = urlencode([(k, v) for k, v in query if k != CODE_PARAM])
    return code, safe_path(parts.path + (f"?{rest}" if rest else ""))


def _same_browser(data: dict[str, Any], state: str) -> bool:
    """Whether the code comes back to the browser it was made for (holding its state)."""
    bound = data.get("b")
    if not bound:
        return not codes_bound()
    return bool(state) and secrets.compare_digest(state_hash(state), str(bound))


def _redeem(
    facts: EndpointFacts | None, code: str, target: str, *, state: str, redirect: bool
) -> Answer:
    key = f"endpoint-code:{code}"
    data = cache.get(key)
    if (
        facts is None
        or not isinstance(data, dict)
        or data.get("e") != facts.id
        or not _same_browser(data, state)
        or not cache.delete(key)  # once
    ):
        return _refusal(
            403,
            "This sign-in link was used, has expired or was opened in another browser; open "
            "the endpoint again.",
            browser=True,
        )
    user = user_facts(data["u"])
    if user is None or not allowed(user, facts):
        return _refusal(403, "You may not open this endpoint.", browser=True)
    if timezone.now() >= facts.expires_at:
        return _refusal(403, "This endpoint has expired; its owner can extend it.", browser=True)
    cookie = _set_cookie(issue_cookie(facts, user, data.get("s", "")))
    if redirect:  # Traefik: straight back to where the browser was going, without the code
        return Answer(302, {"Location": target, "Set-Cookie": cookie})
    return Answer(200, {**_identity(user, facts, ""), "Set-Cookie": cookie})


def decide(
    endpoint_id: int,
    *,
    uri: str = "/",
    cookie: str = "",
    authorization: str = "",
    accept: str = "",
    redirect: bool = False,
) -> Answer:
    """The answer for one request routed to endpoint `endpoint_id`. Whoever asks learns
    nothing of an endpoint before signing in, and a signed-in non-member nothing but that they
    may not open it: the answer is the same for an id that does not exist, one that closed, and
    another tenant's (forward-auth answers anyone who reaches the portal)."""
    browser = "text/html" in accept
    facts = endpoint_facts(endpoint_id)
    code, target = _split_code(uri)
    cookies = split_cookies(cookie)
    if authorization:
        user = token_user(authorization)
        if user is None:
            return Answer(401, {"WWW-Authenticate": 'Bearer realm="gpu-portal"'}, "bad token")
    else:
        found = (cookie_user(value, facts) for value in cookies.mine) if facts else iter(())
        user = next((u for u in found if u is not None), None)
    if code:
        if user is None:
            return _redeem(facts, code, target, state=cookies.state, redirect=redirect)
        cache.delete(f"endpoint-code:{code}")  # signed in already: it changes nothing, and
        if redirect:  # goes, not left usable in the app's URL (and logs) under ingress-nginx
            return Answer(302, {"Location": target})
    if user is None:
        if redirect and browser:
            return _sign_in_redirect(endpoint_id, target)
        return Answer(401, {"WWW-Authenticate": 'Bearer realm="gpu-portal"'}, "sign in first")
    if facts is None or not allowed(user, facts):
        return _refusal(403, "You may not open this endpoint.", browser=browser)
    if timezone.now() >= facts.expires_at:
        return _refusal(403, "This endpoint has expired; its owner can extend it.", browser=browser)
    return Answer(200, _identity(user, facts, cookies.others))


def _sign_in_redirect(endpoint_id: int, target: str) -> Answer:
    """To the portal's half of the handshake, with a fresh state: its cookie stays on the
    endpoint's host, its hash goes to the portal, and the code comes back bound to it."""
    nonce = secrets.token_urlsafe(24)
    start = f"{settings.PORTAL_URL}/auth/endpoint/{endpoint_id}/start"
    query = urlencode({"next": target, "state": state_hash(nonce)})
    secure = "; Secure" if settings.ENDPOINT_SCHEME == "https" else ""
    cookie = (
        f"{state_cookie_name()}={nonce}; Path=/; Max-Age={STATE_SECONDS}; HttpOnly; "
        f"SameSite=Lax{secure}"
    )
    return Answer(302, {"Location": f"{start}?{query}", "Set-Cookie": cookie})


def _response(answer: Answer) -> HttpResponse:
    metrics.forward_auth_decision(answer.status)
    response = HttpResponse(answer.body, status=answer.status)
    for name, value in answer.headers.items():
        response[name] = value
    response["Cache-Control"] = "no-store"
    return response


def request_uri(headers) -> str:
    """The path and query of the request the router asks about, from the header the router
    itself sets: Traefik's X-Forwarded-Uri, or ingress-nginx's X-Original-URL (a whole URL; nginx
    passes a client's own X-Forwarded-Uri through untouched, and sets no such header)."""
    if settings.ROUTING_DRIVER != "ingress-nginx":
        return headers.get("X-Forwarded-Uri") or "/"
    parts = parse_url(headers.get("X-Original-URL") or "/")
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


@never_cache
def forward_auth(request, endpoint_id):
    return _response(
        decide(
            endpoint_id,
            uri=request_uri(request.headers),
            cookie=request.headers.get("Cookie", ""),
            authorization=request.headers.get("Authorization", ""),
            accept=request.headers.get("Accept", ""),
            redirect=request.GET.get("mode") == "redirect",
        )
    )


def _target(request, facts: EndpointFacts) -> str:
    """Where to land on the endpoint: `next` (Traefik) or `rd` (ingress-nginx, a whole URL
    accepted only for this endpoint's own host)."""
    if request.GET.get("next"):
        return _split_code(request.GET["next"])[1]
    rd = parse_url(request.GET.get("rd", ""))
    if rd.hostname and rd.hostname == parse_url(endpoint_origin(facts.host_label)).hostname:
        return _split_code(rd.path + (f"?{rd.query}" if rd.query else ""))[1]
    return "/"


@never_cache
@login_required
def start(request, endpoint_id):
    """The portal's half of the handshake: a signed-in member gets a one-time code for this
    endpoint's host; everyone else a page that says why not."""
    facts = _load_endpoint(endpoint_id)  # fresh: this is where access is granted
    user = _load_user(request.user.pk)
    context = {"facts": facts}
    if facts is None or user is None or not allowed(user, facts):
        # One answer for an id that does not exist and another tenant's: any signed-in person
        # may try any id, and learns neither which exist nor whose they are.
        mine = facts is not None and user is not None and user.id in facts.members
        reason = "private" if mine and facts.private else "member"
        return render(
            request, "jobs/endpoint_refused.html", {**context, "reason": reason}, status=403
        )
    # Said only to those who may open it (others learn nothing of the job's state).
    reason = (
        "closed"
        if facts.closed
        else "unrouted"
        if not facts.routed
        else "expired"
        if timezone.now() >= facts.expires_at
        else ""
    )
    if reason:
        return render(
            request, "jobs/endpoint_refused.html", {**context, "reason": reason}, status=403
        )
    target = _target(request, facts)
    state = request.GET.get("state", "")
    if codes_bound() and not STATE.fullmatch(state):
        # Not from the endpoint's sign-in redirect (a bookmark, a link): through the endpoint,
        # whose redirect comes back here with the state of this browser.
        return HttpResponseRedirect(f"{endpoint_origin(facts.host_label)}{target}")
    code = secrets.token_urlsafe(32)
    mark = remember_session(request.session)
    data = {"e": facts.id, "u": user.id, "s": mark, "b": state if codes_bound() else ""}
    cache.set(f"endpoint-code:{code}", data, CODE_SECONDS)
    separator = "&" if "?" in target else "?"
    return HttpResponseRedirect(
        f"{endpoint_origin(facts.host_label)}{target}{separator}{urlencode({CODE_PARAM: code})}"
    )


class FastPath:
    """WSGI middleware answering `/auth/endpoint/<id>` before Django's middleware stack: it
    runs for every request to every endpoint and needs none of sessions, CSRF or messages. The
    same decide() serves it, so behaviour is identical."""

    prefix = "/auth/endpoint/"

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        endpoint_id = path[len(self.prefix) :] if path.startswith(self.prefix) else ""
        if not WHOLE_NUMBER.fullmatch(endpoint_id):
            return self.app(environ, start_response)
        answer = decide(
            int(endpoint_id),
            uri=request_uri(_WsgiHeaders(environ)),
            cookie=environ.get("HTTP_COOKIE", ""),
            authorization=environ.get("HTTP_AUTHORIZATION", ""),
            accept=environ.get("HTTP_ACCEPT", ""),
            redirect="mode=redirect" in environ.get("QUERY_STRING", ""),
        )
        metrics.forward_auth_decision(answer.status)
        payload = answer.body.encode()
        headers = [
            ("Content-Length", str(len(payload))),
            ("Cache-Control", "no-store"),
            *answer.headers.items(),
        ]
        if "Content-Type" not in answer.headers:
            headers.append(("Content-Type", "text/plain"))
        start_response(f"{answer.status} {_REASONS[answer.status]}", headers)
        return [payload]


class _WsgiHeaders:
    """A WSGI environ's request headers by their names, as `request.headers` reads them."""

    def __init__(self, environ):
        self.environ = environ

    def get(self, name, default=None):
        return self.environ.get("HTTP_" + name.upper().replace("-", "_"), default)


_REASONS = {200: "OK", 302: "Found", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}
