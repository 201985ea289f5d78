"""/healthz: the process is up. /readyz: what serving pages and forward-auth needs answers: the
database and Redis. Not the API server: pages read the database, and forward-auth serves from
it and its caches, so an outage of the API server (a control-plane upgrade) must not take every
web pod out of its Service, and every job endpoint with it. The console shows the cluster's
state. Failures are named, not described (the probe is reachable from outside); the log has
them whole."""

import logging

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache

logger = logging.getLogger(__name__)


def _database():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _redis():
    redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2).ping()


CHECKS = {"database": _database, "redis": _redis}


@never_cache
def healthz(request):
    return HttpResponse("ok", content_type="text/plain")


@never_cache
def readyz(request):
    results = {}
    for name, check in CHECKS.items():
        try:
            check()
        except Exception:  # any failure makes the portal not ready; say which
            logger.exception("readiness: %s does not answer", name)
            results[name] = "error"
        else:
            results[name] = "ok"
    ready = all(value == "ok" for value in results.values())
    return JsonResponse(results, status=200 if ready else 503)
