"""Reconcile jobs into Volcano jobs with their workspace PVC and SSH-key Secret, and data
volumes into PVCs; observed status flows back."""

import contextlib
import logging
import re
import time
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from core.cluster import get_cluster
from core.reconcile import (
    Requeue,
    enqueue,
    nothing_waiting,
    once_again,
    once_every,
    reconciler,
    resync,
)
from k8s_adapters.client import ObjectRef
from k8s_adapters.errors import K8sError, PermanentK8sError, plain_words
from k8s_adapters.events import telling_events
from k8s_adapters.inventory import reduce_claim
from k8s_adapters.labels import portal_labels
from k8s_adapters.names import workspace_claim
from k8s_adapters.pods import quota_held_until
from k8s_adapters.quantity import to_decimal
from k8s_adapters.routing import (
    ENDPOINT_KINDS,
    FALLBACK_COMPONENT,
    ROUTE_KINDS,
    observed_service,
)
from k8s_adapters.tenant import QUOTA_NAME
from k8s_adapters.volcano import (
    JOB_KINDS,
    QUEUE_API,
    VCJOB_API,
    build_abort_command,
    build_data_pvc,
    build_job,
    read_job,
    read_queue,
)
from k8s_adapters.waiting import (
    claim_messages,
    claims_to_bind_first,
    evictions,
    wait_bound,
    waiting_messages,
)
from networking.attach import static_addresses_waiting
from networking.services import release_for_job

from . import endpoints, pending
from .admission import admit
from .choices import FINISHED, HOLDING, PHASES, JobState
from .models import DataVolume, Job, JobEvent

ABORT_PHASES = {"Aborting", "Aborted"}
EVICTION_CLOCK_SKEW = timedelta(seconds=5)  # Events carry the API server's clock, seconds only
PENDING_REASON_AFTER = 3  # seconds after submission: Volcano schedules every second
PENDING_REASON_EVERY = 5  # seconds: reading why a job waits takes several LISTs
# Jobs waiting longer than this are re-read by every LONG_WAIT_EVERY-th frequent resync only.
LONG_WAIT, LONG_WAIT_EVERY = timedelta(minutes=1), 3
logger = logging.getLogger(__name__)
POD_STOP_RECHECK = 2.0  # seconds between looks at a deleted job's pods while they stop
OWN_QUOTA = re.compile(rf"exceeded quota: {re.escape(QUOTA_NAME)},")
STORAGE_LIMIT = re.compile(r"exceeded quota: .*limited: .*requests\.storage=([0-9.]+[A-Za-z]*)")
CLAIMS_LIMIT = re.compile(r"exceeded quota: .*limited: .*persistentvolumeclaims=([0-9]+)")


def _failed(job, error):
    """A permanent refusal puts the job in error, in plain words where the API server refused
    (its raw message stays in the sync message); the resync tries again. Not a job Volcano
    has (its state is Volcano's to say, and an error would hide its end), nor one in the
    portal's queue (its volumes made ahead are made again on submission): their page shows
    the refusal as the last update's. Nor one that ended (cancelled before Volcano had it: in
    error it would count its quota again)."""
    if job.phase or job.is_finished or job.state == JobState.QUEUED:
        return
    _set(
        job,
        state=JobState.ERROR,
        message=plain_words(error.message) if error.status else error.message,
    )


@reconciler(
    "job",
    Job,
    name="jobs.reconcile_job",
    # Only the tenant: every run needs it, while the owner (for endpoints) and the data volume
    # are read only for jobs that have them (the wider join cost a quarter more per load).
    select_related=("tenant",),
    # Whether a run recorded creating its Volcano job: read with the job, as every run before
    # its first phase asks (a launch's first run among them).
    annotate={
        "submission_recorded": Exists(JobEvent.objects.filter(job=OuterRef("pk"), kind="submitted"))
    },
    on_permanent=_failed,
)
def reconcile_job(job):
    """Create what the job is missing, follow its phase, and remove its routes once it ends."""
    if job.delete_requested:
        _delete(job)
    elif job.state == JobState.QUEUED:
        if job.volumes_ahead_at and _volumes_due(f"ahead-{job.pk}"):  # next in line
            try:  # its claim binds as it waits
                with _again_if_failed(f"ahead-{job.pk}"):
                    get_cluster().apply(build_job(job.job_spec())[:-1])
            except PermanentK8sError as refused:
                if not _quota_wait(refused, job):
                    raise  # submission applies them again in any case
    elif job.is_finished:  # its pods are gone: so go its endpoints' routes
        if job.volumes_ahead_at and not job.submitted_at:  # cancelled while it waited
            _remove_volumes_ahead(job)
        _ensure_endpoints(get_cluster(), job, active=False)
        _release_quota(job)
    elif job.cancel_requested and not job.phase and _cancel_unsubmitted(job):
        _release_quota(job)  # none of its pods ever ran: free at once
        return
    else:
        status = _ensure(job)
        if status is not None:
            _observe(job, status)
        if job.is_finished:  # it just finished: its routes go now
            _ensure_endpoints(get_cluster(), job, active=False)
            _release_quota(job)


def _release_quota(job):
    """A finished job's quota is free once its pods no longer count in the ResourceQuota:
    Volcano ends a job whose last retry failed while its other pods still stop, and the next
    job admitted sooner would have its pods refused after Volcano took its gang."""
    if job.quota_released_at or not job.submitted_at:
        return
    now = _pods_stopped(job)
    if Job.objects.filter(pk=job.pk, quota_released_at__isnull=True).update(quota_released_at=now):
        job.quota_released_at = now
        admit(job.tenant_id)


def _pods_stopped(job):
    """Now, once the job's pods no longer count in the ResourceQuota (a stopping pod counts
    until its grace period ends); until then the run comes back (Requeue) to look again."""
    now = timezone.now()
    held = quota_held_until(get_cluster(), job.tenant.namespace, job.name, now)
    if held is not None:
        raise Requeue(min(POD_STOP_RECHECK, max(0.2, (held - now).total_seconds())))
    return now


def _remove_job_objects(cluster, job, *kinds):
    """Delete the job's objects (and those of `kinds`) by its labels, and its SSH-key Secret by
    name: the worker lists no Secrets."""
    cluster.prune(
        labels=portal_labels(tenant=job.tenant.slug, job=job.name),
        keep=set(),
        kinds=(*JOB_KINDS, *kinds),
        namespace=job.tenant.namespace,
    )
    cluster.delete("v1", "Secret", job.job_spec().ssh_secret, job.tenant.namespace)


def _cancel_unsubmitted(job):
    """Cancel a job Volcano never had: still waiting for its claim to bind, or in error before
    its submission (its queue closed, say). What it has in the cluster goes, and it ends
    cancelled now; waiting for the claim first could wait forever. One whose Volcano job
    exists after all (a run created it and stopped before recording it) is aborted by Volcano
    as usual: False."""
    cluster = get_cluster()
    if cluster.get(VCJOB_API, "Job", job.name, job.tenant.namespace) is not None:
        return False
    _remove_job_objects(cluster, job)
    _ensure_endpoints(cluster, job, active=False)
    _set(
        job,
        state=JobState.CANCELLED,
        message="Cancelled before it reached Volcano.",
        workspace_gone_at=timezone.now(),  # removed just now, by the portal
    )
    return True


def _quota_lags(error, tenant):
    """Why the ResourceQuota refused storage or a claim the portal's admission counted as
    free, or "" for another refusal. The portal sets the quota from the tenant's own, so it
    lets the claim in soon: it still counts a claim being deleted (its pods stop), or it is
    still the lower one the tenant had before a raise (or was lowered by hand), which the
    tenant's next run sets again."""
    if error.status != 403 or not OWN_QUOTA.search(error.message):
        return ""  # another refusal, or a ResourceQuota someone else made: no wait ends it
    storage = STORAGE_LIMIT.search(error.message)
    claims = CLAIMS_LIMIT.search(error.message)
    if not storage and not claims:
        return ""
    below = (storage and to_decimal(storage.group(1)) < tenant.storage_quota_gib * 2**30) or (
        claims and int(claims.group(1)) < tenant.pvc_quota
    )
    return pending.QUOTA_BEHIND if below else pending.STORAGE_RELEASING


def _quota_wait(error, job):
    """`_quota_lags` for the job's tenant, sending its tenant's run when the quota is behind."""
    reason = _quota_lags(error, job.tenant)
    if reason == pending.QUOTA_BEHIND:
        enqueue("tenants.reconcile_tenant", job.tenant_id)
    return reason


def _remove_volumes_ahead(job):
    """A job cancelled in the portal's queue never runs: the volumes made ahead for it go, and
    their storage is free for the next in line."""
    _remove_job_objects(get_cluster(), job)
    Job.objects.filter(pk=job.pk).update(volumes_ahead_at=None)
    admit(job.tenant_id)


def _queue_refusal(cluster, name):
    """Why Volcano's admission webhook refused a job sent to queue `name`, in plain words, when
    the queue is why: missing, not open, or not a leaf; else None. Read only once a creation
    was refused: a read of the queue before each creation (one in a few seconds a worker, and a
    list of every queue) was on the path of every launch."""
    queue = cluster.get(QUEUE_API, "Queue", name)
    if queue is None:
        return f"Volcano queue {name} does not exist (is the tenant in sync?)"
    state = read_queue(queue).state
    if state != "Open":
        return f"Volcano queue {name} is {state}; it takes no new jobs"
    parents = {read_queue(q).parent for q in cluster.list(QUEUE_API, "Queue")}
    if name == "root" or name in parents:
        return f"Volcano queue {name} is not a leaf queue; jobs go to leaves"
    return None


def _ensure(job):
    """Create what is missing. An existing Volcano job is never changed: after creation
    Volcano lets only replicas and minAvailable change, so a changed spec is a new job (and
    Volcano refuses a second creation of one, see `_create_vcjob`)."""
    cluster = get_cluster()
    spec = job.job_spec()
    objects = build_job(spec)
    if job.data_volume_id and not job.phase:  # later, its own reconciler keeps it
        cluster.apply_one(_data_pvc(job.data_volume))
    # A job never seen submitted gets its claims first: they bind while this run reads the
    # rest (its first run waits mostly for that). Applying them again is harmless should the
    # Volcano job exist after all (a run that created it stopped before recording it).
    applied = None if job.phase else _submission_volumes(cluster, job, objects[:-1])
    # Still Submitting, no run recorded its Volcano job: it is created without a read first (a
    # read on the path of every launch). One a run created before it stopped is read once
    # Volcano refuses to create it again.
    recorded = bool(job.phase) or _submission_said(job)  # a run created its Volcano job
    if job.state == JobState.SUBMITTING and not recorded:
        vcjob = None
    else:
        vcjob = cluster.get(VCJOB_API, "Job", spec.name, spec.namespace)
    if vcjob is None and recorded:
        # It existed (we saw its phase, or a run recorded creating it: Volcano may delete it
        # before the portal sees a phase) and is gone: a TTL cleanup or someone's delete. Never
        # create it again behind the user's back: it ends here, and can be relaunched.
        if spec.ttl_seconds_after_finished is not None:  # Volcano's own cleanup, most likely
            said = (
                f"The Volcano job was removed (its ttl_seconds_after_finished) before the portal "
                f"saw how it ended (last phase seen {job.phase or 'none yet'}); its outcome is "
                "unknown: see its logs or outputs. Relaunch the job to run it again."
            )
        else:
            said = (
                f"The Volcano job was deleted outside the portal (last phase "
                f"{job.phase or 'none yet'}); "
                "relaunch the job to run it again."
            )
        _set(job, state=JobState.FAILED, message=said)
        return None
    created = False
    if vcjob is None:
        claims = [spec.workspace_claim] + ([spec.data_volume] if spec.data_volume else [])
        to_bind = claims_to_bind_first(cluster, spec.namespace, claims, applied or ())
        # Most claims bind within a fraction of a second: waiting here submits the job then,
        # where requeueing costs a hop through the collector's watch and a run.
        wait = settings.JOB_BIND_WAIT if to_bind and nothing_waiting() else 0
        unbound = wait_bound(cluster, spec.namespace, to_bind, wait)
        if unbound:
            # A claim just created has nothing to say yet: its Events are read once it waits.
            said = []
            if _waited(job) >= PENDING_REASON_AFTER:
                said = claim_messages(unbound, _telling_events(spec.namespace))
            reason = pending.explain(said, default=pending.WAITING_FOR_VOLUME)
            _set(job, state=JobState.PENDING, pending_reason=reason)
            _ensure_endpoints(cluster, job)  # its URLs exist from the start
            # From now on the collector submits it as its claim binds (it follows the binds of
            # jobs shown Pending). A bind that came after this run stopped waiting, before it
            # showed the job Pending, the collector passed over: read the claims once more.
            if claims_to_bind_first(cluster, spec.namespace, unbound):
                raise Requeue(_claim_recheck_seconds(job))
        if any(n.get("static_ip") for n in job.networks):
            waiting = static_addresses_waiting(job)
            if waiting:
                _set(job, state=JobState.PENDING, pending_reason=waiting)
                raise Requeue(_claim_recheck_seconds(job))
        vcjob = _create_vcjob(cluster, job, objects[-1])
        status = read_job(vcjob)
        _volumes_due(status.uid)  # just applied: the next runs need not
        created = True
    else:
        status = read_job(vcjob)
    # A cancel reaches Volcano first: an object below refused for good (a quota on Services,
    # a route kind not served) must not keep a job the user cancelled running.
    if job.cancel_requested and status.phase not in ABORT_PHASES | {"Completed", "Failed"}:
        cluster.apply_one(build_abort_command(spec.namespace, spec.name, status.uid))
    if not created and applied is None and _volumes_due(status.uid):
        with _again_if_failed(status.uid):
            cluster.apply(objects[:-1])
    _ensure_endpoints(cluster, job)
    return status


def _submission_said(job):
    """Whether a run recorded creating the job's Volcano job (its "submitted" event), as the
    run's load read it (under the job's lock: no other run records it meanwhile)."""
    loaded = getattr(job, "submission_recorded", None)
    return job.events.filter(kind="submitted").exists() if loaded is None else loaded


def _create_vcjob(cluster, job, manifest):
    """Create the job's Volcano job, and say so on its page. A refusal may be Volcano's to
    change one that exists (Volcano lets only replicas and minAvailable change): a run created
    it and stopped before recording it, or its apply timed out after the API server took it.
    Then it is read, and its submission said once. A refusal because of its queue (missing,
    closed, not a leaf) is said in plain words."""
    try:
        vcjob = cluster.apply_one(manifest)
    except PermanentK8sError as refused:
        meta = manifest["metadata"]
        vcjob = cluster.get(VCJOB_API, "Job", meta["name"], meta["namespace"])
        if vcjob is None:
            said = _queue_refusal(cluster, manifest["spec"]["queue"])
            if said:
                raise PermanentK8sError(said) from refused  # Volcano's own words in the log
            raise
        if _submission_said(job):  # once only, however many runs created it
            return vcjob
    JobEvent.objects.create(
        job=job, kind="submitted", message="Volcano job, workspace volume and secrets created."
    )
    return vcjob


def _submission_volumes(cluster, job, volumes):
    """Apply the claims and Secret of a job about to be submitted, and return them as the API
    server has them. The runs that follow within the resync interval while its claims bind
    (the collector brings one as soon as a claim binds) read its claims instead of applying
    everything again, unless one is gone; never its Secret, which the worker may write but not
    read. Marked only once applied whole: a run that stopped halfway is applied again. A
    ResourceQuota that still counts a volume being deleted (its claim waits for its pods to go)
    while the portal counted it free leaves the job Pending until it lets the claim in."""
    key = f"submission-volumes:{job.pk}"
    # Until a run of the job is recorded, apply them without asking (its first run, on the
    # path of every launch; one that stopped halfway applies them again, which is harmless).
    if job.synced_at is not None and cache.get(key):
        claims = [
            cluster.get("v1", o["kind"], o["metadata"]["name"], job.tenant.namespace)
            for o in volumes
            if o["kind"] == "PersistentVolumeClaim"
        ]
        if None not in claims:
            return claims
    try:
        applied = cluster.apply(volumes)
    except PermanentK8sError as refused:
        reason = _quota_wait(refused, job)
        if not reason:
            raise
        _set(job, state=JobState.PENDING, pending_reason=reason)
        raise Requeue(_claim_recheck_seconds(job)) from refused
    cache.set(key, 1, timeout=settings.RESYNC_INTERVAL)
    return applied


@contextlib.contextmanager
def _again_if_failed(uid):
    """The volumes marked applied by `_volumes_due` are applied again by the next run when this
    apply fails (a retry after a transient refusal would otherwise skip them a whole interval)."""
    try:
        yield
    except BaseException:
        once_again(f"job-volumes:{uid}")
        raise


def _volumes_due(uid):
    """Whether a submitted job's claim and Secret (or those made ahead for a queued one, keyed
    by its row) are due to be applied again, marking them applied. Runs that Volcano's watch
    brings (every phase change) only follow the phase; the volumes are applied again at most
    once a resync interval, so a claim or Secret deleted by hand comes back within that
    interval. Keyed by the Volcano job's uid: a relaunch is new."""
    return once_every(f"job-volumes:{uid}", settings.RESYNC_INTERVAL)


def _claim_recheck_seconds(job):
    """The collector's watch on claims brings a job back as soon as its claim binds; this is
    the safety net, backing off with the wait (5 s, then up to 30 s): a slow provisioner with
    many jobs waiting must not fill the workers with runs that find nothing new."""
    return min(30.0, max(5.0, _waited(job)))


def _waited(job):
    """Seconds since the job was admitted to the cluster (submitted)."""
    since = job.submitted_at or job.created_at
    return (timezone.now() - since).total_seconds() if since else 0.0


def _ensure_endpoints(cluster, job, active=True):
    """A Service per live endpoint and the job's routes; expired ones are pruned. Endpoints are
    made at launch for the ports a job exposes, and only then: a job without ports has none to
    read, on any run."""
    if not job.job_spec().ports:
        return
    rows = list(job.endpoints.all())
    if not rows:
        return
    live = endpoints.specs(job) if active else []
    desired = endpoints.objects(live)
    applied = cluster.apply(desired)
    if len(live) < len(rows):  # only then can something be left over: spare the resync LISTs
        labels = portal_labels(tenant=job.tenant.slug, job=job.name, component="endpoint")
        cluster.prune(
            labels=labels,
            keep={ObjectRef.of(m) for m in desired},
            kinds=ENDPOINT_KINDS,
            namespace=job.tenant.namespace,
        )
    refs = {ObjectRef.of(obj): obj for obj in applied}
    services = {ref.name: obj for ref, obj in refs.items() if ref.kind == "Service"}
    for row in rows:
        service = services.get(row.service_name)
        if service is not None and observed_service(service) != row.observed:
            type(row).objects.filter(pk=row.pk).update(observed=observed_service(service))


def _observe(job, status):
    if status.phase != job.phase and status.phase in ("Restarting", "Pending") and job.started_at:
        _note_eviction(job)
    state = _state_of(job, status.phase)
    # Until Volcano's controller has seen the job (no phase yet) and its scheduler has had a
    # few cycles, nothing explains a wait: the job resync reads why it waits from then on.
    waits = state == JobState.PENDING and status.phase and _waited(job) >= PENDING_REASON_AFTER
    reason = ""
    if waits:  # read again at most every few seconds, however often the job's runs come
        due = once_every(f"why-pending:{status.uid}", PENDING_REASON_EVERY)
        reason = _pending_reason(job, status.uid) if due else job.pending_reason
    _set(
        job,
        state=state,
        phase=status.phase,
        counts=status.counts,
        message=status.message,
        pending_reason=reason,
    )


def observe_started(tenant_slug, name, phase, counts, message):
    """The collector's watch saw a waiting job's Volcano job turn Running: write that at once,
    as a run would (state, start time, event), so the job's page says Running without waiting
    for a worker's hop and its reading of the Volcano job. True when written: then no run is
    needed, as nothing else changes when a job starts (its routes exist since its submission,
    its volumes are applied again by the resync, a later change brings a run). False leaves
    the change to a run: the job is not found waiting (a run wrote it first, or it is being
    deleted), or it was cancelled while waiting (the run aborts it). The conditional update
    lets only one of the collector and a run record the start."""
    if phase != "Running":
        return False
    # Its tenant is not loaded: letting the tenant's queue in takes only the tenant's id.
    job = Job.objects.filter(
        tenant__slug=tenant_slug,
        name=name,
        state__in=(JobState.SUBMITTING, JobState.PENDING),
        started_at__isnull=True,
        cancel_requested=False,
        delete_requested=False,
    ).first()
    if job is None:
        return False
    return _write_seen(job, JobState.RUNNING, phase, counts, message)


def observe_finished(tenant_slug, name, phase, counts, message):
    """The collector's watch saw a job's Volcano job end: write that at once, as a run would.
    A run comes all the same (it removes the job's routes), but it may find the Volcano job
    gone already: a job with `ttl_seconds_after_finished` is deleted by Volcano as soon as it
    ends, and only the watch saw how it ended. Written only over a state the job holds in the
    cluster (a job being deleted, or ended already, is left as it is)."""
    if PHASES.get(phase) not in FINISHED:
        return False
    job = Job.objects.filter(
        tenant__slug=tenant_slug, name=name, state__in=HOLDING, delete_requested=False
    ).first()
    if job is None:
        return False
    return _write_seen(job, _state_of(job, phase), phase, counts, message)


def _write_seen(job, state, phase, counts, message):
    """What the collector's watch saw, written as a run would: the state and its event, or
    neither. True when written."""
    with transaction.atomic():
        return _set(
            job, state=state, phase=phase, counts=counts, message=message, pending_reason=""
        )


def _state_of(job, phase):
    """The portal's state for a Volcano phase: an abort the user asked for is a cancel."""
    if job.cancel_requested and phase in ("Aborted", "Terminated"):
        return JobState.CANCELLED
    return PHASES.get(phase, JobState.PENDING)


def _note_eviction(job):
    """The job ran and goes back to waiting: when the scheduler evicted its pods (reclaimed for
    another tenant, or preempted), say so once on the job's page."""
    since = job.events.filter(kind="evicted").values_list("created_at", flat=True).first()
    since = since or job.started_at
    tasks = [task.name for task in job.job_spec().tasks]
    for event in evictions(get_cluster(), job.tenant.namespace, job.name, tasks):
        if event.last_seen and since and event.last_seen >= since - EVICTION_CLOCK_SKEW:
            JobEvent.objects.create(job=job, kind="evicted", message=pending.evicted(event.message))
        return  # the newest only


def _pending_reason(job, uid):
    namespace = job.tenant.namespace
    events = _telling_events(namespace)
    return pending.explain(waiting_messages(get_cluster(), namespace, job.name, uid, events))


def _telling_events(namespace):
    """The namespace's Events that tell why things wait, read by one run every few seconds and
    shared by the runs of all its waiting jobs meanwhile: each read costs the API server the
    namespace's whole Event history (see `telling_events`)."""
    key = f"telling-events:{namespace}"
    events = cache.get(key)
    if events is None:
        events = telling_events(get_cluster(), namespace)
        cache.set(key, events, timeout=PENDING_REASON_EVERY)
    return events


def _set(job, **fields):
    """Write observed status with a conditional update; note state changes as events and let
    queued jobs in when GPUs were released. True when the row was updated."""
    old = job.state
    changed = {k: v for k, v in fields.items() if getattr(job, k) != v}
    if not changed:
        return False
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
        # Ended: its quota is freed by a run once its pods stop (`_release_quota`), the run
        # that wrote this or the one the collector sends when it writes a job's end.
    return bool(updated)


def _delete(job):
    """Remove everything the job owns, then its row. A job holding quota keeps it until its
    pods no longer count in the tenant's ResourceQuota (a stopping pod counts until its grace
    period ends, 30 s by default): the next job admitted sooner would have its pods refused by
    the ResourceQuota while Volcano already took its gang, half-created."""
    cluster = get_cluster()
    _remove_job_objects(cluster, job, ("bus.volcano.sh/v1alpha1", "Command"), *ENDPOINT_KINDS)
    if job.holds_quota:
        _pods_stopped(job)
    tenant_id = job.tenant_id
    with transaction.atomic():
        release_for_job(job)
        job.delete()
    admit(tenant_id)


def _data_pvc(volume):
    return build_data_pvc(
        volume.name,
        volume.tenant.namespace,
        volume.tenant.slug,
        volume.size_gib,
        volume.storage_class,
    )


@reconciler(
    "data-volume", DataVolume, name="jobs.reconcile_data_volume", select_related=("tenant",)
)
def reconcile_data_volume(volume):
    """The data volume's PVC, or its removal when deletion was asked. An archived tenant's
    went with its namespace: its row goes too."""
    cluster = get_cluster()
    if volume.tenant.is_archived:
        Job.objects.filter(data_volume=volume).update(data_volume=None)
        volume.delete()
    elif volume.delete_requested:
        cluster.delete("v1", "PersistentVolumeClaim", volume.name, volume.tenant.namespace)
        # Finished jobs keep the volume's name in their spec; they stop pointing at the row.
        Job.objects.filter(data_volume=volume).update(data_volume=None)
        volume.delete()
    else:
        cluster.apply_one(_data_pvc(volume))


@shared_task(name="jobs.resync_jobs", ignore_result=True)
def resync_jobs(everything=False):
    """Re-enqueue the jobs whose state the collector's watches do not follow (waiting ones:
    why they wait is read from Events) and those being deleted, and admit what fits. Every job
    the cluster holds or should hold only when `everything` (the slower full resync): running
    jobs are followed by the collector's watch on Volcano jobs, and a resync of them all every
    few seconds kept the workers busy in proportion to the cluster's size."""
    holding = Job.objects.holding()
    if not everything:  # waiting ones, and ended ones whose pods were still stopping
        holding = holding.filter(state__in=(JobState.SUBMITTING, JobState.PENDING, *FINISHED))
        tick = int(time.time() // settings.JOB_SYNC_INTERVAL)
        if tick % LONG_WAIT_EVERY:  # jobs that have waited long are re-read less often
            holding = holding.filter(submitted_at__gte=timezone.now() - LONG_WAIT)
    resync("jobs.reconcile_job", holding.values_list("pk", flat=True))
    resync(
        "jobs.reconcile_job", Job.objects.filter(delete_requested=True).values_list("pk", flat=True)
    )
    # Cancelled while they waited, their volumes made ahead not yet removed (the run their
    # cancel sent was lost): those volumes still count against the tenant's storage.
    left_ahead = Job.objects.filter(
        state__in=FINISHED, submitted_at__isnull=True, volumes_ahead_at__isnull=False
    )
    resync("jobs.reconcile_job", left_ahead.values_list("pk", flat=True))
    for tenant_id in (
        Job.objects.filter(state=JobState.QUEUED).values_list("tenant_id", flat=True).distinct()
    ):
        admit(tenant_id)
    resync("jobs.reconcile_data_volume", DataVolume.objects.values_list("pk", flat=True))
    if everything:
        note_gone_workspaces()


def note_gone_workspaces():
    """Finished jobs whose workspace claim is gone from the cluster (deleted by hand, or a
    cluster rebuilt while the collector was away) no longer count its storage: one LIST of the
    portal's claims per tenant with such jobs, with the full resync."""
    by_tenant = {}
    finished = _counted_finished().select_related("tenant")
    for job in finished.only("name", "storage_gib", "tenant__slug"):  # not their specs
        by_tenant.setdefault(job.tenant, []).append(job)
    for tenant, jobs in by_tenant.items():
        listed = get_cluster().list(
            "v1", "PersistentVolumeClaim", namespace=tenant.namespace, labels=portal_labels()
        )
        held = {reduce_claim(claim)["name"] for claim in listed}
        _workspaces_gone(tenant, [job for job in jobs if workspace_claim(job.name) not in held])


def workspace_deleted(tenant_slug, job_name, claim):
    """The collector saw a claim of the portal's deleted: if it was a finished job's
    workspace, its storage no longer counts (a job still running gets it back from its run)."""
    if claim != workspace_claim(job_name):
        return  # its data volume's, or its SSH keys'
    finished = _counted_finished().filter(tenant__slug=tenant_slug, name=job_name)
    job = finished.select_related("tenant").first()
    if job is not None:
        _workspaces_gone(job.tenant, [job])


def _counted_finished():
    """Finished jobs whose workspace still counts. Not those cancelled in the portal's queue:
    the portal removes the volumes made ahead for them itself."""
    return Job.objects.filter(
        state__in=FINISHED,
        submitted_at__isnull=False,
        workspace_gone_at__isnull=True,
        delete_requested=False,
    )


def _workspaces_gone(tenant, jobs):
    now = timezone.now()
    for job in jobs:
        if Job.objects.filter(pk=job.pk, workspace_gone_at__isnull=True).update(
            workspace_gone_at=now
        ):
            JobEvent.objects.create(
                job=job,
                kind="workspace-gone",
                message=(
                    f"Its workspace volume ({job.storage_gib} GiB) was deleted outside the "
                    "portal; it no longer counts against the tenant's storage."
                ),
            )
    if jobs:
        admit(tenant.pk)  # what waited for that storage may go now


@shared_task(name="jobs.close_direct_endpoints", ignore_result=True)
def close_direct_endpoints(tenant_id):
    """A platform admin took a tenant's direct exposure away: close what it exposed so."""
    endpoints.close_direct(tenant_id)


@shared_task(name="jobs.reclaim_endpoints", ignore_result=True)
def reclaim_endpoints():
    """Remove the Services and routes of expired endpoints (forward-auth already denies them
    from the moment they expire), and keep the router's fallback for closed ones."""
    endpoints.reclaim_expired()
    ensure_router_fallback()


def ensure_router_fallback():
    """Apply the router's fallback for endpoint hosts no route serves, and prune one left by
    another routing driver or router namespace (even when the apply fails). Without it the
    router answers a closed endpoint with its own bare 404; a failure here is logged and tried
    again on the next run."""
    desired = endpoints.fallback_objects()
    cluster = get_cluster()
    try:
        cluster.apply(desired)
    except K8sError:
        logger.exception(
            "Could not apply the router's fallback for closed endpoints in namespace %s; "
            "a closed endpoint shows the router's own 404 until it is applied",
            settings.ROUTER_NAMESPACE,
        )
    try:
        cluster.prune(
            labels=portal_labels(component=FALLBACK_COMPONENT),
            keep={ObjectRef.of(obj) for obj in desired},
            kinds=ROUTE_KINDS,
        )
    except K8sError:
        logger.exception("Could not prune the router's fallbacks left by another driver")
