"""A job's pods, their Events and their logs, read through the API server (`pods/log`), for
the job page and the API alike."""

from collections.abc import Iterator
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse, StreamingHttpResponse

from core.cluster import get_cluster
from core.validators import whole_number
from k8s_adapters.errors import K8sError, PermanentK8sError
from k8s_adapters.pods import LogCursor, PodFacts, job_pod, job_pods, lines_after

from .models import Job

MAX_TAIL_LINES = 100_000
SKIPPED = (
    b"[lines skipped: the container wrote more in one second than a read holds; download the "
    b"log for all of it]\n"
)


def pods_of(job: Job) -> list[PodFacts]:
    """Empty before the job reached the cluster and after its pods are gone."""
    if not job.submitted_at:
        return []
    return job_pods(get_cluster(), job.tenant.namespace, job.name)


def replicas_without_pods(job: Job, pods: list[PodFacts]) -> list[tuple[str, int]]:
    """(task, index) of the job's replicas with no pod, in the job's order: not created yet,
    or removed (Volcano deletes a job's other pods when a policy ends it, their logs with
    them)."""
    present = {(pod.task, pod.index) for pod in pods}
    return [
        (task.name, index)
        for task in job.job_spec().tasks
        for index in range(task.replicas)
        if (task.name, index) not in present
    ]


def find_pod(job: Job, pod_name: str) -> PodFacts:
    """One of the job's own pods; any other name (another job's pod too) is a 404."""
    pod = (
        job_pod(get_cluster(), job.tenant.namespace, job.name, pod_name)
        if job.submitted_at
        else None
    )
    if pod is None:
        raise Http404("This job has no pod of that name (it may have ended and been removed).")
    return pod


@dataclass(frozen=True)
class LogRequest:
    container: str = ""
    tail: int | None = None
    after: LogCursor | None = None
    download: bool = False


FLAGS = {"1": True, "true": True, "0": False, "false": False}


def log_request(params) -> LogRequest:
    """What a log request asks for, from its query string; a ValidationError keyed by
    parameter says what to send instead."""
    errors = {}
    if "follow" in params:
        errors["follow"] = (
            "Logs are followed by reading on: send after=<the X-Log-Cursor header of the last "
            "answer> every few seconds."
        )
    tail = params.get("tail")
    lines = whole_number(tail)
    if tail is not None and not (lines and lines <= MAX_TAIL_LINES):
        errors["tail"] = f"Give a number of lines from 1 to {MAX_TAIL_LINES:,}."
    after = params.get("after")
    cursor = LogCursor.parse(after) if after is not None else None
    if after is not None and cursor is None:
        errors["after"] = "Send the X-Log-Cursor header of the last answer, as it came."
    if tail is not None and after is not None:
        errors["tail"] = "Give tail (the last lines) or after (the lines since), not both."
    download = FLAGS.get(params.get("download", "0"))
    if download is None:
        errors["download"] = "Give 1 or 0."
    if errors:
        raise ValidationError(errors)
    return LogRequest(params.get("container", ""), lines, cursor, download)


def read_on(job: Job, pod: PodFacts, asked: LogRequest) -> tuple[bytes, LogCursor | None, bool]:
    """The container's lines after `asked.after` (or its last `asked.tail` lines, or all it
    has), at most one read's worth; the cursor to read on from; and whether the read was cut
    at that size (then more is there already). Each read is short: a page follows a log by
    reading on every few seconds, never by holding a connection (and a web thread) open."""
    if not pod.has_started:
        return f"[{pod.name} is {pod.phase}: no log yet]\n".encode(), asked.after, False
    data = get_cluster().pod_log_stamped(
        pod.name,
        job.tenant.namespace,
        container=asked.container or None,
        since_time=asked.after.since_time if asked.after else None,
        tail_lines=asked.tail,
        limit_bytes=settings.LOG_READ_LIMIT_BYTES,
    )
    text, cursor = lines_after(data, asked.after)
    cut = len(data) >= settings.LOG_READ_LIMIT_BYTES
    if not text and asked.after and cut:
        # One second of output larger than a read: reading on from it would never get past.
        cursor = asked.after.next_second()
        text = SKIPPED
    return text, cursor, cut


def log_chunks(job: Job, pod: PodFacts, *, container: str = "") -> Iterator[bytes]:
    """The container's whole log (up to LOG_DOWNLOAD_LIMIT_BYTES), for a download. A pod that
    has not started yet, or an API error, reads as one line saying so."""
    if not pod.has_started:
        yield f"[{pod.name} is {pod.phase}: no log yet]\n".encode()
        return
    try:
        yield from get_cluster().pod_log(
            pod.name,
            job.tenant.namespace,
            container=container or None,
            limit_bytes=settings.LOG_DOWNLOAD_LIMIT_BYTES,
            timeout=30,
        )
    except K8sError as exc:
        yield f"\n[the log could not be read: {exc.message}]\n".encode()


def _unread(error: K8sError) -> HttpResponse:
    if error.status == 404:
        status, text = 404, "This pod is gone: its job ended or Volcano removed it."
    elif error.status == 400:  # what was asked (a time, a container) the cluster will not read
        status, text = 400, f"The cluster refused to read this log: {error.message}"
    elif isinstance(error, PermanentK8sError):  # the portal's own rights, say
        status, text = 503, f"The cluster refused to read this log: {error.message}"
    else:
        status = 503
        text = (
            f"The log could not be read: the cluster did not answer ({error.message}). Try "
            "again in a moment."
        )
    return HttpResponse(text + "\n", status=status, content_type="text/plain; charset=utf-8")


def log_response(job, pod_name, params):
    """The HTTP answer for a pod's log, for the page and the API: text, with the cursor to
    read on from (X-Log-Cursor), whether more may come (X-Log-Open) and whether more is there
    already, for reading on at once (X-Log-More: the read was cut at its size), and whether the
    container has started (X-Log-Started); or, for a download, the whole log as a file. A pod
    gone meanwhile is a 404, a refused read a 400, and a cluster that does not answer a 503,
    each saying so."""
    asked = log_request(params)
    try:
        pod = find_pod(job, pod_name)
        if asked.container and asked.container not in pod.container_names:
            raise Http404("This pod has no container of that name.")
        if asked.download:
            response = StreamingHttpResponse(
                log_chunks(job, pod, container=asked.container),
                content_type="text/plain; charset=utf-8",
            )
            response["Content-Disposition"] = f'attachment; filename="{job.name}-{pod.name}.log"'
        else:
            text, cursor, cut = read_on(job, pod, asked)
            response = HttpResponse(text, content_type="text/plain; charset=utf-8")
            if cursor is not None:
                response["X-Log-Cursor"] = str(cursor)
            running = pod.phase in ("Pending", "Running")
            response["X-Log-Open"] = "1" if running or cut else "0"
            response["X-Log-More"] = "1" if cut else "0"
            response["X-Log-Started"] = "1" if pod.has_started else "0"
    except K8sError as exc:
        response = _unread(exc)
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response
