"""One settings module, read from the environment (12-factor).

Secrets may also come from a file named by `<NAME>_FILE` (a mounted Kubernetes Secret).
Bad values raise ImproperlyConfigured at start-up.
"""

import ipaddress
import re
import sys
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env")


def secret(name, default=environ.Env.NOTSET):
    """A secret from `NAME`, or from the file named by `NAME_FILE`."""
    path = env.str(f"{name}_FILE", default="")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path} cannot be read: {exc}") from exc
    return env.str(name, default=default)


DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = secret("SECRET_KEY", default="" if not DEBUG else "insecure-development-key")
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) must be set when DEBUG is off.")
# Earlier keys (space-separated), still accepted for what they signed (sessions, endpoint
# cookies): a new SECRET_KEY signs nobody out; drop them once sessions have turned over.
SECRET_KEY_FALLBACKS = secret("SECRET_KEY_FALLBACKS", default="").split()
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_FAILURE_VIEW = "portal.errors.csrf_failure"
PORTAL_URL = env.str("PORTAL_URL", default="http://127.0.0.1:8000")
# Behind a router that ends TLS, requests reach the portal as plain http: the portal's own
# https origin is trusted for forms, and links the portal builds for others (the SSO callback
# it names to the identity provider) say https.
CSRF_TRUSTED_ORIGINS = [
    *env.list("CSRF_TRUSTED_ORIGINS", default=[]),
    "{0.scheme}://{0.netloc}".format(urlsplit(PORTAL_URL)),
]
ACCOUNT_DEFAULT_HTTP_PROTOCOL = urlsplit(PORTAL_URL).scheme or "http"
# Routers between browsers and the portal, each appending to X-Forwarded-For: sign-in rate
# limits count the client's address, not the router's (which all clients would share).
ALLAUTH_TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)
# Behind such routers (the chart's NetworkPolicy lets nothing else reach the web pods), the
# scheme of the browser's request is the one the router says: the API's next-page links and
# any other absolute URL say https.
if ALLAUTH_TRUSTED_PROXY_COUNT:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "core",
    "accounts",
    "portal",
    "tenants",
    "jobs",
    "networking",
]

MIDDLEWARE = [
    "core.middleware.RequestMetrics",
    "portal.errors.MethodNotAllowedPage",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "allauth.account.middleware.AccountMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"
ASGI_APPLICATION = "portal.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context_processors.portal",
            ],
        },
    },
]

# The local development services started by `make run` / `make test` (hack/services.sh).
DATABASES = {"default": env.db("DATABASE_URL", default="postgres://portal@127.0.0.1:54329/portal")}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Tests (which empty their database at start) default to a database of their own, as `make test`
# sets: a plain `pytest` beside `make run` never removes its queued tasks and cached state.
REDIS_URL = env.str(
    "REDIS_URL",
    default=f"redis://127.0.0.1:63790/{1 if 'pytest' in sys.modules else 0}",
)
CACHES = {
    "default": {
        "BACKEND": "core.cache.RedisCache",  # Django's, reusing its clients
        "LOCATION": REDIS_URL,
    }
}

AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "account_login"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env.path("STATIC_ROOT", default=BASE_DIR / ".local" / "staticfiles")

# Sessions are read from Redis (every request reads one), written to both, and read from the
# database when Redis has lost them.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
if SESSION_COOKIE_SECURE:
    # Host-only by their names: a job app on a sibling domain (x.endpoints.example.org beside
    # portal.example.org) may set a cookie for all of example.org, but browsers refuse one
    # named __Host-* with a Domain. Without the prefix it could plant its own session or CSRF
    # token in the portal (a session fixation).
    SESSION_COOKIE_NAME = "__Host-sessionid"
    CSRF_COOKIE_NAME = "__Host-csrftoken"

# Kubernetes: an explicit kubeconfig path, else the local development control plane when it
# exists, else in-cluster config when running in a pod, else the client library's default.
LOCAL_KUBECONFIG = BASE_DIR / ".local" / "controlplane" / "kubeconfig"
KUBECONFIG = env.str(
    "KUBECONFIG", default=str(LOCAL_KUBECONFIG) if LOCAL_KUBECONFIG.exists() else ""
)
K8S_FIELD_MANAGER = "gpu-portal"

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery closes the database connection before and after every task unless told to reuse it:
# each reconcile then paid a new PostgreSQL connection (a backend process forked and
# authenticated). Workers keep it instead, under the same CONN_MAX_AGE and health checks as
# the web (portal/celery.py); this only bounds how many tasks one connection serves.
CELERY_DB_REUSE_MAX = 10_000
# A reconcile mostly waits on the API server and the database: threads serve several at once
# in one process (under a backlog, 4 threads per worker halved the time jobs waited for a run).
CELERY_WORKER_POOL = "threads"
CELERY_WORKER_CONCURRENCY = env.int("WORKER_CONCURRENCY", default=4)
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
RESYNC_INTERVAL = env.int("RESYNC_INTERVAL", default=60)
# Seconds a job's run waits for its claims to bind before it submits the job, while no other
# task waits for a worker; beyond it, the collector's watch brings the job back when they bind.
JOB_BIND_WAIT = env.float("JOB_BIND_WAIT", default=1.0)
# How long an enqueued reconcile suppresses another for the same object.
RECONCILE_DEDUP_SECONDS = env.int("RECONCILE_DEDUP_SECONDS", default=30)
CELERY_BEAT_SCHEDULE = {
    "resync": {
        "task": "portal.tasks.resync_all",
        "schedule": timedelta(seconds=RESYNC_INTERVAL),
        "options": {"expires": RESYNC_INTERVAL},
    },
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "EXCEPTION_HANDLER": "portal.api_errors.exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "portal.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Portal API",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The docs page's scripts and styles from the portal's own static files: a self-hosted
    # install may reach no CDN (the page was blank), and these are pinned.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "portal.schema_links.add_links",
    ],
}

# LOG_FORMAT=json: one JSON object a line (core.logs.JsonFormatter); text otherwise.
LOG_FORMAT = env.str("LOG_FORMAT", default="text")
if LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured("LOG_FORMAT is text or json.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "core.logs.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"kubernetes": {"level": "WARNING"}, "urllib3": {"level": "WARNING"}},
}
# Celery keeps Django's log handlers (and so the chosen format) instead of installing its own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT == "text"
# Prometheus metrics: each pod serves them on this port (manage.py metrics_exporter), which no
# Service or route exposes; see the README's Operations section.
METRICS_PORT = env.int("METRICS_PORT", default=9100)

PORTAL_RESYNC_TASKS = ["tenants.resync_tenants", "networking.resync_pools"]
# Where Whereabouts keeps its IPPool objects.
WHEREABOUTS_NAMESPACE = env.str("WHEREABOUTS_NAMESPACE", default="kube-system")
# The web process reads pods, their logs and Events, Volcano jobs and the quota in tenant
# namespaces alone: each tenant's reconcile binds this ClusterRole there to the web's
# ServiceAccount (WEB_ACCOUNT, as namespace/name), so a stolen web token reads no other
# namespace's pods or logs. Both empty (an admin kubeconfig, in development): no binding.
WEB_TENANT_ROLE = env.str("WEB_TENANT_ROLE", default="").strip()
WEB_ACCOUNT = env.str("WEB_ACCOUNT", default="").strip()
_web_namespace, _, _web_name = WEB_ACCOUNT.partition("/")
if bool(WEB_TENANT_ROLE) != bool(WEB_ACCOUNT) or (
    WEB_ACCOUNT and not (_web_namespace and _web_name and "/" not in _web_name)
):
    raise ImproperlyConfigured(
        "WEB_TENANT_ROLE and WEB_ACCOUNT are set together: the ClusterRole the web reads tenant "
        "namespaces with, and the web's ServiceAccount as namespace/name (say "
        f"gpu-portal/gpu-portal-web); not {WEB_TENANT_ROLE!r} and {WEB_ACCOUNT!r}."
    )
# Why waiting jobs wait is read again at least this often; every job is resynced with the
# full resync (the collector's watch on Volcano jobs follows them in between).
JOB_SYNC_INTERVAL = env.int("JOB_SYNC_INTERVAL", default=10)
CELERY_BEAT_SCHEDULE["jobs"] = {
    "task": "jobs.resync_jobs",
    "schedule": timedelta(seconds=JOB_SYNC_INTERVAL),
    "options": {"expires": JOB_SYNC_INTERVAL},
}
CELERY_BEAT_SCHEDULE["all-jobs"] = {
    "task": "jobs.resync_jobs",
    "schedule": timedelta(seconds=RESYNC_INTERVAL),
    "kwargs": {"everything": True},
    "options": {"expires": RESYNC_INTERVAL},
}

# The RuntimeClasses jobs may name (a GPU task runs under one). Others are refused at launch:
# a class's scheduling rules and handler are the cluster's, made for some pods, not all.
RUNTIME_CLASSES = env.list("RUNTIME_CLASSES", default=["nvidia"])
# Where Volcano runs: the collector reads its scheduler's configuration ConfigMap there.
VOLCANO_NAMESPACE = env.str("VOLCANO_NAMESPACE", default="volcano-system")

# Job logs (pods/log through the API server): how long one request follows a running
# container, and the most one download or view returns.
# At most this much of a log per read: a page follows a log by reading on every few seconds.
LOG_READ_LIMIT_BYTES = env.int("LOG_READ_LIMIT_BYTES", default=2**20)
LOG_DOWNLOAD_LIMIT_BYTES = env.int("LOG_DOWNLOAD_LIMIT_BYTES", default=50 * 2**20)

# -- Job endpoints ----------------------------------------------------------------------------
# How exposed ports are reached: "ingress" (an SSO-protected URL), "nodeport", "loadbalancer" or
# "podip"; TCP and SSH ports cannot go through an HTTP router and use ENDPOINT_TCP_MODE. NodePort
# and LoadBalancer bypass SSO: a platform admin allows them per tenant (else "podip" is used).
ENDPOINT_MODE = env.str("ENDPOINT_MODE", default="ingress")
ENDPOINT_TCP_MODE = env.str("ENDPOINT_TCP_MODE", default="nodeport")
# Every HTTP endpoint is its own origin, <port>--<job>--<tenant>.<ENDPOINT_WILDCARD_DOMAIN>, so
# job apps (code users wrote) never share an origin with the portal or with each other. Point a
# wildcard DNS record (and certificate) at the router. Chromium resolves *.localhost to loopback.
ENDPOINT_WILDCARD_DOMAIN = env.str(
    "ENDPOINT_WILDCARD_DOMAIN", default="endpoints.localhost" if DEBUG else ""
).strip(".")
ENDPOINT_SCHEME = env.str("ENDPOINT_SCHEME", default="https")
# The router's public port when it is not the scheme's default (local development).
ENDPOINT_PORT = env.int("ENDPOINT_PORT", default=0)
# "traefik" (IngressRoute + ForwardAuth Middleware), "gateway-api" (HTTPRoute with Traefik's
# ForwardAuth through an ExtensionRef filter) or "ingress-nginx" (annotations).
ROUTING_DRIVER = env.str("ROUTING_DRIVER", default="traefik")
ROUTING_INGRESS_CLASS = env.str("ROUTING_INGRESS_CLASS", default="nginx")
# The Gateway HTTPRoutes attach to, as namespace/name, and the namespace the router runs in
# (tenant NetworkPolicies admit traffic from it).
ROUTING_GATEWAY = env.str("ROUTING_GATEWAY", default="gpu-portal-router/gpu-portal")
ROUTER_NAMESPACE = env.str("ROUTER_NAMESPACE", default="gpu-portal-router")
# Address ranges job pods may not reach (egress of tenant namespaces): the cloud's metadata
# service by default, which hands out the node's credentials. Add the cluster's pod, Service
# and node ranges to keep jobs off other tenants' pods, the nodes and the API server. Their
# own namespace, DNS and TENANT_EGRESS_NAMESPACES (a shared object store, say) stay open.
TENANT_EGRESS_DENY = env.list(
    "TENANT_EGRESS_DENY", default=["169.254.169.254/32", "fd00:ec2::254/128"]
)
TENANT_EGRESS_NAMESPACES = [n.strip() for n in env.list("TENANT_EGRESS_NAMESPACES", default=[])]
try:
    _closed = [ipaddress.ip_network(c.strip()) for c in TENANT_EGRESS_DENY]
except ValueError as exc:
    raise ImproperlyConfigured(
        f"TENANT_EGRESS_DENY holds address ranges such as 10.0.0.0/8 ({exc})."
    ) from exc
if any(net.prefixlen == 0 for net in _closed):  # NetworkPolicy takes a part of all, not all
    raise ImproperlyConfigured(
        "TENANT_EGRESS_DENY closes ranges within all addresses; to close all of them, list "
        "their halves (0.0.0.0/1 and 128.0.0.0/1)."
    )
TENANT_EGRESS_DENY = [str(net) for net in _closed]
_bad = [
    n for n in TENANT_EGRESS_NAMESPACES if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", n)
]
if _bad:
    raise ImproperlyConfigured(f"TENANT_EGRESS_NAMESPACES names namespaces; not {', '.join(_bad)}.")
# The portal as the router reaches it (inside the cluster), for forward-auth.
PORTAL_INTERNAL_URL = env.str("PORTAL_INTERNAL_URL", default=PORTAL_URL)
# Per-process caches of endpoints, users and tokens behind forward-auth: a revoked membership,
# token, user or endpoint is refused within this many seconds.
FORWARD_AUTH_CACHE_SECONDS = env.int("FORWARD_AUTH_CACHE_SECONDS", default=10)
# An endpoint cookie is re-issued through the portal (a redirect) after this long.
ENDPOINT_COOKIE_SECONDS = env.int("ENDPOINT_COOKIE_SECONDS", default=8 * 3600)
if not ENDPOINT_WILDCARD_DOMAIN:
    raise ImproperlyConfigured(
        "Set ENDPOINT_WILDCARD_DOMAIN to a domain whose subdomains point at the router, for "
        "example endpoints.example.org (job apps get one origin each under it)."
    )
_portal_host = (PORTAL_URL.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]).lower()
if _portal_host == ENDPOINT_WILDCARD_DOMAIN or _portal_host.endswith(
    "." + ENDPOINT_WILDCARD_DOMAIN
):
    raise ImproperlyConfigured(
        f"The portal ({_portal_host}) must not live under ENDPOINT_WILDCARD_DOMAIN "
        f"({ENDPOINT_WILDCARD_DOMAIN}): job apps would share its origin's cookies. Use a "
        "sibling domain such as endpoints.example.org beside portal.example.org (the portal's "
        "cookies are __Host- ones, which a sibling cannot set)."
    )
if ROUTING_DRIVER not in ("traefik", "gateway-api", "ingress-nginx"):
    raise ImproperlyConfigured("ROUTING_DRIVER is traefik, gateway-api or ingress-nginx.")
CELERY_BEAT_SCHEDULE["endpoints"] = {
    "task": "jobs.reclaim_endpoints",
    "schedule": timedelta(seconds=60),
}

# -- Sign-in ----------------------------------------------------------------------------------
# Local password accounts can be switched off (SSO only).
PASSWORD_LOGIN_ENABLED = env.bool("PASSWORD_LOGIN", default=True)
ACCOUNT_ADAPTER = "accounts.adapters.AccountAdapter"
SOCIALACCOUNT_ADAPTER = "accounts.adapters.SocialAccountAdapter"
ACCOUNT_LOGIN_METHODS = {"username"}
ACCOUNT_SIGNUP_FIELDS = ["username*", "password1*"]
ACCOUNT_EMAIL_VERIFICATION = "none"
ACCOUNT_LOGOUT_ON_GET = False
SOCIALACCOUNT_ONLY = not PASSWORD_LOGIN_ENABLED
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_LOGIN_ON_GET = False
SOCIALACCOUNT_STORE_TOKENS = False

# A generic OpenID Connect provider (Keycloak, Dex, Authentik, ...).
OIDC_SERVER_URL = env.str("OIDC_SERVER_URL", default="")
SOCIALACCOUNT_PROVIDERS = {}
if OIDC_SERVER_URL:
    SOCIALACCOUNT_PROVIDERS["openid_connect"] = {
        "OAUTH_PKCE_ENABLED": True,
        "APPS": [
            {
                "provider_id": "sso",
                "name": env.str("OIDC_PROVIDER_NAME", default="SSO"),
                "client_id": env.str("OIDC_CLIENT_ID"),
                "secret": secret("OIDC_CLIENT_SECRET"),
                "settings": {
                    "server_url": OIDC_SERVER_URL,
                    "scope": ["openid", "profile", "email"]
                    + env.list("OIDC_EXTRA_SCOPES", default=["groups"]),
                },
            }
        ],
    }
# Group claims map to memberships: a group matching the pattern gives its `tenant` the `role`.
SSO_GROUPS_CLAIM = env.str("SSO_GROUPS_CLAIM", default="groups")
SSO_GROUP_PATTERN = env.str(
    "SSO_GROUP_PATTERN",
    default=r"^gpu-portal:(?P<tenant>[a-z0-9]([-a-z0-9]*[a-z0-9])?):(?P<role>admin|researcher|viewer)$",
)
SSO_PLATFORM_ADMIN_GROUP = env.str("SSO_PLATFORM_ADMIN_GROUP", default="gpu-portal:platform-admins")
# The identity provider's groups (and its disabling of a person) reach the portal at sign-in:
# API tokens of accounts that sign in through SSO work this many days after the last sign-in
# (0: until they expire).
SSO_TOKEN_SIGN_IN_DAYS = env.int("SSO_TOKEN_SIGN_IN_DAYS", default=30)
PORTAL_ADMIN_CONTACT = env.str("PORTAL_ADMIN_CONTACT", default="your platform administrators")
