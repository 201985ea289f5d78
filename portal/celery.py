"""The Celery app. Tasks are idempotent reconcilers, so they are acknowledged late: a worker that
dies mid-task leaves the message to be redelivered and the next run converges."""

import os

from celery import Celery
from celery.signals import beat_init, task_prerun, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The default app in every thread too: Celery's "current app" is per thread, and the collector
# enqueues reconciles from its informers' threads, which would otherwise see an empty app.
app.set_default()


@task_prerun.connect
def keep_connections_as_django_does(task=None, **kwargs):
    """Before each task, what Django does before each request: close a connection that is
    broken or older than CONN_MAX_AGE (not in eager runs: they share the caller's)."""
    if task is not None and not task.request.is_eager:
        from django.db import close_old_connections

        close_old_connections()


@worker_ready.connect
def freeze_what_the_worker_loaded(**kwargs):
    """Once the tasks are imported and the worker consumes (see core.heap)."""
    from core.heap import freeze_loaded

    freeze_loaded()


@beat_init.connect
def reclaim_endpoints_at_start(sender=None, **kwargs):
    """The endpoints' periodic run once at start too: it also applies the router's fallback
    for closed endpoints, which would otherwise wait one interval after an install."""
    sender.app.send_task("jobs.reclaim_endpoints")
