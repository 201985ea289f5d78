"""The Celery app. Tasks are idempotent reconcilers, so they are acknowledged late: a worker that
dies mid-task leaves the message to be redelivered and the next run converges."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The default app in every thread too: Celery's "current app" is per thread, and the collector
# enqueues reconciles from its informers' threads, which would otherwise see an empty app.
app.set_default()
