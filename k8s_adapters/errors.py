"""Client failures, split into what a retry can fix and what it cannot (kopf's TemporaryError /
PermanentError)."""

import json
import re
from typing import Any

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import DynamicApiError, ResourceNotFoundError

# 409 on apply means another field manager owns a field; we always force, so a 409 is a race
# with a concurrent writer and worth retrying.
TRANSIENT_STATUSES = {408, 409, 425, 429, 500, 502, 503, 504}
# Server-side apply answers a body that does not fit the schema's types with a 500 whose message
# names the field; no retry can fix that.
PERMANENT_MESSAGES = ("failed to create typed patch object",)


class K8sError(Exception):
    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason


class TransientK8sError(K8sError):
    """Worth retrying with backoff: the server was unreachable, overloaded or raced."""


class ConflictK8sError(TransientK8sError):
    """The object changed since it was read (a failed resourceVersion precondition): read it
    again, decide again, write again."""


class PermanentK8sError(K8sError):
    """A retry cannot help: record the message on the object and stop."""


def _status_message(body: Any, fallback: str) -> str:
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        return fallback
    return data.get("message") or fallback


def translate(exc: Exception) -> Exception:
    """Turn any client-side failure into a TransientK8sError or PermanentK8sError."""
    if isinstance(exc, K8sError):
        return exc
    if isinstance(exc, ResourceNotFoundError):
        return PermanentK8sError(f"the API server does not serve this kind: {exc}", status=404)
    if isinstance(exc, ApiException | DynamicApiError):
        status = getattr(exc, "status", None)
        body = getattr(exc, "body", None)
        message = _status_message(body, str(getattr(exc, "reason", exc)))
        transient = status in TRANSIENT_STATUSES and not any(
            text in message for text in PERMANENT_MESSAGES
        )
        cls = TransientK8sError if transient else PermanentK8sError
        return cls(message, status=status, reason=getattr(exc, "reason", ""))
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        return TransientK8sError(f"the API server is unreachable: {exc}")
    return exc


# What an API server refusal means for the person who launched the job, in plain words; the
# raw message stays available beside it.
_PLAIN = (
    (
        re.compile(r"exceeded quota: [^,]*, requested: ([^,]+),"),
        "The tenant's quota in the cluster refused it (asked for {0}); wait for other jobs to "
        "finish, or ask a tenant admin to raise the quota.",
    ),
    (
        re.compile(r'admission webhook "[^"]+" denied the request: (.+?);?$'),
        "Volcano refused the job: {0}.",
    ),
    (
        re.compile(r"namespaces? \"([^\"]+)\" not found"),
        "The tenant's namespace {0} is missing in the cluster; a platform admin can resync "
        "the tenant.",
    ),
    (
        re.compile(r"is forbidden: User \"([^\"]+)\""),
        "The portal may not create this in the cluster (as {0}); a platform admin must grant "
        "it the permission.",
    ),
    (
        re.compile(r"(\S+): Invalid value"),
        "The cluster refused a value the portal derived from this job ({0}). This is the "
        "portal's fault, not yours: report it with the details below.",
    ),
)


def plain_words(message: str) -> str:
    """A sentence a researcher can act on, for a refusal from the API server."""
    for pattern, sentence in _PLAIN:
        found = pattern.search(message)
        if found:
            return sentence.format(*found.groups())
    return "The cluster refused the job; the details below say why."
