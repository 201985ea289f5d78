"""Writes to jobs, templates and data volumes: validated, atomic, audited, reconciled."""

import secrets
from dataclasses import asdict, replace

from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from k8s_adapters.errors import K8sError
from k8s_adapters.quantity import to_decimal
from networking import attach
from portal.k8s import get_cluster
from portal.models import SSHKey
from portal.reconcile import enqueue
from tenants.models import Tenant
from tenants.services import record

from . import endpoints
from . import spec as specs
from .admission import admit_locked
from .choices import JobState
from .models import DataVolume, Job, JobEvent, JobTemplate, JobTemplateVersion


def _reconcile(job):
    from .tasks import reconcile_job

    enqueue(reconcile_job, job.pk)


def active_jobs_description(tenant):
    """For tenant archiving: the portal's jobs that still hold or wait for GPUs."""
    return [f"job {j.name} ({j.state})" for j in Job.objects.filter(tenant=tenant).active()]


def node_gpu_facts():
    """(largest allocatable GPUs on one node, set of GPU products), cached briefly; None when
    the cluster cannot be read."""
    facts = cache.get("node-gpu-facts")
    if facts is None:
        try:
            nodes = get_cluster().list("v1", "Node")
        except K8sError:
            return None
        gpus = [
            int(to_decimal((n.get("status") or {}).get("allocatable", {}).get("nvidia.com/gpu", 0)))
            for n in nodes
        ]
        products = {
            (n["metadata"].get("labels") or {}).get("nvidia.com/gpu.product") for n in nodes
        } - {None}
        facts = (max(gpus, default=0), sorted(products))
        cache.set("node-gpu-facts", facts, 30)
    return facts[0], set(facts[1])


def scheduling_warnings(spec):
    """What would keep the job from ever being scheduled, as warnings (it may still be queued)."""
    facts = node_gpu_facts()
    if facts is None:
        return []
    largest, products = facts
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


def _check_quota(tenant, owner, spec):
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


def generate_name(prefix):
    return f"{prefix[:40]}-{secrets.token_hex(3)}"


def resolve(tenant, owner, *, name, data, data_volume=None):
    """Validate a launch into a JobSpec, raising one ValidationError with every problem keyed
    by field."""
    errors = {}
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


def launch_job(
    tenant,
    owner,
    *,
    actor,
    template_version=None,
    overrides=None,
    spec_data=None,
    name="",
    data_volume=None,
):
    """Create a job (queued) and admit what fits. Returns (job, warnings)."""
    if template_version is not None:
        data = specs.apply_overrides(
            template_version.spec, overrides or {}, template_version.overridable
        )
        name = name or generate_name(template_version.template.name)
    else:
        data, name = spec_data, name or generate_name("job")
    spec = resolve(tenant, owner, name=name, data=data, data_volume=data_volume)
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
        if tenant.is_archived:
            raise ValidationError("This tenant is archived; it cannot run jobs.")
        _check_quota(tenant, owner, spec)
        if Job.objects.filter(tenant=tenant, name=name).exists():
            raise ValidationError(
                {
                    "name": [
                        ValidationError(
                            f"A job named '{name}' already exists in {tenant.slug}.",
                            code="duplicate",
                        )
                    ]
                }
            )
        networks = data.get("networks") or []
        pools = attach.validate_requests(tenant, networks, spec.total_replicas)
        try:
            job = Job.objects.create(
                tenant=tenant,
                owner=owner,
                name=name,
                template_version=template_version,
                spec=asdict(spec),
                gpus=spec.total_gpus,
                storage_gib=spec.workspace_gib,
                data_volume=data_volume,
                networks=networks,
                state=JobState.QUEUED,
                queued_at=timezone.now(),
            )
        except IntegrityError as exc:  # a concurrent launch took the name
            raise ValidationError({"name": f"A job named '{name}' already exists."}) from exc
        if networks or spec.ports:
            annotation, env = attach.attach(job, networks, pools, actor=actor)
            env += endpoints.base_path_env(tenant, name, spec.ports)
            spec = replace(spec, networks_annotation=annotation, extra_env=tuple(env))
            job.spec = asdict(spec)
            job.save(update_fields=["spec"])
            endpoints.create_for_job(job, spec.ports)
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
        admit_locked(tenant)
    job.refresh_from_db()
    return job, scheduling_warnings(spec)


def relaunch_job(job, *, actor, name=""):
    """Launch the recorded spec again, exactly as it was (new name)."""
    data = job_spec_as_template(job)
    return launch_job(
        job.tenant,
        actor,
        actor=actor,
        spec_data=data,
        name=name or generate_name(job.name[:40]),
        data_volume=job.data_volume,
        template_version=None,
    )


def job_spec_as_template(job):
    """A stored job spec in the template format `spec.parse` reads."""
    s = job.spec
    return {
        "image": s["image"],
        "command": list(s["command"]),
        "args": list(s["args"]),
        "working_dir": s["working_dir"],
        "env": dict(s["env"]),
        "tasks": [{**t, "policies": list(t["policies"])} for t in s["tasks"]],
        "min_available": s["min_available"],
        "max_retry": s["max_retry"],
        "ttl_seconds_after_finished": s["ttl_seconds_after_finished"],
        "policies": list(s["policies"]),
        "plugins": list(s["plugins"]),
        "network_topology": (
            {"mode": s["topology_mode"], "highest_tier_allowed": s["topology_highest_tier"]}
            if s["topology_mode"]
            else {}
        ),
        "expose": list(s["ports"]),
        "volumes": {"workspace_gib": s["workspace_gib"], "storage_class": s["storage_class"]},
        "networks": list(job.networks),
    }


@transaction.atomic
def cancel_job(job, *, actor):
    job = Job.objects.select_for_update().get(pk=job.pk)
    if job.is_finished or job.cancel_requested:
        return job
    job.cancel_requested = True
    fields = ["cancel_requested"]
    if job.state == JobState.QUEUED:  # never reached the cluster
        job.state, job.finished_at = JobState.CANCELLED, timezone.now()
        fields += ["state", "finished_at"]
    job.save(update_fields=fields)
    JobEvent.objects.create(job=job, kind="cancel", message=f"Cancelled by {actor.username}.")
    record(actor, "job.cancel", job, tenant=job.tenant)
    _reconcile(job)
    return job


@transaction.atomic
def delete_job(job, *, actor, delete_data=False):
    """Remove every object the job owns (by label) and then the record; the data volume is kept
    unless asked."""
    job = Job.objects.select_for_update().get(pk=job.pk)
    job.delete_requested = True
    job.save(update_fields=["delete_requested"])
    record(
        actor, "job.delete", job, tenant=job.tenant, before={"name": job.name, "state": job.state}
    )
    if delete_data and job.data_volume_id:
        delete_data_volume(job.data_volume, actor=actor, except_job=job)
    _reconcile(job)
    return job


# -- data volumes ---------------------------------------------------------------------------


def _reconcile_volume(volume):
    from .tasks import reconcile_data_volume

    enqueue(reconcile_data_volume, volume.pk)


@transaction.atomic
def create_data_volume(tenant, *, name, size_gib, actor, storage_class=""):
    volume = DataVolume(
        tenant=tenant, name=name, size_gib=size_gib, storage_class=storage_class, created_by=actor
    )
    volume.full_clean()
    if not 1 <= size_gib <= specs.MAX_DISK_GIB:
        raise ValidationError({"size_gib": f"Use between 1 and {specs.MAX_DISK_GIB} GiB."})
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
def expand_data_volume(volume, *, size_gib, actor):
    volume = DataVolume.objects.select_for_update().get(pk=volume.pk)
    if size_gib <= volume.size_gib:
        raise ValidationError(
            {"size_gib": f"Volumes only grow: give more than {volume.size_gib} GiB."}
        )
    if size_gib > specs.MAX_DISK_GIB:
        raise ValidationError({"size_gib": f"At most {specs.MAX_DISK_GIB} GiB."})
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


@transaction.atomic
def delete_data_volume(volume, *, actor, except_job=None):
    users = (
        Job.objects.filter(data_volume=volume).active().exclude(pk=getattr(except_job, "pk", None))
    )
    if users.exists():
        raise ValidationError(
            f"Data volume {volume.name} is used by active jobs: {', '.join(j.name for j in users)}."
        )
    DataVolume.objects.filter(pk=volume.pk).update(delete_requested=True)
    record(actor, "data_volume.delete", volume, tenant=volume.tenant)
    _reconcile_volume(volume)


# -- templates ------------------------------------------------------------------------------


@transaction.atomic
def save_template(*, name, spec_data, overridable, actor, tenant=None, description=""):
    """Create a template or add a version to it; the spec is validated first."""
    specs.parse(spec_data)
    unknown = set(overridable) - set(specs.OVERRIDABLE)
    if unknown:
        raise ValidationError(
            {
                "overridable": f"Unknown fields: {', '.join(sorted(unknown))}; "
                f"use {', '.join(specs.OVERRIDABLE)}."
            }
        )
    template, created = JobTemplate.objects.get_or_create(
        name=name, tenant=tenant, defaults={"created_by": actor, "description": description}
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
