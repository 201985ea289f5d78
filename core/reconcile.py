"""The one shape of every reconciler: tasks are enqueued by name after commit (de-duplicated),
take only a primary key, run one at a time per object, re-read everything, and record how the
run went in the object's sync fields, apart from its own lifecycle state.

    @reconciler("tenant", Tenant, name="tenants.reconcile_tenant")
    def reconcile_tenant(tenant) -> dict | None:  # observed fields to save, if any
        ...
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from celery import current_app, shared_task
from django.conf import settings
from django.core.cache import cache
from django.db import connection, models, transaction
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from django.utils import timezone
from kombu.exceptions import KombuError
from redis.exceptions import RedisError

from k8s_adapters.errors import PermanentK8sError, TransientK8sError

from . import metrics
from .models import Reconciled, SyncState

log = logging.getLogger(__name__)

# Transient cluster errors retry with exponential backoff (2 s, 4 s, ... up to a minute), forever:
# the object stays desired, and the periodic resync would send it again anyway.
RETRY: dict[str, Any] = {
    "autoretry_for": (TransientK8sError,),
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": None,
}
SYNC_MESSAGE_MAX = 2000
# The broker's priority of a resync's runs, behind the runs a change sent (priority 0, which
# Redis serves first): a full resync sends a run for every object at once, and a launch's run
# waited behind them all. controller-runtime's priority queue does the same for its resyncs.
BACKGROUND = 9
# Seconds: another run of the same object held it. That run sends this one again as soon as it
# ends; the delayed one is the safety net should it die first.
BUSY_RETRY = 2.0

M = TypeVar("M", bound=Reconciled)


def _queued_key(task_name: str, pk: int, mark: str = "queued") -> str:
    return f"{mark}:{task_name}:{pk}"


_discovering = threading.Lock()


def _task(name: str) -> Any:
    """The registered task of that name; fails loudly on a misspelt one. Autodiscovery (every
    app's tasks module) runs once, under a lock: threads that asked at the same moment (the
    collector's informers at start) otherwise found the tasks not yet registered."""
    if name not in current_app.tasks:
        with _discovering:
            if name not in current_app.tasks:
                current_app.loader.import_default_modules()
    return current_app.tasks[name]


def enqueue(
    task_name: str, pk: int, *, countdown: float | None = None, mark: str = "requeued"
) -> None:
    """Send the task named `task_name` for `pk` once the transaction commits, unless one is
    already waiting. The mark expires, so a message lost with a killed worker is sent again by
    the next resync. Tasks are named, never imported, so apps never import each other's tasks.
    A delayed run (`countdown`) has a mark of its own: a change seen meanwhile still runs it now,
    and at most one delayed run of each `mark` waits."""
    task = _task(task_name)
    key = _queued_key(task_name, pk, "queued" if countdown is None else mark)

    def send() -> None:
        if cache.add(key, 1, timeout=settings.RECONCILE_DEDUP_SECONDS):
            task.apply_async(args=[pk], countdown=countdown)

    transaction.on_commit(send)


def send(task_name: str, *args: Any) -> None:
    """Send a one-off task by name once the transaction commits (no de-duplication)."""
    task = _task(task_name)
    transaction.on_commit(lambda: task.apply_async(args=list(args)))


def enqueue_all(task_name: str, pks: Iterator[int] | list[int]) -> None:
    """`enqueue` for every key (a change to several objects at once)."""
    for pk in pks:
        enqueue(task_name, pk)


def resync(task_name: str, pks: Iterator[int] | list[int]) -> None:
    """A periodic resync: a run for every key once the transaction commits, at BACKGROUND
    priority, unless a run of the key waits (sent by a change, or by an earlier resync). A
    change seen meanwhile still sends its run, which goes first."""
    task = _task(task_name)
    pks = list(pks)

    def send() -> None:
        waiting = cache.get_many([_queued_key(task_name, pk) for pk in pks])
        for pk in pks:
            if _queued_key(task_name, pk) in waiting:
                continue
            resynced = _queued_key(task_name, pk, "resynced")
            if cache.add(resynced, 1, timeout=settings.RECONCILE_DEDUP_SECONDS):
                task.apply_async(args=[pk], priority=BACKGROUND)

    transaction.on_commit(send)


def started(task_name: str, pk: int, *, delayed: bool = False, background: bool = False) -> None:
    """Called first by a reconcile task: a new change may enqueue another run from now on (and,
    when this is the delayed run, another delayed one; when a resync's, the next resync); the
    object has not settled until this run ends without waiting (one that dies halfway leaves
    it unsettled)."""
    sent = "resynced" if background else "queued"
    marks = (sent, "settled", *(("requeued", "busy") if delayed else ()))
    cache.delete_many([_queued_key(task_name, pk, mark) for mark in marks])


def once_every(key: str, seconds: float) -> bool:
    """True at most once every `seconds` for `key` (across workers): work that converges anyway
    but need not run on every reconcile."""
    return bool(cache.add(f"once:{key}", 1, timeout=seconds))


def once_again(key: str) -> None:
    """Let the work of `key` run on the next `once_every` call (it failed this time)."""
    cache.delete(f"once:{key}")


def _lock_key(kind: str, pk: int) -> int:
    digest = hashlib.blake2b(f"{kind}:{pk}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextlib.contextmanager
def exclusive(task_name: str, kind: str, pk: int) -> Iterator[bool]:
    """Yield True when this run holds the object's advisory lock. When another run holds it,
    yield False and mark the object dirty: the run holding it sends the task again as soon as it
    ends (it may have read older state), as controller-runtime's work queue does with an item
    added while it is processed; a run executed inline (eagerly) waits for the lock instead. A
    delayed retry of its own mark is the safety net: a change seen while a run that requeues
    itself in a few seconds (a claim wait) held the lock is never left to that requeued run."""
    key = _lock_key(kind, pk)
    with connection.cursor() as cursor:
        if current_app.conf.task_always_eager:
            cursor.execute("SELECT pg_advisory_lock(%s::bigint)", [key])
            acquired = True
        else:
            cursor.execute("SELECT pg_try_advisory_lock(%s::bigint)", [key])
            acquired = cursor.fetchone()[0]
    with _held(task_name, pk, key, acquired):
        yield acquired


@contextlib.contextmanager
def exclusive_load(
    task_name: str, kind: str, queryset: models.QuerySet[M], pk: int
) -> Iterator[M | None]:
    """`exclusive`, with the object read by the query that takes its lock: one round trip, on
    the path of every run (a launch's first among them). Yield the object when this run holds
    it; None when it is gone (nothing is locked then) or another run holds it."""
    if current_app.conf.task_always_eager:  # an inline run waits for the lock: it takes it first
        with exclusive(task_name, kind, pk):
            yield queryset.filter(pk=pk).first()
        return
    key = _lock_key(kind, pk)
    trying = RawSQL("pg_try_advisory_lock(%s::bigint)", [key], BooleanField())
    obj = queryset.filter(pk=pk).annotate(lock_held=trying).first()
    if obj is None:
        yield None
        return
    with _held(task_name, pk, key, obj.lock_held):  # type: ignore[attr-defined]
        yield obj if obj.lock_held else None  # type: ignore[attr-defined]


@contextlib.contextmanager
def _held(task_name: str, pk: int, key: int, acquired: bool) -> Iterator[None]:
    """Release the lock once the run ends; or, not acquired, leave the run holding it a note
    (dirty) and send a retry (busy)."""
    dirty = _queued_key(task_name, pk, "dirty")
    if not acquired:
        cache.set(dirty, 1, timeout=settings.RECONCILE_DEDUP_SECONDS)
        enqueue(task_name, pk, countdown=BUSY_RETRY, mark="busy")
    try:
        yield
    finally:
        if acquired:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s::bigint)", [key])
            if cache.delete(dirty):  # a run came while this one held the object
                enqueue(task_name, pk)


def nothing_waiting() -> bool:
    """Whether no task a change sent waits in the broker for a worker: a run may then wait a
    moment for the cluster (a claim to bind) instead of requeueing itself, at no other work's
    expense. A resync's runs (BACKGROUND) wait that moment too. Never an inline (eager) run,
    whose caller waits; nor when the broker cannot say."""
    if current_app.conf.task_always_eager:
        return False
    try:
        with current_app.producer_pool.acquire(block=True, timeout=1) as producer:
            channel: Any = producer.channel  # the transport's channel (loosely typed by kombu)
            # Redis keeps each priority in a list of its own; priority 0's is the queue's name.
            return bool(channel.client.llen(current_app.conf.task_default_queue) == 0)
    except (KombuError, RedisError, OSError):
        log.warning("could not read how many tasks wait", exc_info=True)
        return False


class Requeue(Exception):  # noqa: N818 (a signal, not an error)
    """Raised by a reconciler waiting for something the cluster does soon (a claim to bind): the
    run counts as in sync and the task runs again after `after` seconds, like controller-runtime's
    RequeueAfter. Inline (eager) runs are not requeued: whoever runs them inline runs them again,
    and the collector's watches bring the object back too."""

    def __init__(self, after: float) -> None:
        super().__init__(f"requeue after {after}s")
        self.after = after


def _requeue(task_name: str, pk: int, after: float) -> None:
    """The run waits for something the cluster does soon: it has not settled, and runs again in
    `after` seconds (not inline: whoever runs it inline runs it again)."""
    cache.delete(_queued_key(task_name, pk, "settled"))
    if not current_app.conf.task_always_eager:
        enqueue(task_name, pk, countdown=after)


def _settled(task_name: str, pk: int) -> None:
    """The run ended without waiting: a delayed re-check sent before it has nothing to do."""
    cache.set(_queued_key(task_name, pk, "settled"), 1, timeout=settings.RESYNC_INTERVAL)


def _recheck_moot(task_name: str, pk: int) -> bool:
    """Whether a delayed run has nothing left to check: it re-checks a wait (Requeue) or an
    object another run held (busy), and since it was sent a run has settled (ended without
    waiting), and no busy retry is due. The watch that ended the wait brought that run; the
    watches and the resync follow the object from there. A job whose claim bound before its 5 s
    re-check came otherwise spent a whole run on finding nothing new. Only a mark that says so
    skips the run: a mark gone (expired, evicted) runs it."""
    settled, busy = (_queued_key(task_name, pk, mark) for mark in ("settled", "busy"))
    marks = cache.get_many([settled, busy])
    return settled in marks and busy not in marks


def record_sync(
    obj: Reconciled, state: str, message: str = "", observed: dict[str, Any] | None = None
) -> None:
    """Write how a run went (and what it observed), touching only columns that changed, so a
    run that changes nothing writes nothing."""
    fields = {"sync_state": state, "sync_message": message[:SYNC_MESSAGE_MAX], **(observed or {})}
    changed = {k: v for k, v in fields.items() if getattr(obj, k) != v}
    if not changed:
        return
    changed["synced_at"] = timezone.now()
    type(obj).objects.filter(pk=obj.pk).update(**changed)  # type: ignore[attr-defined]
    for key, value in changed.items():
        setattr(obj, key, value)


def reconciler(
    kind: str,
    model: type[M],
    *,
    name: str,
    select_related: tuple[str, ...] = (),
    annotate: dict[str, Any] | None = None,
    on_permanent: Callable[[M, PermanentK8sError], None] | None = None,
) -> Callable[[Callable[[M], dict[str, Any] | None]], Any]:
    """Turn `fn(obj)` into the Celery task `name(pk)`: started, load with its lock (a gone object
    is done), run, and record the outcome. `fn` returns the observed fields to save, or None.
    A PermanentK8sError is recorded as `error` and ends the run (`on_permanent(obj, error)`
    may end the object's lifecycle too); a TransientK8sError is recorded as `retrying` and the
    task retries with backoff. `select_related` and `annotate` shape the query that loads the
    object (with its lock): what every run reads comes in that one round trip."""

    def decorate(fn: Callable[[M], dict[str, Any] | None]) -> Any:
        @shared_task(name=name, ignore_result=True, **RETRY)
        def task(pk: int) -> None:
            delayed = task.request.eta is not None
            if delayed and not task.request.retries and _recheck_moot(name, pk):
                cache.delete(_queued_key(name, pk, "requeued"))  # another may be sent
                return
            priority = (task.request.delivery_info or {}).get("priority")
            started(name, pk, delayed=delayed, background=priority == BACKGROUND)
            queryset: models.QuerySet[M] = model.objects.select_related(*select_related)  # type: ignore[attr-defined]
            if annotate:
                queryset = queryset.annotate(**annotate)
            with exclusive_load(name, kind, queryset, pk) as obj:
                if obj is None:  # gone, or another run holds it
                    return
                try:
                    _run(fn, obj, kind, on_permanent)
                except Requeue as wait:
                    record_sync(obj, SyncState.IN_SYNC)
                    _requeue(name, pk, wait.after)
                else:
                    _settled(name, pk)

        task.__doc__ = fn.__doc__
        return task

    return decorate


def _run(
    fn: Callable[[M], dict[str, Any] | None],
    obj: M,
    kind: str,
    on_permanent: Callable[[M, PermanentK8sError], None] | None,
) -> None:
    started = time.perf_counter()
    outcome = "crashed"
    try:
        outcome = _attempt(fn, obj, kind, on_permanent)
    except Requeue:
        outcome = "requeued"
        raise
    except TransientK8sError:
        outcome = SyncState.RETRYING.value
        raise
    finally:
        metrics.reconciled(kind, outcome, time.perf_counter() - started)


def _attempt(
    fn: Callable[[M], dict[str, Any] | None],
    obj: M,
    kind: str,
    on_permanent: Callable[[M, PermanentK8sError], None] | None,
) -> str:
    """One run of `fn`; returns the sync state it recorded."""
    try:
        observed = fn(obj)
    except PermanentK8sError as exc:
        log.warning("reconcile %s %s failed: %s", kind, obj.pk, exc.message, exc_info=True)
        record_sync(obj, SyncState.ERROR, exc.message)
        if on_permanent is not None:
            on_permanent(obj, exc)
        return SyncState.ERROR.value
    except Requeue:
        raise
    except TransientK8sError as exc:
        log.warning("reconcile %s %s will retry: %s", kind, obj.pk, exc.message, exc_info=True)
        record_sync(obj, SyncState.RETRYING, f"{exc.message} (retrying)")
        raise
    except Exception as exc:
        log.exception("reconcile %s %s crashed", kind, obj.pk)
        try:  # not "in sync" while every run crashes; the database may be what failed
            record_sync(
                obj,
                SyncState.ERROR,
                f"The portal failed applying this ({type(exc).__name__}, logged); the next "
                "resync tries again.",
            )
        except Exception:
            log.exception("could not record the crash of reconcile %s %s", kind, obj.pk)
        raise
    record_sync(obj, SyncState.IN_SYNC, "", observed)
    return SyncState.IN_SYNC.value
