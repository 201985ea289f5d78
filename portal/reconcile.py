"""What every reconciler shares: de-duplicated enqueueing after commit, and one run per object
at a time (a PostgreSQL advisory lock)."""

import contextlib
import hashlib

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction


def _queued_key(task_name, pk):
    return f"queued:{task_name}:{pk}"


def enqueue(task, pk, *, countdown=None):
    """Send `task(pk)` once the transaction commits, unless one is already waiting. The mark
    expires, so a message lost with a killed worker is sent again by the next resync."""

    def send():
        if cache.add(_queued_key(task.name, pk), 1, timeout=settings.RECONCILE_DEDUP_SECONDS):
            task.apply_async(args=[pk], countdown=countdown)

    transaction.on_commit(send)


def started(task_name, pk):
    """Called first by a reconcile task: a new change may enqueue another run from now on."""
    cache.delete(_queued_key(task_name, pk))


@contextlib.contextmanager
def object_lock(kind, pk):
    """Yield True when this process holds the object's advisory lock, False when another does."""
    digest = hashlib.blake2b(f"{kind}:{pk}".encode(), digest_size=8).digest()
    key = int.from_bytes(digest, "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s::bigint)", [key])
        acquired = cursor.fetchone()[0]
    try:
        yield acquired
    finally:
        if acquired:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s::bigint)", [key])
