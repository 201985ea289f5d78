"""The cluster snapshot the collector keeps in Redis; pages and the API read it (one GET),
never the API server."""

import functools
import json
from typing import Any

import redis
from django.conf import settings

KEY = "cluster:snapshot"


def _redis() -> redis.Redis:
    return _client(settings.REDIS_URL)


@functools.cache
def _client(url: str) -> redis.Redis:
    """One client (and connection pool) per process and URL: a new one per call connected
    afresh every time, ten times the CPU of the write itself. Thread-safe, and its pool starts
    over in a forked process."""
    return redis.Redis.from_url(url)


def write(snapshot: dict[str, Any]) -> None:
    _redis().set(KEY, json.dumps(snapshot, separators=(",", ":")))


def read() -> dict[str, Any] | None:
    """The latest snapshot, or None before the collector's first one."""
    raw = _redis().get(KEY)
    return json.loads(raw) if raw else None


HISTORY_KEY = "cluster:history"
HISTORY_SAMPLES = 7 * 24 * 12  # 7 days of 5-minute samples


def append_sample(snapshot: dict[str, Any]) -> None:
    """Keep GPUs allocatable and in use, per product and in total, for the history chart."""
    sample = {
        "at": snapshot["at"],
        "total": {k: snapshot["totals"].get(k, 0) for k in ("allocatable", "used")},
        "products": {
            p: {"allocatable": v["allocatable"], "used": v["used"]}
            for p, v in snapshot["products"].items()
        },
    }
    client = _redis()
    client.lpush(HISTORY_KEY, json.dumps(sample, separators=(",", ":")))
    client.ltrim(HISTORY_KEY, 0, HISTORY_SAMPLES - 1)


def history() -> list[dict[str, Any]]:
    """Samples, oldest first."""
    return [json.loads(raw) for raw in reversed(_redis().lrange(HISTORY_KEY, 0, -1))]


def chart(
    samples: list[dict[str, Any]], width: int = 900, height: int = 160
) -> dict[str, Any] | None:
    """SVG polyline points for GPUs in use and allocatable over time (oldest on the left)."""
    if len(samples) < 2:
        return None
    top = max(max(s["total"]["allocatable"] for s in samples), 1)
    step = width / (len(samples) - 1)

    def points(key: str) -> str:
        return " ".join(
            f"{i * step:.1f},{height - s['total'][key] / top * height:.1f}"
            for i, s in enumerate(samples)
        )

    return {
        "width": width,
        "height": height,
        "top": top,
        "used": points("used"),
        "allocatable": points("allocatable"),
        "first": samples[0]["at"],
        "last": samples[-1]["at"],
    }
