"""Apply, prune, read and watch Kubernetes objects.

Everything is written with server-side apply under one field manager, so re-applying the same
manifests is a no-op on the server (no new resourceVersion), and pruning selects only by the
portal's labels.
"""

import builtins
import contextlib
import copy
import functools
import json
import os
import re
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Self

from kubernetes import client, config, dynamic, watch
from kubernetes.dynamic.exceptions import NotFoundError

from .errors import ConflictK8sError, K8sError, PermanentK8sError, TransientK8sError, translate
from .labels import selector as label_selector


@dataclass(frozen=True, order=True)
class ObjectRef:
    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: dict[str, Any]) -> Self:
        meta = obj["metadata"]
        return cls(obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


# Characters YAML may not hold raw (C1 controls, non-characters); JSON escapes them instead.
_YAML_UNPRINTABLE = re.compile("[\x7f-\x9f\ufffe\uffff]")


def apply_body(manifest: dict[str, Any]) -> str:
    """An apply body the API server's YAML decoder takes for any text: UTF-8 (the client's own
    JSON escapes characters beyond the BMP as surrogate pairs, which the decoder refuses), with
    what YAML may not hold raw escaped."""
    text = json.dumps(manifest, ensure_ascii=False)
    return _YAML_UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# Seconds a list may take to answer (every pod of a large cluster) before it counts as lost.
LIST_READ_TIMEOUT = 300
# Seconds an admission webhook's cache may lag behind the API server (see Cluster.delete).
WEBHOOK_CACHE_LAG = 5.0
WEBHOOK_NOT_FOUND = re.compile(r"admission webhook .* denied the request: .* not found")


@contextlib.contextmanager
def translating() -> Iterator[None]:
    """Re-raise client failures as TransientK8sError / PermanentK8sError."""
    try:
        yield
    except Exception as exc:
        translated = translate(exc)
        if translated is exc:
            raise
        raise translated from exc


def load_api_client(
    kubeconfig: str | os.PathLike[str] | None = None, *, in_cluster: bool | None = None
) -> client.ApiClient:
    """An ApiClient from an explicit kubeconfig, the pod's service account, or the default.
    Its connections send TCP keepalives: a peer gone behind a load balancer or NAT (which drops
    the connection without a word) is noticed instead of waited on."""
    configuration = client.Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    elif in_cluster or (in_cluster is None and os.environ.get("KUBERNETES_SERVICE_HOST")):
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(client_configuration=configuration)
    configuration.keep_alive = True
    return client.ApiClient(configuration)


class Cluster:
    """One connection to one cluster, safe to share between threads."""

    def __init__(self, api_client: client.ApiClient, *, field_manager: str = "gpu-portal") -> None:
        self.api_client = api_client
        self.field_manager = field_manager
        self._dynamic: dynamic.DynamicClient | None = None
        self._streaming: dynamic.DynamicClient | None = None
        self._resources: dict[tuple[str, str], Any] = {}
        self._lock = threading.RLock()

    @classmethod
    def connect(cls, kubeconfig: str | os.PathLike[str] | None = None, **kwargs: Any) -> Self:
        with translating():
            return cls(load_api_client(kubeconfig), **kwargs)

    @property
    def streaming(self) -> dynamic.DynamicClient:
        """The dynamic client on a connection pool of its own, for watches and log streams. A
        stream left before its end closes its connection; on the shared pool that would cost the
        next request (often the write a watch waited for) a new TLS handshake."""
        with self._lock:
            if self._streaming is None:
                streaming = copy.copy(self.dynamic)  # its discovery is shared, only not its pool
                streaming.client = client.ApiClient(self.api_client.configuration)
                streaming.client.default_headers = dict(self.api_client.default_headers)
                self._streaming = streaming
            return self._streaming

    @property
    def dynamic(self) -> dynamic.DynamicClient:
        with self._lock:
            if self._dynamic is None:
                with translating():
                    self._dynamic = dynamic.DynamicClient(self.api_client)
            return self._dynamic

    def resource(self, api_version: str, kind: str) -> Any:
        key = (api_version, kind)
        if key not in self._resources:
            with self._lock, translating():  # the client's discovery is not thread-safe
                if key not in self._resources:
                    self._resources[key] = self.dynamic.resources.get(
                        api_version=api_version, kind=kind
                    )
        return self._resources[key]

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether the API server knows this kind (its CRD is installed)."""
        try:
            self.resource(api_version, kind)
        except PermanentK8sError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def _namespace(self, resource: Any, namespace: str | None) -> str | None:
        return (namespace or None) if resource.namespaced else None

    # -- writes -------------------------------------------------------------------------------

    def apply(
        self, manifests: Iterable[dict[str, Any]], *, dry_run: bool = False
    ) -> list[dict[str, Any]]:
        """Server-side apply each manifest in order; return what the server holds."""
        return [self.apply_one(manifest, dry_run=dry_run) for manifest in manifests]

    def apply_one(self, manifest: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        resource = self.resource(manifest["apiVersion"], manifest["kind"])
        meta = manifest["metadata"]
        with translating():
            obj = resource.server_side_apply(
                body=apply_body(manifest),
                name=meta["name"],
                namespace=self._namespace(resource, meta.get("namespace")),
                field_manager=self.field_manager,
                force_conflicts=True,
                dry_run="All" if dry_run else None,
                serialize=False,
            )
        return _decoded(obj)

    def apply_status(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Apply to the status subresource (tests play a controller's part with this). Kinds whose
        CRD has no status subresource take status as an ordinary field."""
        resource = self.resource(manifest["apiVersion"], manifest["kind"])
        if "status" not in resource.subresources:
            return Cluster(self.api_client, field_manager=f"{self.field_manager}-status").apply_one(
                manifest
            )
        meta = manifest["metadata"]
        with translating():
            obj = resource.status.server_side_apply(
                body=manifest,
                name=meta["name"],
                namespace=self._namespace(resource, meta.get("namespace")),
                field_manager=f"{self.field_manager}-status",
                force_conflicts=True,
                serialize=False,
            )
        return _decoded(obj)

    def patch_merge(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: dict[str, Any],
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """A JSON merge patch (null deletes a key) of fields another controller owns."""
        resource = self.resource(api_version, kind)
        with translating():
            obj = resource.patch(
                body=patch,
                name=name,
                namespace=self._namespace(resource, namespace),
                content_type="application/merge-patch+json",
                serialize=False,
            )
        return _decoded(obj)

    def patch_json(
        self,
        api_version: str,
        kind: str,
        name: str,
        operations: builtins.list[dict[str, Any]],
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """A JSON patch (RFC 6902). With a `test` of /metadata/resourceVersion it applies only to
        the version the caller read: a ConflictK8sError otherwise (the API server answers a
        failed `test` with a bare 422 Invalid, naming neither the operation nor the path)."""
        resource = self.resource(api_version, kind)
        try:
            with translating():
                obj = resource.patch(
                    body=operations,
                    name=name,
                    namespace=self._namespace(resource, namespace),
                    content_type="application/json-patch+json",
                    serialize=False,
                )
        except K8sError as exc:
            tests = any(op.get("op") == "test" for op in operations)
            if exc.status == 409 or (exc.status == 422 and tests):
                raise ConflictK8sError(exc.message, status=409, reason="Conflict") from exc
            raise
        return _decoded(obj)

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Delete one object in the background; False when it was already gone.

        An admission webhook that looks the object up in its informer's cache (Volcano's, for
        queues) refuses to delete one created a moment ago as "not found" while the API server
        has it: that is retried for a few seconds, then a TransientK8sError."""
        deadline = time.monotonic() + WEBHOOK_CACHE_LAG
        while True:
            try:
                return self._delete(api_version, kind, name, namespace)
            except PermanentK8sError as refused:
                lagging = refused.status == 400 and WEBHOOK_NOT_FOUND.search(refused.message)
                if not lagging:
                    raise
                if self.get(api_version, kind, name, namespace) is None:
                    return False
                if time.monotonic() > deadline:
                    raise TransientK8sError(refused.message, status=400) from refused
                time.sleep(0.2)

    def _delete(self, api_version: str, kind: str, name: str, namespace: str | None) -> bool:
        resource = self.resource(api_version, kind)
        try:
            with translating():
                resource.delete(
                    name=name,
                    namespace=self._namespace(resource, namespace),
                    propagation_policy="Background",
                )
        except Exception as exc:
            if getattr(exc, "status", None) == 404 or isinstance(exc.__cause__, NotFoundError):
                return False
            raise
        return True

    def delete_version(
        self, api_version: str, kind: str, name: str, namespace: str | None, resource_version: str
    ) -> bool:
        """Delete one object only if it is still at `resource_version` (ConflictK8sError if it
        changed); False when it was already gone."""
        resource = self.resource(api_version, kind)
        options = {"preconditions": {"resourceVersion": resource_version}}
        try:
            with translating():
                resource.delete(
                    name=name, namespace=self._namespace(resource, namespace), body=options
                )
        except K8sError as exc:
            if exc.status == 404:
                return False
            if exc.status == 409:
                raise ConflictK8sError(exc.message, status=409, reason="Conflict") from exc
            raise
        return True

    def force_delete_pods(self, namespace: str) -> None:
        """Delete every pod in the namespace at once (grace period 0). Without a kubelet to
        confirm, a bound pod's graceful deletion never ends, and neither would the namespace's."""
        resource = self.resource("v1", "Pod")
        with translating():
            self.dynamic.request(
                "delete",
                resource.path(namespace=namespace),
                body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
                _request_timeout=300,
            )

    def prune(
        self,
        *,
        labels: dict[str, str],
        keep: Iterable[ObjectRef],
        kinds: Iterable[tuple[str, str]],
        namespace: str | None = None,
    ) -> list[ObjectRef]:
        """Delete the objects of these kinds that carry these labels and are not kept (kinds the
        server does not serve hold nothing to delete)."""
        keep = set(keep)
        deleted = []
        for api_version, kind in kinds:
            if not self.serves(api_version, kind):
                continue
            for obj in self.list(api_version, kind, namespace=namespace, labels=labels):
                ref = ObjectRef.of(obj)
                if ref not in keep and self.delete(api_version, kind, ref.name, ref.namespace):
                    deleted.append(ref)
        return deleted

    # -- reads --------------------------------------------------------------------------------

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        resource = self.resource(api_version, kind)
        try:
            with translating():
                obj = resource.get(
                    name=name, namespace=self._namespace(resource, namespace), serialize=False
                )
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                return None
            raise
        return _decoded(obj)

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str | Collection[str]] | None = None,
        fields: dict[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        return self.list_with_version(
            api_version, kind, namespace=namespace, labels=labels, fields=fields
        )[0]

    def list_with_version(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str | Collection[str]] | None = None,
        fields: dict[str, str] | None = None,
    ) -> tuple[builtins.list[dict[str, Any]], str | None]:
        """The items and the list's resourceVersion, to start a watch from; `fields` is a
        field selector (equality only), e.g. {"involvedObject.name": name} for Events; `labels` may
        give a label a collection of values (any of them)."""
        resource = self.resource(api_version, kind)
        with translating():
            result = resource.get(
                namespace=self._namespace(resource, namespace),
                label_selector=label_selector(labels) if labels else None,
                field_selector=label_selector(fields) if fields else None,
                serialize=False,
                # A relist comes right after a connection was lost: one that hangs would stop
                # its informer for good, without a word.
                _request_timeout=(10, LIST_READ_TIMEOUT),
            )
            result = _decoded(result)
        items = result.get("items", [])
        for item in items:  # list items carry no apiVersion/kind of their own
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items, result["metadata"].get("resourceVersion")

    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        resource_version: str | None,
        namespace: str | None = None,
        labels: dict[str, str] | None = None,
        fields: dict[str, str] | None = None,
        timeout: int = 60,
        read_timeout: float | None = None,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event type, object) pairs after resource_version, for at most `timeout` seconds;
        `fields` is a field selector (equality only), e.g. {"metadata.name": name} for one
        object. With `read_timeout`, waiting longer than that for the next event raises
        TransientK8sError (the API server's own timeout counts whole seconds).

        A 410 Gone (the version is too old) raises PermanentK8sError with status 410: the
        caller relists, as an informer does.
        """
        resource = self.resource(api_version, kind)
        # The stream of the resource's GET, as the dynamic client's own watch reads it, without
        # its wrapping of every object in ResourceInstance: that costs several times the JSON
        # decoding (about 0.3 ms a Pod), for objects only read as dicts here.
        with translating():
            for event in watch.Watch().stream(
                functools.partial(self.streaming.get, resource),
                namespace=self._namespace(resource, namespace),
                label_selector=label_selector(labels) if labels else None,
                field_selector=label_selector(fields) if fields else None,
                resource_version=resource_version,
                timeout_seconds=timeout,
                allow_watch_bookmarks=True,
                serialize=False,
                _request_timeout=read_timeout,
            ):
                raw = event["raw_object"]
                if event["type"] == "ERROR":
                    raise translate(_watch_error(raw))
                yield event["type"], raw

    def pod_log(
        self,
        name: str,
        namespace: str,
        *,
        container: str | None = None,
        follow: bool = False,
        tail_lines: int | None = None,
        limit_bytes: int | None = None,
        timeout: float | None = None,
    ) -> Iterator[bytes]:
        """A pod's log through the API server (`pods/log`), in chunks as they arrive; with
        `follow`, until the container ends or `timeout` seconds pass without data."""
        core = client.CoreV1Api(self.streaming.client)
        kwargs: dict[str, Any] = {"follow": follow, "_preload_content": False}
        for key, value in (
            ("container", container),
            ("tail_lines", tail_lines),
            ("limit_bytes", limit_bytes),
            ("_request_timeout", timeout),
        ):
            if value is not None:
                kwargs[key] = value
        with translating():
            # With _preload_content=False the client returns the raw urllib3 response.
            response: Any = core.read_namespaced_pod_log(name, namespace, **kwargs)
        try:
            with translating():
                yield from response.stream(4096, decode_content=True)
        finally:
            response.release_conn()

    def pod_log_stamped(
        self,
        name: str,
        namespace: str,
        *,
        container: str | None = None,
        since_time: str | None = None,
        tail_lines: int | None = None,
        limit_bytes: int,
        timeout: float = 30,
    ) -> bytes:
        """A pod's log read whole (at most `limit_bytes`), each line after the time the
        container runtime wrote it (`timestamps`); from `since_time` (RFC 3339, whole seconds)
        on. The client's generated call has no `sinceTime`, which counts on the runtime's own
        clock where `sinceSeconds` counts on the caller's."""
        api = self.streaming.client
        query: list[tuple[str, Any]] = [("timestamps", "true"), ("limitBytes", limit_bytes)]
        for key, value in (
            ("container", container),
            ("sinceTime", since_time),
            ("tailLines", tail_lines),
        ):
            if value is not None:
                query.append((key, value))
        with translating():
            method, url, headers, body, post = api.param_serialize(
                "GET",
                "/api/v1/namespaces/{namespace}/pods/{name}/log",
                path_params={"namespace": namespace, "name": name},
                query_params=query,
                header_params={"Accept": "*/*"},
                auth_settings=["BearerToken"],
            )
            answer = api.call_api(
                method,
                url,
                header_params=headers,
                body=body,
                post_params=post,
                _request_timeout=timeout,
            )
            data = answer.response.data
            if answer.status >= 400:
                body_text = bytes(data).decode(errors="replace")
                raise client.ApiException(
                    status=answer.status, reason=answer.reason, body=body_text
                )
        return bytes(data)

    def service_account_token(self, namespace: str, name: str, *, seconds: int = 3600) -> str:
        """A short-lived token of a ServiceAccount (TokenRequest), to act as that account."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        with translating():
            answer = self.dynamic.request(
                "post", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", body=body
            )
        return str(answer.to_dict()["status"]["token"])

    def allowed(self, user: str, verb: str, group: str, resource: str, name: str = "") -> bool:
        """Whether the API server's authorizer lets `user` do `verb` on `resource` (the one
        object `name`, if given) cluster-wide (a SubjectAccessReview)."""
        asked = {"verb": verb, "group": group, "resource": resource, "name": name}
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "resourceAttributes": asked},
        }
        with translating():
            answer = self.dynamic.request(
                "post", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body
            )
        return bool(answer.to_dict()["status"].get("allowed"))

    def ready(self) -> bool:
        """True when the API server answers /readyz."""
        try:
            with translating():
                self.dynamic.request("get", "/readyz", _request_timeout=3)
        except Exception:
            return False
        return True


def _decoded(response: Any) -> Any:
    """The API server's answer as plain JSON. The dynamic client's own wrapping of it (an object
    per field, turned back into dicts) took three times the CPU on lists of nodes or pods."""
    return json.loads(response.data)


def _watch_error(status: dict[str, Any]) -> Exception:
    exc = client.exceptions.ApiException(status=status.get("code"), reason=status.get("reason"))
    exc.body = json.dumps(status)
    return exc
