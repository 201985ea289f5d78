"""Prometheus metrics every process records (prometheus-client).

With PROMETHEUS_MULTIPROC_DIR set (the image's entry point sets it when METRICS_PORT is), the
processes of one pod (granian's and Celery's workers) write their samples there and the pod's
one exporter (`manage.py metrics_exporter`) serves them all on METRICS_PORT, a port of its own
that no Service or route exposes. Values read at scrape time (queue depths, collector lag) are
added by that exporter."""

from prometheus_client import Counter, Histogram

REQUEST_SECONDS = Histogram(
    "portal_http_request_duration_seconds",
    "Time to answer an HTTP request, by view and status code.",
    ["view", "method", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
RECONCILES = Counter(
    "portal_reconcile_total",
    "Reconcile runs by kind and outcome (in_sync, error, retrying, crashed).",
    ["kind", "outcome"],
)
RECONCILE_SECONDS = Histogram(
    "portal_reconcile_duration_seconds",
    "Time a reconcile run took, by kind.",
    ["kind"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
FORWARD_AUTH = Counter(
    "portal_forward_auth_decisions_total",
    "Forward-auth answers to the router, by status (200 allow, 302 sign in, 401, 403, 404).",
    ["status"],
)


def reconciled(kind: str, outcome: str, seconds: float) -> None:
    RECONCILES.labels(kind, outcome).inc()
    RECONCILE_SECONDS.labels(kind).observe(seconds)


def observe_request(view: str, method: str, status: int, seconds: float) -> None:
    REQUEST_SECONDS.labels(view, method, str(status)).observe(seconds)


def forward_auth_decision(status: int) -> None:
    FORWARD_AUTH.labels(str(status)).inc()
