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


def _lock_key(kind, pk):
    digest = hashlib.blake2b(f"{kind}:{pk}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextlib.contextmanager
def exclusive(task, kind, pk):
    """Yield True when this run holds the object's advisory lock. When another run holds it,
    yield False and send this task again a moment later (it may have read older state); a run
    executed inline (eagerly) waits for the lock instead."""
    key = _lock_key(kind, pk)
    with connection.cursor() as cursor:
        if task.app.conf.task_always_eager:
            cursor.execute("SELECT pg_advisory_lock(%s::bigint)", [key])
            acquired = True
        else:
            cursor.execute("SELECT pg_try_advisory_lock(%s::bigint)", [key])
            acquired = cursor.fetchone()[0]
    if not acquired:
        enqueue(task, pk, countdown=1)
    try:
        yield acquired
    finally:
        if acquired:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s::bigint)", [key])
