"""The cluster snapshot the collector keeps in Redis; pages and the API read it (one GET),
never the API server."""

import json

import redis
from django.conf import settings

KEY = "cluster:snapshot"


def _redis():
    return redis.Redis.from_url(settings.REDIS_URL)


def write(snapshot):
    _redis().set(KEY, json.dumps(snapshot, separators=(",", ":")))


def read():
    """The latest snapshot, or None before the collector's first one."""
    raw = _redis().get(KEY)
    return json.loads(raw) if raw else None
