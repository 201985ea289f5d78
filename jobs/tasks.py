"""Reconcile jobs into Volcano jobs with their workspace PVC and SSH-key Secret, and data
volumes into PVCs; observed status flows back."""

import time

from celery import shared_task
from django.db import transaction
from django.utils import timezone

from k8s_adapters.client import ObjectRef
from k8s_adapters.errors import PermanentK8sError, TransientK8sError
from k8s_adapters.labels import portal_labels
from k8s_adapters.routing import ROUTE_KINDS, build_service
from k8s_adapters.volcano import (
    JOB_KINDS,
    VCJOB_API,
    build_abort_command,
    build_data_pvc,
    build_job,
)
from networking.services import release_for_job
from portal.k8s import get_cluster
from portal.reconcile import enqueue, exclusive, started
from tenants.tasks import RETRY

from . import endpoints, pending
from .admission import admit
from .choices import FINISHED, HOLDING, PHASES, JobState
from .models import DataVolume, Job, JobEvent

QUEUE_API = "scheduling.volcano.sh/v1beta1"
PODGROUP_API = "scheduling.volcano.sh/v1beta1"
ABORT_PHASES = {"Aborting", "Aborted"}
_queues = {"at": 0.0, "parents": set()}


@shared_task(name="jobs.reconcile_job", ignore_result=True, **RETRY)
def reconcile_job(job_id):
    started(reconcile_job.name, job_id)
    with exclusive(reconcile_job, "job", job_id) as acquired:
        if not acquired:
            return
        job = Job.objects.select_related("tenant", "owner", "data_volume").filter(pk=job_id).first()
        if job is None:
            return
        if job.delete_requested:
            _delete(job)
            return
        if job.state == JobState.QUEUED:
            return  # nothing in the cluster yet
        if job.is_finished:  # its pods are gone: so go its endpoints' routes
            _ensure_endpoints(get_cluster(), job, active=False)
            return
        try:
            vcjob = _ensure(job)
            _observe(job, vcjob)
            if job.is_finished:  # it just finished: its routes go now
                _ensure_endpoints(get_cluster(), job, active=False)
        except PermanentK8sError as exc:
            _set(job, state=JobState.ERROR, message=exc.message)
        except TransientK8sError as exc:
            _set(job, state=JobState.ERROR, message=f"{exc.message} (retrying)")
            raise


def _check_queue(cluster, name):
    """What Volcano's admission webhook would refuse: a missing, closed or non-leaf queue."""
    queue = cluster.get(QUEUE_API, "Queue", name)
    if queue is None:
        raise PermanentK8sError(f"Volcano queue {name} does not exist (is the tenant in sync?)")
    state = (queue.get("status") or {}).get("state") or "Open"
    if state != "Open":
        raise PermanentK8sError(f"Volcano queue {name} is {state}; it takes no new jobs")
    if time.monotonic() - _queues["at"] > 10:
        _queues["parents"] = {
            (q.get("spec") or {}).get("parent") for q in cluster.list(QUEUE_API, "Queue")
        }
        _queues["at"] = time.monotonic()
    if name == "root" or name in _queues["parents"]:
        raise PermanentK8sError(f"Volcano queue {name} is not a leaf queue; jobs go to leaves")


def _ensure(job):
    """Create what is missing. An existing Volcano job is never re-applied: after creation
    Volcano lets only replicas and minAvailable change, so a changed spec is a new job."""
    cluster = get_cluster()
    spec = job.job_spec()
    objects = build_job(spec)
    vcjob = cluster.get(VCJOB_API, "Job", spec.name, spec.namespace)
    if job.data_volume:
        volume = job.data_volume
        cluster.apply_one(
            build_data_pvc(
                volume.name, spec.namespace, job.tenant.slug, volume.size_gib, volume.storage_class
            )
        )
    if vcjob is None:
        _check_queue(cluster, spec.queue)
        vcjob = cluster.apply(objects)[-1]
        JobEvent.objects.create(
            job=job, kind="submitted", message="Volcano job, workspace volume and secrets created."
        )
    else:
        cluster.apply(objects[:-1])
    _ensure_endpoints(cluster, job)
    if job.cancel_requested and _phase(vcjob) not in ABORT_PHASES | {"Completed", "Failed"}:
        cluster.apply_one(build_abort_command(spec.namespace, spec.name, vcjob["metadata"]["uid"]))
    return vcjob


def _ensure_endpoints(cluster, job, active=True):
    """A Service per live endpoint and the job's routes; expired ones are pruned."""
    rows = list(job.endpoints.all())
    if not rows:
        return
    live = endpoints.specs(job) if active else []
    desired = [build_service(e) for e in live] + endpoints.route_objects(job, live)
    applied = cluster.apply(desired)
    if len(live) < len(rows):  # only then can something be left over: spare the resync LISTs
        labels = portal_labels(tenant=job.tenant.slug, job=job.name, component="endpoint")
        labels.pop("gpu-portal.io/owner", None)
        cluster.prune(
            labels=labels,
            keep={ObjectRef.of(m) for m in desired},
            kinds=(("v1", "Service"), *ROUTE_KINDS),
            namespace=job.tenant.namespace,
        )
    by_name = {obj["metadata"]["name"]: obj for obj in applied if obj["kind"] == "Service"}
    for row in rows:
        service = by_name.get(f"{job.name}-{row.name}"[:63])
        if service is None:
            continue
        observed = {"node_port": service["spec"]["ports"][0].get("nodePort")}
        ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        if ingress:
            observed["ip"] = ingress[0].get("ip") or ingress[0].get("hostname")
        observed = {k: v for k, v in observed.items() if v}
        if observed != row.observed:
            type(row).objects.filter(pk=row.pk).update(observed=observed)


def _phase(vcjob):
    return ((vcjob.get("status") or {}).get("state") or {}).get("phase") or ""


def _observe(job, vcjob):
    status = vcjob.get("status") or {}
    phase = _phase(vcjob)
    state = PHASES.get(phase, JobState.PENDING)
    if job.cancel_requested and phase in ("Aborted", "Terminated"):
        state = JobState.CANCELLED
    counts = {k: status.get(k, 0) for k in ("pending", "running", "succeeded", "failed")}
    message = ((status.get("state") or {}).get("message")) or ""
    reason = _pending_reason(job, vcjob) if state == JobState.PENDING else ""
    _set(job, state=state, phase=phase, counts=counts, message=message, pending_reason=reason)


def _pending_reason(job, vcjob):
    cluster = get_cluster()
    group = cluster.get(
        PODGROUP_API, "PodGroup", f"{job.name}-{vcjob['metadata']['uid']}", job.tenant.namespace
    )
    conditions = ((group or {}).get("status") or {}).get("conditions") or []
    messages = [
        c.get("message", "")
        for c in conditions
        if c.get("type") == "Unschedulable" and c.get("status") == "True"
    ]
    return pending.explain(messages) if messages or group else ""


def _set(job, **fields):
    """Write observed status with a conditional update; note state changes as events and let
    queued jobs in when GPUs were released."""
    old = job.state
    changed = {k: v for k, v in fields.items() if getattr(job, k) != v}
    if not changed:
        return
    now = timezone.now()
    if "state" in changed:
        if fields["state"] == JobState.RUNNING and not job.started_at:
            changed["started_at"] = now
        if fields["state"] in FINISHED:
            changed["finished_at"] = now
    updated = Job.objects.filter(pk=job.pk, state=old).update(**changed)
    for key, value in changed.items():
        setattr(job, key, value)
    if updated and "state" in changed:
        text = f"{old} → {job.state}" + (f": {job.message}" if job.message else "")
        JobEvent.objects.create(job=job, kind="state", message=text)
        if old in HOLDING and job.state not in HOLDING:
            admit(job.tenant_id)


def _delete(job):
    cluster = get_cluster()
    labels = portal_labels(tenant=job.tenant.slug, job=job.name)
    kinds = (*JOB_KINDS, ("bus.volcano.sh/v1alpha1", "Command"), ("v1", "Service"), *ROUTE_KINDS)
    cluster.prune(
        labels={k: v for k, v in labels.items() if k != "gpu-portal.io/owner"},
        keep=set(),
        kinds=kinds,
        namespace=job.tenant.namespace,
    )
    tenant_id = job.tenant_id
    with transaction.atomic():
        release_for_job(job)
        job.delete()
    admit(tenant_id)


@shared_task(name="jobs.reconcile_data_volume", ignore_result=True, **RETRY)
def reconcile_data_volume(volume_id):
    started(reconcile_data_volume.name, volume_id)
    volume = DataVolume.objects.select_related("tenant").filter(pk=volume_id).first()
    if volume is None:
        return
    cluster = get_cluster()
    namespace = volume.tenant.namespace
    try:
        if volume.delete_requested:
            cluster.delete("v1", "PersistentVolumeClaim", volume.name, namespace)
            volume.delete()
            return
        cluster.apply_one(
            build_data_pvc(
                volume.name, namespace, volume.tenant.slug, volume.size_gib, volume.storage_class
            )
        )
        message = ""
    except PermanentK8sError as exc:
        message = exc.message
    DataVolume.objects.filter(pk=volume.pk).update(sync_message=message)


@shared_task(name="jobs.resync_jobs", ignore_result=True)
def resync_jobs():
    """Re-enqueue every job the cluster holds or should hold, and admit what fits."""
    for pk in Job.objects.filter(state__in=HOLDING).values_list("pk", flat=True):
        enqueue(reconcile_job, pk)
    for pk in Job.objects.filter(delete_requested=True).values_list("pk", flat=True):
        enqueue(reconcile_job, pk)
    for tenant_id in (
        Job.objects.filter(state=JobState.QUEUED).values_list("tenant_id", flat=True).distinct()
    ):
        admit(tenant_id)
    for pk in DataVolume.objects.values_list("pk", flat=True):
        enqueue(reconcile_data_volume, pk)


@shared_task(name="jobs.reclaim_endpoints", ignore_result=True)
def reclaim_endpoints():
    """Remove the Services and routes of expired endpoints (forward-auth already denies them
    from the moment they expire)."""
    endpoints.reclaim_expired()
