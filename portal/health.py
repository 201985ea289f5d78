"""/healthz: the process is up. /readyz: the database, Redis and the API server answer."""

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache

from core.cluster import get_cluster


def _database():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _redis():
    redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2).ping()


def _kubernetes():
    if not get_cluster().ready():
        raise ConnectionError("the API server's /readyz did not answer ok")


CHECKS = {"database": _database, "redis": _redis, "kubernetes": _kubernetes}


@never_cache
def healthz(request):
    return HttpResponse("ok", content_type="text/plain")


@never_cache
def readyz(request):
    results = {}
    for name, check in CHECKS.items():
        try:
            check()
        except Exception as exc:  # any failure makes the portal not ready; say which
            results[name] = f"error: {exc}"
        else:
            results[name] = "ok"
    ready = all(value == "ok" for value in results.values())
    return JsonResponse(results, status=200 if ready else 503)
