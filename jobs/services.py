"""Writes to jobs, templates and data volumes: validated, atomic, audited, reconciled."""

from __future__ import annotations

import secrets
from collections.abc import Collection
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q, Subquery, Sum
from django.utils import timezone

from accounts.models import SSHKey
from core.cluster import node_gpus
from core.reconcile import enqueue
from core.unique import taken_is_invalid
from core.validators import whole_number
from k8s_adapters.names import meets_portal_object
from k8s_adapters.volcano import build_job
from networking import attach
from tenants.access import has_role
from tenants.choices import Role
from tenants.models import Tenant
from tenants.services import record

from . import endpoints
from . import spec as specs
from .access import may_delete_volume
from .admission import admit, admit_locked
from .choices import JobState
from .models import DataVolume, Endpoint, Job, JobEvent, JobTemplate, JobTemplateVersion

if TYPE_CHECKING:
    from k8s_adapters.jobspec import JobSpec


def _reconcile(job: Job) -> None:
    enqueue("jobs.reconcile_job", job.pk)


def active_jobs_description(tenant: Tenant) -> list[str]:
    """For tenant archiving: the portal's jobs that still hold or wait for GPUs."""
    return [f"job {j.name} ({j.state})" for j in Job.objects.filter(tenant=tenant).active()]


def data_volumes_description(tenant: Tenant) -> list[str]:
    """For tenant archiving: its data volumes, whose data would go with its namespace; they are
    deleted first, on purpose."""
    volumes = DataVolume.objects.filter(tenant=tenant, delete_requested=False)
    return [
        f"data volume {v.name} ({v.size_gib} GiB; its data would go with the namespace: "
        "delete it first)"
        for v in volumes
    ]


def pool_jobs_description(pool: Any, tenants: list[Tenant] | None) -> list[str]:
    """For IP pool deletion, or a tenant's removal from a pool: the portal's jobs (of these
    tenants) still queued or running on the pool."""
    jobs = Job.objects.active().filter(
        networks__contains=[{"pool": pool.name}], delete_requested=False
    )
    if tenants is not None:
        jobs = jobs.filter(tenant__in=tenants)
    return [f"job {j.tenant.slug}/{j.name} ({j.state})" for j in jobs.select_related("tenant")]


def reservation_job_description(reservation: Any) -> list[str]:
    """For an admin's release of a reserved address, or its reuse by the next job: the job it
    is reserved for, until its pods are gone (a job may end while its pod still stops)."""
    job = reservation.job
    if job is None or not (job.state == JobState.QUEUED or job.holds_quota):
        return []
    return [f"job {job.tenant.slug}/{job.name} ({job.state})"]


def scheduling_warnings(spec: JobSpec) -> list[str]:
    """What would keep the job from ever being scheduled, as warnings (it may still be queued)."""
    summary = node_gpus()
    if summary is None:
        return []
    largest, products = summary.largest, summary.products
    warnings = []
    for task in spec.tasks:
        if task.gpus > largest:
            warnings.append(
                f"Task {task.name} asks for {task.gpus} GPUs per replica but no node "
                f"has more than {largest}; it could never be scheduled."
            )
        if task.gpu_product and task.gpu_product not in products:
            warnings.append(
                f"No node has GPU product {task.gpu_product} (nodes have: "
                f"{', '.join(sorted(products)) or 'none'})."
            )
    return warnings


def _check_compute(tenant: Tenant, spec: JobSpec) -> None:
    """CPU, memory or pods beyond the tenant's whole quota: the ResourceQuota would refuse the
    pods and the Volcano queue would never admit the job."""
    cpu, memory = spec.total_cpu_millicores / 1000, spec.total_memory_mib / 1024
    asked = {
        "cpu": (cpu, tenant.cpu_quota, f"This job's pods ask for {cpu:g} CPU cores together"),
        "memory": (
            memory,
            tenant.memory_quota_gib,
            f"This job's pods ask for {memory:g} GiB of memory together",
        ),
        "replicas": (
            spec.total_replicas,
            tenant.pod_quota,
            f"This job runs {spec.total_replicas} pods (the replicas of all its tasks)",
        ),
    }
    for field, (total, quota, said) in asked.items():
        if total > quota:
            raise ValidationError(
                {
                    f"tasks.{field}": [
                        ValidationError(
                            f"{said} but the tenant's whole quota is {quota}; it could never "
                            "start. Ask for fewer replicas or less per task, or ask a platform "
                            "admin for more.",
                            code="over_quota",
                        )
                    ]
                }
            )


def _check_quota(
    tenant: Tenant, owner: Any, spec: JobSpec, data_volume: DataVolume | None = None
) -> None:
    if spec.total_gpus > tenant.gpu_quota:
        raise ValidationError(
            {
                "gpus": [
                    ValidationError(
                        f"This job asks for {spec.total_gpus} GPUs but the tenant's whole quota is "
                        f"{tenant.gpu_quota}; it could never start. Ask for fewer GPUs.",
                        code="over_quota",
                    )
                ]
            }
        )
    _check_compute(tenant, spec)
    if data_volume is not None:
        # Its data volume counts for as long as it exists, and may not go while the job waits.
        _check_storage_with(tenant, spec, data_volume)
    if spec.workspace_gib > tenant.storage_quota_gib:
        raise ValidationError(
            {
                "volumes.workspace_gib": [
                    ValidationError(
                        f"The workspace disk ({spec.workspace_gib} GiB) is larger than the "
                        f"tenant's whole storage quota ({tenant.storage_quota_gib} GiB).",
                        code="over_quota",
                    )
                ]
            }
        )
    cap = tenant.member_gpu_cap
    if cap is not None and spec.total_gpus > cap:
        raise ValidationError(
            {
                "gpus": [
                    ValidationError(
                        f"This job asks for {spec.total_gpus} GPUs but one member may hold at "
                        f"most {cap} in {tenant.slug}.",
                        code="over_member_cap",
                    )
                ]
            }
        )


def template_version(
    tenant: Tenant, name: str, version: int | str | None = None
) -> JobTemplateVersion:
    """The template version a launch in `tenant` names, for the page and the API alike: the
    tenant's own template of that name wins over a global one; the latest version unless a
    version number is given."""
    name = str(name)
    if "\x00" in name:  # PostgreSQL cannot compare it: no template is named so
        raise ValidationError({"template": f"No template named '{name!a}' in {tenant.slug}."})
    template = JobTemplate.objects.for_tenant(tenant).filter(name=name)
    versions = JobTemplateVersion.objects.filter(template=Subquery(template.values("pk")[:1]))
    if version not in (None, ""):
        number = whole_number(version)
        versions = versions.filter(version=number) if number is not None else versions.none()
    found = versions.select_related("template").order_by("-version").first()  # one query
    if found is not None:
        return found
    template = template.first()
    if template is None:
        retired = JobTemplate.objects.filter(
            Q(tenant__isnull=True) | Q(tenant=tenant), name=name, retired_at__isnull=False
        ).exists()
        said = (
            f"The template '{name}' was retired; choose another template, or ask its owner to "
            "restore it."
            if retired
            else f"No template named '{name}' in {tenant.slug}."
        )
        raise ValidationError({"template": said})
    missing = f"version {version}" if version not in (None, "") else "versions"
    raise ValidationError({"version": f"Template {template.name} has no {missing}."})


def generate_name(prefix: str, suffix: str = "") -> str:
    """A job name from a template's (or a job's) name: a valid one however that name starts
    (a template may be named '7b-sft'; a job's name starts with a letter) and however long."""
    stem = prefix if prefix[:1].isalpha() else f"job-{prefix}"
    if meets_portal_object(f"{stem[:40].rstrip('-')}-"):  # `ep12-...`: named like the portal's
        stem = f"job-{stem}"
    return f"{stem[:40].rstrip('-')}-{suffix or secrets.token_hex(3)}"


def resolve(
    tenant: Tenant, owner: Any, *, name: str, data: Any, data_volume: DataVolume | None = None
) -> JobSpec:
    """Validate a launch into a JobSpec, raising one ValidationError with every problem keyed
    by field."""
    errors: dict[str, list[ValidationError]] = {}
    try:
        specs.validate_job_name(name)
    except ValidationError as exc:
        errors["name"] = exc.error_list
    if data_volume is not None and data_volume.tenant_id != tenant.pk:
        errors["data_volume"] = [ValidationError("That data volume belongs to another tenant.")]
    keys = [k.public_key.strip() for k in SSHKey.objects.filter(user=owner)]
    try:
        spec = specs.parse(
            data,
            name=name,
            namespace=tenant.namespace,
            queue=tenant.queue_name,
            tenant=tenant.slug,
            owner=owner.username,
            ssh_keys=keys,
            data_volume=data_volume.name if data_volume else "",
        )
    except ValidationError as exc:
        errors.update(exc.error_dict)
    if errors:
        raise ValidationError(errors)
    return spec


def _launched_spec(
    tenant: Tenant,
    owner: Any,
    template_version: JobTemplateVersion | None,
    overrides: dict[str, Any] | None,
    spec_data: Any,
    name: str,
    data_volume: DataVolume | None,
    suffix: str = "",
) -> tuple[Any, str, JobSpec]:
    """(the spec's data, the job's name, the spec) a launch asks for, checked."""
    if template_version is not None:
        if data_volume is not None and "data_volume" not in template_version.overridable:
            raise ValidationError(
                {"data_volume": "This template does not allow choosing a data volume."}
            )
        data = specs.apply_overrides(
            template_version.spec, overrides or {}, template_version.overridable
        )
        name = name or generate_name(template_version.template.name, suffix)
    else:
        data, name = spec_data, name or generate_name("job", suffix)
    return data, name, resolve(tenant, owner, name=name, data=data, data_volume=data_volume)


def preview_launch(
    tenant: Tenant,
    owner: Any,
    *,
    template_version: JobTemplateVersion | None = None,
    overrides: dict[str, Any] | None = None,
    spec_data: Any = None,
    name: str = "",
    data_volume: DataVolume | None = None,
) -> dict[str, Any]:
    """What a launch would create, created nowhere (the launch page's Preview and the API's):
    the objects it would apply, its GPUs, and why it might never be scheduled. The launch's
    checks of its spec, its quota and its exposure; not those that take locks."""
    _, _, spec = _launched_spec(
        tenant, owner, template_version, overrides, spec_data, name, data_volume, "preview"
    )
    _check_quota(tenant, owner, spec, data_volume)
    endpoints.check_exposure(tenant, spec.ports)
    return {
        "objects": build_job(spec),
        "gpus": spec.total_gpus,
        "warnings": scheduling_warnings(spec),
    }


def job_manifests(job: Job) -> list[dict[str, Any]]:
    """Everything the job owns in the cluster, as the reconciler would apply it."""
    return [*build_job(job.job_spec()), *endpoints.objects(endpoints.specs(job))]


def launch_job(
    tenant: Tenant,
    owner: Any,
    *,
    actor: Any,
    template_version: JobTemplateVersion | None = None,
    overrides: dict[str, Any] | None = None,
    spec_data: Any = None,
    name: str = "",
    data_volume: DataVolume | None = None,
    relaunched_from: JobTemplateVersion | None = None,
) -> tuple[Job, list[str]]:
    """Create a job (queued) and admit what fits. Returns (job, warnings). A relaunch gives
    the spec recorded and the template version it came from (recorded, not applied)."""
    data, name, spec = _launched_spec(
        tenant, owner, template_version, overrides, spec_data, name, data_volume
    )
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update(no_key=True).get(pk=tenant.pk)
        if tenant.is_archived:
            raise ValidationError("This tenant is archived; it cannot run jobs.")
        if data_volume is not None:  # under the tenant's lock, which its delete takes too
            _check_volume_kept(data_volume)
        _check_quota(tenant, owner, spec, data_volume)
        endpoints.check_exposure(tenant, spec.ports)
        networks = data.get("networks") or []
        pools = attach.validate_requests(tenant, networks, spec.total_replicas)
        job = Job(
            tenant=tenant,
            owner=owner,
            name=name,
            template_version=template_version or relaunched_from,
            spec=spec.to_dict(),
            gpus=spec.total_gpus,
            cpu_millicores=spec.total_cpu_millicores,
            memory_mib=spec.total_memory_mib,
            pods=spec.total_replicas,
            storage_gib=spec.workspace_gib,
            data_volume=data_volume,
            networks=networks,
            state=JobState.QUEUED,
            queued_at=timezone.now(),
        )
        admit_locked(tenant, arriving=job)  # inserted as admission decided, not updated after
        try:
            with transaction.atomic():  # a savepoint: the name's holder is read after a refusal
                job.save(force_insert=True)
        except IntegrityError as exc:  # the constraint decides, race-free
            if "job_name_per_tenant" not in str(exc):
                raise
            taken = f"A job named '{name}' already exists in {tenant.slug}."
            if Job.objects.filter(tenant=tenant, name=name, delete_requested=True).exists():
                taken = (
                    f"The job named '{name}' in {tenant.slug} is still being deleted while its "
                    "pods stop; launch it again in a minute, or pick another name."
                )
            raise ValidationError({"name": [ValidationError(taken, code="duplicate")]}) from exc
        if networks or spec.ports:
            annotation, env = attach.attach(job, networks, pools, actor=actor)
            env += endpoints.url_env(_create_endpoints(job, spec))
            spec = replace(spec, networks_annotation=annotation, extra_env=tuple(env))
            job.spec = spec.to_dict()
            job.save(update_fields=["spec"])
        JobEvent.objects.create(job=job, kind="queued", message=f"Launched by {actor.username}.")
        record(
            actor,
            "job.launch",
            job,
            tenant=tenant,
            after={
                "name": name,
                "gpus": spec.total_gpus,
                "template": str(template_version) if template_version else "",
            },
        )
        if job.submitted_at or job.volumes_ahead_at:
            _reconcile(job)
    return job, scheduling_warnings(spec)


def _create_endpoints(job: Job, spec: JobSpec) -> list[Endpoint]:
    try:
        with transaction.atomic():
            return endpoints.create_for_job(job, spec.ports)
    except IntegrityError as exc:  # two names met in one host label: refuse, never share
        raise ValidationError(
            {
                "name": (
                    f"An endpoint of another job already has the host name of '{job.name}'; "
                    "choose another job name."
                )
            }
        ) from exc


def relaunch_job(job: Job, *, actor: Any, name: str = "") -> tuple[Job, list[str]]:
    """Launch the recorded spec again, exactly as it was (new name). One whose data volume was
    deleted since is refused: without it the job would run without /data, its outputs lost."""
    spec = job.job_spec()
    if spec.data_volume and job.data_volume is None:
        raise ValidationError(
            {
                "data_volume": f"Its data volume {spec.data_volume} was deleted; launch it from "
                "its template with another volume, or none."
            }
        )
    data = spec.to_template(job.networks)
    return launch_job(
        job.tenant,
        actor,
        actor=actor,
        spec_data=data,
        name=name or generate_name(job.name[:40]),
        data_volume=job.data_volume,
        relaunched_from=job.template_version,
    )


@transaction.atomic
def cancel_job(job: Job, *, actor: Any) -> Job:
    job = Job.objects.select_for_update().get(pk=job.pk)
    if job.is_finished or job.cancel_requested:
        return job
    job.cancel_requested = True
    fields = ["cancel_requested"]
    if job.state == JobState.QUEUED:  # never reached the cluster
        job.state, job.finished_at = JobState.CANCELLED, timezone.now()
        fields += ["state", "finished_at"]
        # it may have held the head of the queue: those behind it go now (the tenant is
        # locked after the commit, in admission's order)
        tenant_id = job.tenant_id
        transaction.on_commit(lambda: admit(tenant_id))
    job.save(update_fields=fields)
    JobEvent.objects.create(job=job, kind="cancel", message=f"Cancelled by {actor.username}.")
    record(actor, "job.cancel", job, tenant=job.tenant)
    _reconcile(job)
    return job


@transaction.atomic
def delete_job(job: Job, *, actor: Any, delete_data: bool = False) -> Job:
    """Remove every object the job owns (by label) and then the record; the data volume is kept
    unless asked."""
    volume = job.data_volume if delete_data else None
    if volume is not None and not may_delete_volume(actor, volume):
        said = (
            f"Data volume {volume.name} is {_creator(volume)}'s: only they or a tenant admin "
            "delete it. Delete the job and keep the volume."
        )
        raise ValidationError({"delete_data": [ValidationError(said, code="not_yours")]})
    if delete_data and job.data_volume_id:
        # The tenant before the job, as admission takes them (its volume's delete takes the
        # tenant): the other order could deadlock with an admission of this job meanwhile.
        Tenant.objects.select_for_update(no_key=True).filter(pk=job.tenant_id).first()
    job = Job.objects.select_for_update().get(pk=job.pk)
    job.delete_requested = True
    job.save(update_fields=["delete_requested"])
    record(
        actor, "job.delete", job, tenant=job.tenant, before={"name": job.name, "state": job.state}
    )
    if delete_data and job.data_volume_id:
        # data_volume_id is set, so data_volume is not None (mypy cannot tell)
        delete_data_volume(job.data_volume, actor=actor, except_job=job)  # type: ignore[arg-type]
    _reconcile(job)
    return job


# -- data volumes ---------------------------------------------------------------------------


def _creator(volume: DataVolume) -> str:
    return volume.created_by.username if volume.created_by else "someone else"


def _reconcile_volume(volume: DataVolume) -> None:
    enqueue("jobs.reconcile_data_volume", volume.pk)


def _check_volume_fits(tenant: Tenant, size_gib: int, *, replacing: int = 0) -> None:
    """Data volumes alone may not outgrow the tenant's storage quota: such a volume could never
    be created, and the jobs waiting for it would wait forever."""
    volumes = DataVolume.objects.filter(tenant=tenant, delete_requested=False)
    taken = (volumes.aggregate(gib=Sum("size_gib"))["gib"] or 0) - replacing
    if taken + size_gib > tenant.storage_quota_gib:
        room = max(tenant.storage_quota_gib - taken, 0)
        raise ValidationError(
            {
                "size_gib": (
                    f"The tenant's storage quota is {tenant.storage_quota_gib} GiB and its data "
                    f"volumes take {taken} GiB: at most {room} GiB more fit. Ask a tenant admin "
                    "for more, or delete a volume."
                )
            }
        )


@transaction.atomic
def create_data_volume(
    tenant: Tenant, *, name: str, size_gib: int, actor: Any, storage_class: str = ""
) -> DataVolume:
    # one creation at a time
    tenant = Tenant.objects.select_for_update(no_key=True).get(pk=tenant.pk)
    if tenant.is_archived:
        raise ValidationError("This tenant is archived; it cannot get new volumes.")
    taken = f"A volume named '{name}' already exists in {tenant.slug}."
    if DataVolume.objects.filter(tenant=tenant, name=name).exists():
        raise ValidationError({"name": [ValidationError(taken, code="duplicate")]})
    volume = DataVolume(
        tenant=tenant, name=name, size_gib=size_gib, storage_class=storage_class, created_by=actor
    )
    volume.full_clean()
    if name.endswith(specs.RESERVED_VOLUME_SUFFIXES):
        raise ValidationError(
            {
                "name": (
                    f"Names ending in {' or '.join(specs.RESERVED_VOLUME_SUFFIXES)} belong to "
                    "jobs' own disks and keys; choose another name."
                )
            }
        )
    if not 1 <= size_gib <= specs.MAX_DISK_GIB:
        raise ValidationError({"size_gib": f"Use between 1 and {specs.MAX_DISK_GIB} GiB."})
    _check_volume_fits(tenant, size_gib)
    with taken_is_invalid("name", taken):
        volume.save()
    record(
        actor,
        "data_volume.create",
        volume,
        tenant=tenant,
        after={"name": name, "size_gib": size_gib},
    )
    _reconcile_volume(volume)
    return volume


@transaction.atomic
def expand_data_volume(volume: DataVolume, *, size_gib: int, actor: Any) -> DataVolume:
    # The tenant first, then the volume: the order every writer of both takes (a delete of the
    # volume meanwhile would otherwise deadlock with this).
    tenant = Tenant.objects.select_for_update(no_key=True).get(pk=volume.tenant_id)
    volume = DataVolume.objects.select_for_update().get(pk=volume.pk)
    if size_gib <= volume.size_gib:
        raise ValidationError(
            {"size_gib": f"Volumes only grow: give more than {volume.size_gib} GiB."}
        )
    if size_gib > specs.MAX_DISK_GIB:
        raise ValidationError({"size_gib": f"At most {specs.MAX_DISK_GIB} GiB."})
    _check_volume_fits(tenant, size_gib, replacing=volume.size_gib)
    before = volume.size_gib
    volume.size_gib = size_gib
    volume.save(update_fields=["size_gib"])
    record(
        actor,
        "data_volume.expand",
        volume,
        tenant=volume.tenant,
        before={"size_gib": before},
        after={"size_gib": size_gib},
    )
    _reconcile_volume(volume)
    return volume


def _check_storage_with(tenant: Tenant, spec: JobSpec, volume: DataVolume) -> None:
    disk = spec.workspace_gib + volume.size_gib
    if disk > tenant.storage_quota_gib:
        said = (
            f"The workspace disk ({spec.workspace_gib} GiB) and data volume {volume.name} "
            f"({volume.size_gib} GiB) together are larger than the tenant's whole storage quota "
            f"({tenant.storage_quota_gib} GiB); it could never start. Ask for a smaller workspace."
        )
        raise ValidationError({"volumes.workspace_gib": [ValidationError(said, code="over_quota")]})
    if tenant.pvc_quota < 2:
        said = (
            f"A job with a data volume needs 2 volume claims, and {tenant.slug} may have "
            f"{tenant.pvc_quota}; it could never start."
        )
        raise ValidationError({"data_volume": [ValidationError(said, code="over_quota")]})


def _check_volume_kept(volume: DataVolume) -> None:
    if DataVolume.objects.filter(pk=volume.pk, delete_requested=False).exists():
        return
    said = f"Data volume {volume.name} is being deleted; pick another, or none."
    raise ValidationError({"data_volume": [ValidationError(said, code="deleting")]})


@transaction.atomic
def delete_data_volume(volume: DataVolume, *, actor: Any, except_job: Job | None = None) -> None:
    if not may_delete_volume(actor, volume):
        raise PermissionDenied(
            f"Data volume {volume.name} is {_creator(volume)}'s: only they or an admin of "
            f"{volume.tenant.slug} delete it."
        )
    # Launches attach volumes with the tenant locked: a launch either comes first (and is
    # seen below) or sees this volume being deleted.
    Tenant.objects.select_for_update(no_key=True).filter(pk=volume.tenant_id).first()
    # A job being deleted no longer uses it (its stopping pods keep the claim until they go).
    users = (
        Job.objects.filter(data_volume=volume, delete_requested=False)
        .active()
        .exclude(pk=getattr(except_job, "pk", None))
    )
    if users.exists():
        raise ValidationError(
            f"Data volume {volume.name} is used by active jobs: {', '.join(j.name for j in users)}."
        )
    DataVolume.objects.filter(pk=volume.pk).update(delete_requested=True)
    record(actor, "data_volume.delete", volume, tenant=volume.tenant)
    _reconcile_volume(volume)


# -- templates ------------------------------------------------------------------------------


def may_add_version(template: JobTemplate, actor: Any) -> bool:
    """Whether `actor` may save a new version of `template` (the pages offer it only then): a
    global one is a platform admin's; a tenant's is its creator's or a tenant admin's."""
    tenant = template.tenant
    if tenant is None:
        return bool(actor.is_staff)
    role = tenant.role_of(actor)  # a creator since demoted to viewer no longer changes it
    creator = template.created_by_id == actor.pk and has_role(role, Role.RESEARCHER)
    return creator or has_role(role, Role.ADMIN)


def _check_may_save(template: JobTemplate, created: bool, tenant: Tenant, actor: Any) -> None:
    """A tenant's template is versioned by whoever created it or a tenant admin; one named like
    a global template (which it then replaces in the tenant's launches) is a tenant admin's
    to create. A researcher's save changes no colleague's launches."""
    if has_role(tenant.role_of(actor), Role.ADMIN):
        return
    if created and JobTemplate.objects.filter(tenant__isnull=True, name=template.name).exists():
        raise ValidationError(
            {
                "name": (
                    f"'{template.name}' is a global template; a tenant template of that name "
                    "would replace it in every launch of the tenant. Choose another name, or ask "
                    "a tenant admin."
                )
            }
        )
    if not created and not may_add_version(template, actor):
        owner = template.created_by.username if template.created_by else "someone else"
        raise ValidationError(
            {
                "name": (
                    f"The template '{template.name}' is {owner}'s: only they or a tenant admin "
                    "can add versions. Save yours under another name."
                )
            }
        )


@transaction.atomic
def save_template(
    *,
    name: str,
    spec_data: Any = None,
    overridable: Collection[str],
    actor: Any,
    tenant: Tenant | None = None,
    description: str = "",
    source: str = "",
) -> JobTemplateVersion:
    """Create a template or add a version to it; the spec is validated first. Given as YAML
    text (`source`), the text is kept as written, comments and all, and the editor shows it."""
    if source:
        if spec_data is not None:
            raise ValueError("give the spec as spec_data or as source, not both")
        spec_data = specs.from_yaml(source)
    specs.parse(spec_data)
    unknown = set(overridable) - set(specs.OVERRIDABLE)
    if unknown:
        raise ValidationError(
            {
                "overridable": f"Unknown fields: {', '.join(sorted(unknown))}; "
                f"use {', '.join(specs.OVERRIDABLE)}."
            }
        )
    if tenant is not None:
        # one save at a time
        tenant = Tenant.objects.select_for_update(no_key=True).get(pk=tenant.pk)
        if tenant.is_archived:
            raise ValidationError("This tenant is archived; it cannot get new templates.")
    template, created = JobTemplate.objects.get_or_create(
        name=name, tenant=tenant, defaults={"created_by": actor, "description": description}
    )
    if tenant is not None:
        _check_may_save(template, created, tenant, actor)
    # Versions of one template are numbered in turn: two saves at once wait for each other.
    template = JobTemplate.objects.select_for_update().get(pk=template.pk)
    if template.retired_at is not None:
        raise ValidationError(
            {
                "name": (
                    f"The template '{name}' is retired: restore it first (the Restore button "
                    f"on its page, or POST /api/v1/templates/{template.pk}/restore/), or save "
                    "under another name."
                )
            }
        )
    if not created and description:
        template.description = description
        template.save(update_fields=["description"])
    if created:
        template.full_clean()
    latest = template.latest
    version = JobTemplateVersion.objects.create(
        template=template,
        version=(latest.version + 1) if latest else 1,
        spec=spec_data,
        source=source,
        overridable=list(overridable),
        created_by=actor,
    )
    record(
        actor,
        "template.save",
        version,
        tenant=tenant,
        after={"name": name, "version": version.version},
    )
    return version


def set_template_retired(
    template: JobTemplate, *, retired: bool, actor: Any
) -> tuple[JobTemplate, bool]:
    """Retire a template (no launch is offered it, nor may name it; it takes no versions) or
    restore it; returns it and whether that changed anything. Nothing is deleted: jobs keep the
    version they ran and relaunch from it. It is for whoever may add its versions."""
    if not may_add_version(template, actor):
        raise PermissionDenied(
            "Only platform admins retire or restore global templates."
            if template.tenant_id is None
            else "Only the template's creator or a tenant admin retires or restores it."
        )
    with transaction.atomic():
        template = JobTemplate.objects.select_for_update().get(pk=template.pk)
        changed = (template.retired_at is not None) != retired
        if changed:
            template.retired_at = timezone.now() if retired else None
            template.save(update_fields=["retired_at"])
            record(
                actor,
                "template.retire" if retired else "template.restore",
                template,
                tenant=template.tenant,
                before={"name": template.name, "retired": not retired},
                after={"name": template.name, "retired": retired},
            )
    return template, changed
