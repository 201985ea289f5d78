"""Values read when Prometheus scrapes, not counted as they happen: the Celery queue's depth,
the jobs waiting for admission, and how old the collector's cluster snapshot is."""

from collections.abc import Iterator
from datetime import datetime

import redis
from django.conf import settings
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from core import snapshot
from jobs.choices import JobState
from jobs.models import Job

CELERY_QUEUES = ("celery",)


class LiveCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield self._queue_depths()
        yield GaugeMetricFamily(
            "portal_admission_queue_jobs",
            "Jobs waiting for their tenant's quota to admit them.",
            value=Job.objects.filter(state=JobState.QUEUED).count(),
        )
        age = self._snapshot_age()
        if age is not None:
            yield GaugeMetricFamily(
                "portal_collector_snapshot_age_seconds",
                "Seconds since the collector last wrote the cluster snapshot (its lag).",
                value=age,
            )

    def _queue_depths(self) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            "portal_task_queue_depth", "Tasks waiting in a Celery queue.", labels=["queue"]
        )
        client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=2)
        for queue in CELERY_QUEUES:
            family.add_metric([queue], client.llen(queue))
        return family

    def _snapshot_age(self) -> float | None:
        latest = snapshot.read()
        if not latest or "at" not in latest:
            return None
        return (timezone.now() - datetime.fromisoformat(latest["at"])).total_seconds()
