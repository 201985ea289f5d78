"""The portal's own queue in front of Volcano (like Kueue's admission): jobs beyond the tenant's
GPU, CPU, memory or storage quota, its member cap or its running-job limit wait as `queued` and
are submitted in order as quota frees up. Admission runs with the tenant row locked, so
concurrent launches can never put more into the cluster than the quota allows; so the
ResourceQuota and the Volcano queue (both set to the same quota) never refuse an admitted job.
The next quota's worth of waiting jobs gets its volumes ahead, within the storage quota."""

from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from core.reconcile import enqueue_all
from tenants.models import Tenant

from .choices import JobState
from .models import DataVolume, Job


def admit_locked(tenant):
    """Submit the queued jobs that fit, oldest first, and prepare the volumes of those next in
    line. Call with the tenant row locked."""
    holding = Job.objects.filter(tenant=tenant).holding()
    totals = holding.aggregate(
        gpus=Sum("gpus"), cpu=Sum("cpu_millicores"), mem=Sum("memory_mib"), jobs=Count("id")
    )
    used, running = totals["gpus"] or 0, totals["jobs"]
    cpu, memory = totals["cpu"] or 0, totals["mem"] or 0
    per_owner = dict(holding.values("owner").annotate(g=Sum("gpus")).values_list("owner", "g"))
    storage, pvcs = storage_in_use(tenant)
    admitted, waiting, blocked = [], [], False
    queued = Job.objects.filter(
        tenant=tenant, state=JobState.QUEUED, cancel_requested=False, delete_requested=False
    ).order_by("queued_at", "id")
    queued = queued.only(
        "gpus", "cpu_millicores", "memory_mib", "storage_gib", "owner", "volumes_ahead_at"
    )
    for job in queued.iterator(chunk_size=100):
        if blocked and len(waiting) >= tenant.max_running_jobs:
            break  # no more are admitted, nor get their volumes ahead
        # Volumes prepared ahead are counted in storage already.
        disk, claims = (0, 0) if job.volumes_ahead_at else (job.storage_gib, 1)
        blocked = blocked or (
            running >= tenant.max_running_jobs
            or used + job.gpus > tenant.gpu_quota
            or cpu + job.cpu_millicores > tenant.cpu_quota * 1000
            or memory + job.memory_mib > tenant.memory_quota_gib * 1024
            or storage + disk > tenant.storage_quota_gib
            or pvcs + claims > tenant.pvc_quota
        )
        if blocked:
            waiting.append(job)  # strict order: nobody overtakes the head of the tenant's queue
            continue
        cap = tenant.member_gpu_cap
        if cap is not None and per_owner.get(job.owner_id, 0) + job.gpus > cap:
            waiting.append(job)  # this member is at their cap; teammates' jobs may still go
            continue
        admitted.append(job.pk)
        used, running = used + job.gpus, running + 1
        cpu, memory = cpu + job.cpu_millicores, memory + job.memory_mib
        storage, pvcs = storage + disk, pvcs + claims
        per_owner[job.owner_id] = per_owner.get(job.owner_id, 0) + job.gpus
    now = timezone.now()
    if admitted:
        Job.objects.filter(pk__in=admitted).update(state=JobState.SUBMITTING, submitted_at=now)
    ahead = volumes_ahead(tenant, waiting, storage, pvcs)
    if ahead:
        Job.objects.filter(pk__in=ahead).update(volumes_ahead_at=now)
    enqueue_all("jobs.reconcile_job", admitted + ahead)
    return admitted


def volumes_ahead(tenant, waiting, storage, pvcs):
    """Of the jobs waiting in line, those whose volumes are to be created now: the next
    quota's worth (in GPUs, and in jobs the tenant may run at once), as far as the storage
    quota lets, in order. Their claims bind while they wait, which Volcano's own queue gives
    jobs handed to it directly."""
    ahead, gpus = [], 0
    for job in waiting[: tenant.max_running_jobs]:
        gpus += job.gpus
        if gpus > tenant.gpu_quota:
            break
        if job.volumes_ahead_at:
            continue
        if storage + job.storage_gib > tenant.storage_quota_gib or pvcs + 1 > tenant.pvc_quota:
            break
        storage, pvcs = storage + job.storage_gib, pvcs + 1
        ahead.append(job.pk)
    return ahead


@transaction.atomic
def admit(tenant_id):
    tenant = Tenant.objects.select_for_update().get(pk=tenant_id)
    return admit_locked(tenant)


def storage_in_use(tenant):
    """(GiB, PVCs) the tenant's volumes take: the workspaces of jobs submitted or prepared ahead
    and not yet deleted, and its data volumes, as the ResourceQuota will count them."""
    with_claims = Q(submitted_at__isnull=False) | Q(volumes_ahead_at__isnull=False)
    workspaces = Job.objects.filter(with_claims, tenant=tenant).aggregate(
        gib=Sum("storage_gib"), n=Count("id")
    )
    data = DataVolume.objects.filter(tenant=tenant, delete_requested=False).aggregate(
        gib=Sum("size_gib"), n=Count("id")
    )
    return ((workspaces["gib"] or 0) + (data["gib"] or 0), workspaces["n"] + data["n"])


def queue_position(job):
    """1 for the head of the tenant's queue; None when the job is not queued."""
    if job.state != JobState.QUEUED:
        return None
    ahead = Job.objects.filter(
        tenant_id=job.tenant_id, state=JobState.QUEUED, queued_at__lt=job.queued_at
    ).count()
    return ahead + 1


def free_gpus(tenant):
    used = Job.objects.filter(tenant=tenant).holding().aggregate(g=Sum("gpus"))["g"] or 0
    return max(tenant.gpu_quota - used, 0)
