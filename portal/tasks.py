"""The periodic resync: re-enqueue every active object so drift is repaired even when an event
was missed. Each app's resync task is listed in settings.PORTAL_RESYNC_TASKS."""

from celery import current_app, shared_task
from django.conf import settings


@shared_task(name="portal.tasks.resync_all", ignore_result=True)
def resync_all():
    for name in settings.PORTAL_RESYNC_TASKS:
        current_app.send_task(name)
