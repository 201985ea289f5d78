"""An informer: list one kind, then watch from the list's resourceVersion, keeping a store of
reduced objects. A 410 Gone (the version was compacted away) or a lost connection means a
fresh list, with backoff while the API server is down."""

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
    ) -> None:
        self.cluster, self.api_version, self.kind = cluster, api_version, kind
        self.reduce, self.on_change, self.watch_timeout = reduce, on_change, watch_timeout
        self.store: dict[str, dict[str, Any]] = {}
        self.synced = False

    @staticmethod
    def key(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        return f"{meta.get('namespace') or ''}/{meta['name']}"

    def relist(self) -> str | None:
        items, version = self.cluster.list_with_version(self.api_version, self.kind)
        self.store = {self.key(obj): self.reduce(obj) for obj in items}
        self.synced = True
        self.on_change()
        return version

    def run(self, stop: threading.Event) -> None:
        """Until stop (a threading.Event) is set."""
        backoff = 0.5
        while not stop.is_set():
            try:
                version = self.relist()
                backoff = 0.5
                while not stop.is_set():
                    version = self._watch(version)
            except K8sError as exc:
                if exc.status != 410:
                    log.warning("%s informer: %s; relisting in %.1fs", self.kind, exc, backoff)
                    stop.wait(backoff)
                    backoff = min(backoff * 2, 10)
            except Exception:  # a broken stream: relist rather than die
                log.exception("%s informer failed; relisting", self.kind)
                stop.wait(backoff)
                backoff = min(backoff * 2, 10)

    def _watch(self, version: str | None) -> str | None:
        for kind, obj in self.cluster.watch(
            self.api_version, self.kind, resource_version=version, timeout=self.watch_timeout
        ):
            version = obj.get("metadata", {}).get("resourceVersion") or version
            if kind == "BOOKMARK":
                continue
            if kind == "DELETED":
                self.store.pop(self.key(obj), None)
            else:
                self.store[self.key(obj)] = self.reduce(obj)
            self.on_change()
        return version


def wait_synced(informers: Sequence[Informer], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while not all(i.synced for i in informers):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
