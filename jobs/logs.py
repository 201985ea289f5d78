"""A job's pods, their Events and their logs, read through the API server (`pods/log`), for
the job page and the API alike."""

import time
from collections.abc import Iterator

from django.conf import settings
from django.http import Http404, StreamingHttpResponse

from core.cluster import get_cluster
from k8s_adapters.errors import K8sError
from k8s_adapters.pods import PodFacts, job_pods

from .models import Job

MAX_TAIL_LINES = 100_000


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
    for pod in pods_of(job):
        if pod.name == pod_name:
            return pod
    raise Http404("This job has no pod of that name (it may have ended and been removed).")


def log_chunks(
    job: Job,
    pod: PodFacts,
    *,
    container: str = "",
    follow: bool = False,
    tail_lines: int | None = None,
) -> Iterator[bytes]:
    """The container's log; with `follow`, until it ends or LOG_FOLLOW_SECONDS pass. A pod
    that has not started yet, or an API error, reads as one line saying so."""
    if not pod.has_started:
        yield f"[{pod.name} is {pod.phase}: no log yet]\n".encode()
        return
    deadline = time.monotonic() + settings.LOG_FOLLOW_SECONDS
    try:
        for chunk in get_cluster().pod_log(
            pod.name,
            job.tenant.namespace,
            container=container or None,
            follow=follow,
            tail_lines=tail_lines,
            limit_bytes=settings.LOG_DOWNLOAD_LIMIT_BYTES,
            timeout=settings.LOG_FOLLOW_SECONDS if follow else 30,
        ):
            yield chunk
            if follow and time.monotonic() > deadline:
                yield b"\n[stopped following after a while: reload to go on]\n"
                return
    except K8sError as exc:
        yield f"\n[the log could not be read: {exc.message}]\n".encode()


def tail_param(value: str | None) -> int | None:
    """`tail` from a query string: a positive number of lines, capped; anything else, none."""
    if value is None or not value.isdigit():
        return None
    return min(int(value), MAX_TAIL_LINES) or None


def log_response(job, pod_name, params):
    """The HTTP answer for a pod's log, for the page and the API: text, streamed."""
    pod = find_pod(job, pod_name)
    container = params.get("container", "")
    if container and container not in pod.container_names:
        raise Http404("This pod has no container of that name.")
    download = params.get("download") == "1"
    chunks = log_chunks(
        job,
        pod,
        container=container,
        follow=params.get("follow") == "1" and not download,
        tail_lines=tail_param(params.get("tail")),
    )
    response = StreamingHttpResponse(chunks, content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    if download:
        response["Content-Disposition"] = f'attachment; filename="{job.name}-{pod.name}.log"'
    return response
