"""An informer: list one kind, then watch from the list's resourceVersion, keeping a store of
reduced objects. A 410 Gone (the version was compacted away) or a lost connection means a
fresh list, with backoff while the API server is down. A watch that hears nothing, not even
the server's end of it, past its timeout is a lost connection too (a dead peer behind a load
balancer sends nothing, and a read without a deadline would wait for good). A change the
handler failed on (its database down) is not taken as seen: it comes back with a list soon.
The backoff grows until a watch works (a watch refused at once, throttled say, would otherwise
list every object of the kind twice a second), and an object that cannot be reduced is logged
and kept as last read (or left out), not its whole kind: it is not taken as deleted. A handler
can tell a change a list found (every object, at start) from one a watch heard (`listing`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import K8sError

if TYPE_CHECKING:
    from .client import Cluster

log = logging.getLogger(__name__)
_handling = threading.local()


def listing() -> bool:
    """Whether the change a handler is called for came from a list (the informer's first, or
    one after a watch broke), not from a watch: at start, every object of the kind."""
    return getattr(_handling, "listing", False)


class Informer:
    def __init__(
        self,
        cluster: Cluster,
        api_version: str,
        kind: str,
        *,
        reduce: Callable[[dict[str, Any]], dict[str, Any]],
        on_change: Callable[[], None],
        watch_timeout: int = 60,
        labels: dict[str, str] | None = None,
        namespace: str | None = None,
        on_update: Callable[[dict[str, Any] | None, dict[str, Any] | None], None] | None = None,
    ) -> None:
        """`on_update(old, new)` (reduced objects, None when absent) is called for each object
        whose reduced form changed, also across a relist; `on_change()` after every batch."""
        self.cluster, self.api_version, self.kind = cluster, api_version, kind
        self.reduce, self.on_change, self.watch_timeout = reduce, on_change, watch_timeout
        self.labels, self.namespace, self.on_update = labels, namespace, on_update
        self.store: dict[str, dict[str, Any]] = {}
        self.synced = False
        self.retry = False  # a handler failed: list again (soon) to hand it the change again
        # The last failure to list or watch, cleared by the next list that works; and when the
        # store was last known current (a list, an event, a watch that ran its time).
        self.error = ""
        self.heard_at: float | None = None
        self.started_at = time.time()

    @staticmethod
    def key(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        return f"{meta.get('namespace') or ''}/{meta['name']}"

    def relist(self) -> str | None:
        items, version = self.cluster.list_with_version(
            self.api_version, self.kind, labels=self.labels, namespace=self.namespace
        )
        old, self.store = self.store, {}
        for obj in items:
            key = self.key(obj)
            reduced = self._reduced(obj)
            if reduced is None:  # unreadable: as last read, if it was
                reduced = old.get(key)
            if reduced is not None:
                self.store[key] = reduced
        _handling.listing = True
        try:
            for key in old.keys() | self.store.keys():
                self._updated(key, old.get(key), self.store.get(key))
        finally:
            _handling.listing = False
        self.synced, self.error, self.heard_at = True, "", time.time()
        self.on_change()
        return version

    def run(self, stop: threading.Event) -> None:
        """Until stop (a threading.Event) is set."""
        self.started_at = time.time()
        backoff, retry_after = 0.5, 1.0
        while not stop.is_set():
            try:
                version = self.relist()
                if not self.retry:
                    retry_after = 1.0
                while not stop.is_set() and not self.retry:
                    version = self._watch(version)
                    self.heard_at = time.time()
                    backoff = 0.5  # a watch that worked: the next failure waits little
                if self.retry:  # a handler failed: again in a while, longer while it fails
                    self.retry = False
                    stop.wait(retry_after)
                    retry_after = min(retry_after * 2, 30)
            except K8sError as exc:
                if exc.status != 410:
                    self.error = str(exc)
                    log.warning("%s informer: %s; relisting in %.1fs", self.kind, exc, backoff)
                    stop.wait(backoff)
                    backoff = min(backoff * 2, 10)
            except Exception as exc:  # a broken stream: relist rather than die
                self.error = f"{type(exc).__name__}: {exc}"
                log.exception("%s informer failed; relisting", self.kind)
                stop.wait(backoff)
                backoff = min(backoff * 2, 10)

    def _watch(self, version: str | None) -> str | None:
        for kind, obj in self.cluster.watch(
            self.api_version,
            self.kind,
            resource_version=version,
            timeout=self.watch_timeout,
            read_timeout=self.watch_timeout + 30,
            labels=self.labels,
            namespace=self.namespace,
        ):
            version = obj.get("metadata", {}).get("resourceVersion") or version
            self.heard_at = time.time()
            if kind == "BOOKMARK":
                continue
            key = self.key(obj)
            old = self.store.get(key)
            if kind == "DELETED":
                self.store.pop(key, None)
            else:
                reduced = self._reduced(obj)
                if reduced is None:  # unreadable: kept as last read, nobody told
                    continue
                self.store[key] = reduced
            self._updated(key, old, self.store.get(key))
            self.on_change()
            if self.retry:
                break
        return version

    def _reduced(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return self.reduce(obj)
        except Exception:  # one object someone wrote oddly must not hide the whole kind
            log.exception("%s informer: cannot read %s; leaving it out", self.kind, self.key(obj))
            return None

    def _updated(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if self.on_update is not None and old != new:
            try:
                self.on_update(old, new)
            except Exception:  # a failing handler must not stop the watch
                log.exception("%s informer: update handler failed; listing again", self.kind)
                if old is None:  # not seen: the next list hands the handler the change again
                    self.store.pop(key, None)
                else:
                    self.store[key] = old
                self.retry = True


def unheard(informer: Informer, now: float, after: float) -> dict[str, str] | None:
    """A diagnostic for an informer failing to list or watch with its store not current for
    `after` seconds (or not listed in the `after` seconds since it started): what the console
    shows of that kind may be stale."""
    current = informer.heard_at if informer.heard_at is not None else informer.started_at
    if not informer.error or now - current < after:
        return None
    since = "never listed" if informer.heard_at is None else "not current"
    return {
        "kind": "collector-blind",
        "subject": f"{informer.kind} ({since})",
        "cause": f"The collector cannot read {informer.kind} objects: {informer.error}",
        "fix": "Check the collector's permissions (its ClusterRole) and that the kind's CRD is "
        "installed; until then this page shows the last state it read.",
    }


def wait_synced(
    informers: Sequence[Informer], timeout: float = 30, stop: threading.Event | None = None
) -> bool:
    deadline = time.monotonic() + timeout
    while not all(i.synced for i in informers):
        if time.monotonic() > deadline or (stop is not None and stop.is_set()):
            return False
        time.sleep(0.05)
    return True
