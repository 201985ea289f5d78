"""The portal's own queue in front of Volcano (like Kueue's admission): jobs beyond the tenant's
GPU, CPU, memory or storage quota, its member cap or its running-job limit wait as `queued` and
are submitted in order as quota frees up. Admission runs with the tenant row locked, so
concurrent launches can never put more into the cluster than the quota allows; so the
ResourceQuota and the Volcano queue (both set to the same quota) never refuse an admitted job."""

from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

from core.reconcile import enqueue_all
from tenants.models import Tenant

from .choices import JobState
from .models import DataVolume, Job


def admit_locked(tenant):
    """Submit the queued jobs that fit, oldest first. Call with the tenant row locked."""
    holding = Job.objects.filter(tenant=tenant).holding()
    totals = holding.aggregate(
        gpus=Sum("gpus"), cpu=Sum("cpu_millicores"), mem=Sum("memory_mib"), jobs=Count("id")
    )
    used, running = totals["gpus"] or 0, totals["jobs"]
    cpu, memory = totals["cpu"] or 0, totals["mem"] or 0
    per_owner = dict(holding.values("owner").annotate(g=Sum("gpus")).values_list("owner", "g"))
    storage, pvcs = storage_in_use(tenant)
    admitted = []
    queued = Job.objects.filter(
        tenant=tenant, state=JobState.QUEUED, cancel_requested=False, delete_requested=False
    ).order_by("queued_at", "id")
    for job in queued:
        if (
            running >= tenant.max_running_jobs
            or used + job.gpus > tenant.gpu_quota
            or cpu + job.cpu_millicores > tenant.cpu_quota * 1000
            or memory + job.memory_mib > tenant.memory_quota_gib * 1024
            or storage + job.storage_gib > tenant.storage_quota_gib
            or pvcs + 1 > tenant.pvc_quota
        ):
            break  # strict order: nobody overtakes the head of the tenant's queue
        cap = tenant.member_gpu_cap
        if cap is not None and per_owner.get(job.owner_id, 0) + job.gpus > cap:
            continue  # this member is at their cap; teammates' jobs may still go
        admitted.append(job.pk)
        used, running = used + job.gpus, running + 1
        cpu, memory = cpu + job.cpu_millicores, memory + job.memory_mib
        storage, pvcs = storage + job.storage_gib, pvcs + 1
        per_owner[job.owner_id] = per_owner.get(job.owner_id, 0) + job.gpus
    if admitted:
        Job.objects.filter(pk__in=admitted).update(
            state=JobState.SUBMITTING, submitted_at=timezone.now()
        )
        enqueue_all("jobs.reconcile_job", admitted)
    return admitted


@transaction.atomic
def admit(tenant_id):
    tenant = Tenant.objects.select_for_update().get(pk=tenant_id)
    return admit_locked(tenant)


def storage_in_use(tenant):
    """(GiB, PVCs) the tenant's volumes take: the workspaces of submitted jobs not yet deleted,
    and its data volumes, as the ResourceQuota will count them."""
    workspaces = Job.objects.filter(tenant=tenant, submitted_at__isnull=False).aggregate(
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
