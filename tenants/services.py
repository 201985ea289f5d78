"""Writes to tenants and memberships: validated, atomic, audited, reconciled after commit."""

import logging
import re
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.forms.models import model_to_dict
from django.utils import timezone

from core.cluster import get_cluster, node_gpus
from core.edits import refuse_changed_meanwhile, refuse_stale
from core.locks import DEPARTMENTS, GUARANTEES, take_turn
from core.models import SyncState
from core.reconcile import enqueue
from core.unique import taken_is_invalid
from k8s_adapters.errors import K8sError, PermanentK8sError, TransientK8sError
from k8s_adapters.quantity import to_decimal
from k8s_adapters.tenant import (
    GPU,
    QUEUE_API,
    QUOTA_NAME,
    QueueExcess,
    build_queue,
    owning_tenant,
    queue_excess,
    quota_used,
)
from k8s_adapters.volcano import FINISHED_PHASES, read_job

from .choices import MembershipSource, Role, TenantState
from .constants import NAMESPACE_PREFIX, TENANT_FIELDS
from .models import AuditEvent, Membership, Tenant

logger = logging.getLogger(__name__)

# Other apps register callables tenant -> list of descriptions of what keeps it from being
# archived (the jobs app lists its active jobs).
archive_blockers: list[Callable[[Tenant], list[str]]] = []
# And callables tenant (with new quotas, unsaved) -> {field: why it may not be that low}: the
# jobs app says what its admitted jobs hold and what a queued job alone needs.
quota_floors: list[Callable[[Tenant], dict[str, str]]] = []


def tenant_snapshot(tenant: Tenant) -> dict[str, Any]:
    return model_to_dict(tenant, fields=TENANT_FIELDS)


def record(
    actor: Any,
    action: str,
    obj: models.Model,
    *,
    tenant: Tenant | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    actor_name: str | None = None,
) -> AuditEvent:
    return AuditEvent.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_name=actor_name or getattr(actor, "username", "") or "system",
        action=action,
        tenant=tenant,
        object_type=type(obj).__name__,
        object_repr=str(obj)[:200],
        before=before,
        after=after,
    )


def _reconcile(tenant: Tenant) -> None:
    enqueue("tenants.reconcile_tenant", tenant.pk)


# -- checks against the cluster -------------------------------------------------------------


def _read(api_version: str, kind: str, name: str) -> tuple[bool, dict | None]:
    """(whether the cluster answered, the object or None). A refusal to read (the web account
    lacking a right) is logged: the form's check is then skipped, and the reconciler records
    what it finds."""
    try:
        return True, get_cluster().get(api_version, kind, name)
    except TransientK8sError:
        return False, None
    except PermanentK8sError:
        logger.exception("cannot read %s %s to check a tenant form", kind, name)
        return False, None


def _check_names_are_ours(tenant: Tenant) -> None:
    """The tenant's Namespace and Volcano queue are named after its slug: one of those names
    taken by something the portal does not manage for this tenant is never taken over (nor
    deleted when the tenant is archived)."""
    for api_version, kind, name in (
        ("v1", "Namespace", tenant.namespace),
        (QUEUE_API, "Queue", tenant.queue_name),
    ):
        answered, found = _read(api_version, kind, name)
        owner = owning_tenant(found) if answered else None
        if owner is not None and owner != tenant.slug:
            what = "namespace" if kind == "Namespace" else "Volcano queue"
            raise ValidationError(
                {
                    "slug": (
                        f"The {what} '{name}' already exists in the cluster and is not "
                        "managed by the portal for this tenant. Choose another slug."
                    )
                }
            )


# What sets the tenant's Volcano queue: a change of any is checked against its department's.
_QUEUE_SOURCES = (
    "parent_queue",
    "gpu_quota",
    "cpu_quota",
    "memory_quota_gib",
    "queue_deserved_gpus",
    "queue_guarantee_gpus",
)


def _check_parent_queue(tenant: Tenant, before_fields: dict[str, Any] | None = None) -> None:
    """A parent queue is a department's queue that exists in the cluster, never a tenant's own
    (jobs run in leaf queues: one given children would take no more jobs); and the tenant's
    queue fits under it beside its other children, as Volcano's webhook checks, or the
    ResourceQuota would change and the queue not. The other children the portal keeps count as
    saved (their queues may not be applied yet), and department checks take turns: two edits at
    once would each count the other's queue unchanged. Checked when the queue changes only."""
    parent = tenant.parent_queue
    if not parent:
        return
    before_fields = before_fields or {}
    if before_fields and all(getattr(tenant, f) == before_fields.get(f) for f in _QUEUE_SOURCES):
        return
    before = before_fields.get("parent_queue") or ""
    slug = parent.removeprefix(NAMESPACE_PREFIX)
    if (
        parent != before
        and parent.startswith(NAMESPACE_PREFIX)
        and Tenant.objects.filter(slug=slug).exists()
    ):
        raise ValidationError(
            {
                "parent_queue": (
                    f"'{parent}' is the job queue of tenant {slug}; jobs run in "
                    "leaf queues, so name a department's queue instead."
                )
            }
        )
    answered, found = _read(QUEUE_API, "Queue", parent)
    if not answered:
        return
    if found is None:
        raise ValidationError(
            {
                "parent_queue": (
                    f"There is no Volcano queue '{parent}' in the cluster; create the "
                    "department's queue first, or leave this empty."
                )
            }
        )
    take_turn(DEPARTMENTS)
    try:
        queues = get_cluster().list(QUEUE_API, "Queue")
    except K8sError:
        logger.exception("cannot list Volcano queues to check tenant %s", tenant.slug)
        return
    siblings = [  # the department's other queues: those not the portal's as the cluster has them
        q
        for q in queues
        if (q.get("spec") or {}).get("parent") == parent and owning_tenant(q) == ""
    ]
    children = Tenant.objects.active().filter(parent_queue=parent).exclude(pk=tenant.pk)
    siblings += [build_queue(child.to_spec()) for child in children]
    errors: dict[str, str] = {}
    for excess in queue_excess(build_queue(tenant.to_spec()), found, siblings):
        for resource in excess.resources:
            field = _QUEUE_FIELDS[excess.part].get(resource, "parent_queue")
            if field == "queue_deserved_gpus" and tenant.queue_deserved_gpus is None:
                field = "gpu_quota"  # its deserved share is its quota
            errors.setdefault(field, _excess_words(excess, resource, parent))
    if errors:
        raise ValidationError(errors)


# Which field of the form sets each part of the tenant's queue, by resource.
_QUEUE_FIELDS = {
    "capability": {GPU: "gpu_quota", "cpu": "cpu_quota", "memory": "memory_quota_gib"},
    "deserved": {GPU: "queue_deserved_gpus", "cpu": "cpu_quota", "memory": "memory_quota_gib"},
    "guarantee": {GPU: "queue_guarantee_gpus"},
}
_RESOURCE_WORDS = {GPU: "GPUs", "cpu": "CPU", "memory": "memory"}


def _excess_words(excess: QueueExcess, resource: str, parent: str) -> str:
    words = _RESOURCE_WORDS.get(resource, resource)
    limit = excess.limit.get(resource)
    asked = excess.asked.get(resource)
    room = f"allows {limit}" if limit is not None else f"sets no {words}"
    if excess.part == "capability":
        return (
            f"The department queue {parent} {room}; this tenant's queue would hold {asked}. "
            "Lower this, or ask for the department's queue to be raised first."
        )
    return (
        f"The {excess.part} {words} of {parent}'s queues would add up to {asked}, and {parent} "
        f"{room}. Lower this, or ask for the department's queue to be raised first."
    )


def _check_guarantees(tenant: Tenant, before: dict[str, Any] | None = None) -> None:
    """Guaranteed GPUs of all tenants fit in the cluster's: checked when a guarantee is made
    or raised only (one lowered, or an edit of other fields, passes however the cluster
    shrank)."""
    held = (before or {}).get("queue_guarantee_gpus") or 0
    if not tenant.queue_guarantee_gpus or tenant.queue_guarantee_gpus <= held:
        return
    take_turn(GUARANTEES)  # two saves at once would each count the other's guarantee unchanged
    others = (
        Tenant.objects.active().exclude(pk=tenant.pk).values_list("queue_guarantee_gpus", flat=True)
    )
    total = sum(others) + tenant.queue_guarantee_gpus
    summary = node_gpus()
    capacity = summary.total if summary else None
    if capacity is not None and total > capacity:
        raise ValidationError(
            {
                "queue_guarantee_gpus": (
                    f"Guarantees would add up to {total} GPUs but the cluster holds {capacity}; "
                    "at most "
                    f"{max(capacity - sum(others), 0)} can be guaranteed to this tenant."
                )
            }
        )


QUOTA_CHECKS = [
    ("gpu_quota", "requests.nvidia.com/gpu", lambda v: v, "GPUs"),
    ("cpu_quota", "requests.cpu", lambda v: v, "CPU cores"),
    ("memory_quota_gib", "requests.memory", lambda v: v / 1024**3, "GiB of memory"),
    ("storage_quota_gib", "requests.storage", lambda v: v / 1024**3, "GiB of storage"),
    ("pvc_quota", "persistentvolumeclaims", lambda v: v, "volumes"),
    ("pod_quota", "pods", lambda v: v, "pods"),
]


def current_usage(tenant: Tenant) -> dict[str, str]:
    """status.used of the tenant's ResourceQuota, fresh from the cluster when it answers."""
    try:
        quota = get_cluster().get("v1", "ResourceQuota", QUOTA_NAME, tenant.namespace)
    except K8sError:
        return tenant.observed_usage or {}
    return quota_used(quota) or tenant.observed_usage or {}


def _check_not_below_usage(tenant: Tenant, before: dict[str, Any]) -> None:
    lowered = [row for row in QUOTA_CHECKS if getattr(tenant, row[0]) < before[row[0]]]
    cap, was = tenant.member_gpu_cap, before.get("member_gpu_cap")
    narrowed = {row[0] for row in lowered}
    if cap is not None and (was is None or cap < was):  # what a queued job needs may not fit
        narrowed.add("member_gpu_cap")
    if not narrowed:
        return
    used = current_usage(tenant)
    errors: dict[str, str] = {}
    for field, resource, scale, unit in lowered:
        in_use = scale(to_decimal(used.get(resource, 0)))
        if getattr(tenant, field) < in_use:
            errors[field] = (
                f"Cannot lower below current usage: {in_use.normalize():f} {unit} are in use now."
            )
    for check in quota_floors:
        for field, why in check(tenant).items():
            if field in narrowed:
                errors.setdefault(field, why)
    if errors:
        raise ValidationError(errors)


# -- tenants ----------------------------------------------------------------------------------

# Traefik names a Middleware `<namespace>-<name>` across namespaces, and endpoint objects are
# named `ep<id>-...`: tenant `a-ep7-b`'s objects could take the name of one of tenant `a`'s.
# (Checked when a tenant is made: one made before keeps its slug, which never changes.)
_ENDPOINT_LIKE = re.compile(r"-ep[0-9]+(-|$)")


def _check_slug_unlike_endpoints(tenant: Tenant) -> None:
    if _ENDPOINT_LIKE.search(tenant.slug):
        raise ValidationError(
            {
                "slug": "A part 'ep' and a number (like '-ep7-') is how the portal names "
                "endpoints; choose a name without one."
            }
        )


@transaction.atomic
def create_tenant(*, actor: Any, **fields: Any) -> Tenant:
    tenant = Tenant(**fields)
    tenant.full_clean()
    _check_slug_unlike_endpoints(tenant)
    _check_names_are_ours(tenant)
    _check_parent_queue(tenant)
    _check_guarantees(tenant)
    with taken_is_invalid("slug", f"A tenant with the slug '{tenant.slug}' already exists."):
        tenant.save()
    record(actor, "tenant.create", tenant, tenant=tenant, after=tenant_snapshot(tenant))
    _reconcile(tenant)
    return tenant


@transaction.atomic
def update_tenant(
    tenant: Tenant,
    *,
    actor: Any,
    seen: dict[str, Any] | None = None,
    if_match: str | None = None,
    **changes: Any,
) -> Tenant:
    """`seen`: what the editor showed of the changed fields (an edit page); a field another
    admin changed to something else since is refused, with what it is now. `if_match`: the
    tenant's ETag as an API client read it; any change since refuses the whole write (Stale)."""
    tenant = Tenant.objects.select_for_update(no_key=True).get(pk=tenant.pk)
    before = tenant_snapshot(tenant)
    refuse_stale(before, if_match, f"The tenant {tenant.slug}")
    if tenant.is_archived:
        raise ValidationError("This tenant is archived; it cannot be changed.")
    if seen:
        now = {name: getattr(tenant, name) for name in seen}
        refuse_changed_meanwhile(now, seen, changes)  # its row is locked: saves take turns
    changes.pop("slug", None)  # the slug names cluster objects: it never changes
    for name, value in changes.items():
        setattr(tenant, name, value)
    tenant.full_clean()
    _check_not_below_usage(tenant, before)
    _check_parent_queue(tenant, before)
    _check_guarantees(tenant, before)
    after = tenant_snapshot(tenant)
    if after == before:
        return tenant
    tenant.sync_state = SyncState.PENDING
    tenant.save()
    record(actor, "tenant.update", tenant, tenant=tenant, before=before, after=after)
    _reconcile(tenant)
    if before["allow_direct_exposure"] and not tenant.allow_direct_exposure:
        enqueue("jobs.close_direct_endpoints", tenant.pk)  # what it exposed so closes now
    return tenant


def archive_blocked_by(tenant: Tenant) -> list[str]:
    """Descriptions of what keeps this tenant from being archived (active jobs)."""
    blockers = [item for check in archive_blockers for item in check(tenant)]
    cluster = get_cluster()
    try:
        # Only a namespace the portal made for this tenant holds its jobs: one never made, or
        # someone else's of that name (whose jobs are not the tenant's), holds none, and the web
        # may read jobs only where a tenant's run bound its role.
        ours = owning_tenant(cluster.get("v1", "Namespace", tenant.namespace)) == tenant.slug
        vcjobs = (
            cluster.list("batch.volcano.sh/v1alpha1", "Job", namespace=tenant.namespace)
            if ours
            else []
        )
    except K8sError as exc:
        raise ValidationError(f"Cannot check the tenant's jobs in the cluster: {exc}") from exc
    for status in map(read_job, vcjobs):
        if status.phase not in FINISHED_PHASES:
            blockers.append(f"Volcano job {status.name} ({status.phase or 'Pending'})")
    return sorted(set(blockers))


@transaction.atomic
def archive_tenant(tenant: Tenant, *, actor: Any) -> Tenant:
    tenant = Tenant.objects.select_for_update(no_key=True).get(pk=tenant.pk)
    if tenant.is_archived:
        return tenant
    blockers = archive_blocked_by(tenant)
    if blockers:
        raise ValidationError(
            f"Tenant {tenant.slug} cannot be archived yet: {'; '.join(blockers)}. Cancel or "
            "finish its jobs, and delete its data volumes, first."
        )
    before = tenant_snapshot(tenant)
    tenant.state = TenantState.ARCHIVED
    tenant.archived_at = timezone.now()
    tenant.sync_state = SyncState.PENDING
    tenant.save(update_fields=["state", "archived_at", "sync_state"])
    record(
        actor, "tenant.archive", tenant, tenant=tenant, before=before, after=tenant_snapshot(tenant)
    )
    _reconcile(tenant)
    return tenant


# -- memberships ------------------------------------------------------------------------------


def _membership_snapshot(membership: Membership) -> dict[str, str]:
    return {
        "user": membership.user.username,
        "tenant": membership.tenant.slug,
        "role": membership.role,
        "source": membership.source,
    }


def _writable(tenant: Tenant) -> Tenant:
    """The tenant, locked until the transaction ends (member changes of one tenant take turns,
    so two admins demoting each other cannot both succeed); refused when archived."""
    tenant = Tenant.objects.select_for_update(no_key=True).get(pk=tenant.pk)
    if tenant.is_archived:
        raise ValidationError("This tenant is archived; its members cannot be changed.")
    return tenant


def _check_keeps_an_admin(membership: Membership) -> None:
    """A tenant never loses its last admin by a change in the portal: nobody would be left to
    manage its members. (Members from SSO groups follow the provider's claims.)"""
    if membership.role != Role.ADMIN or not membership.user.is_active:
        return
    # A deactivated admin manages nothing: only active ones count.
    others = Membership.objects.filter(
        tenant=membership.tenant_id, role=Role.ADMIN, user__is_active=True
    )
    if not others.exclude(pk=membership.pk).exists():
        raise ValidationError(
            {
                "role": (
                    f"{membership.user.username} is the only active admin of "
                    f"{membership.tenant.slug}; make another member admin first."
                )
            }
        )


@transaction.atomic
def add_member(
    tenant: Tenant, user: Any, role: str, *, actor: Any, source: str = MembershipSource.MANUAL
) -> Membership:
    tenant = _writable(tenant)
    taken = f"{user.username} is already a member of {tenant.slug}."
    if Membership.objects.filter(tenant=tenant, user=user).exists():
        raise ValidationError({"username": taken})
    with taken_is_invalid("username", taken):
        membership = Membership.objects.create(tenant=tenant, user=user, role=role, source=source)
    record(
        actor, "membership.add", membership, tenant=tenant, after=_membership_snapshot(membership)
    )
    return membership


@transaction.atomic
def change_member_role(membership: Membership, role: str, *, actor: Any) -> Membership:
    _writable(membership.tenant)
    current = Membership.objects.select_related("user", "tenant").filter(pk=membership.pk).first()
    if current is None:
        raise ValidationError(f"{membership.user.username} is no longer a member.")
    membership = current
    before = _membership_snapshot(membership)
    if membership.role == role:
        return membership
    if role != Role.ADMIN:
        _check_keeps_an_admin(membership)
    membership.role = role
    membership.save(update_fields=["role"])
    record(
        actor,
        "membership.change",
        membership,
        tenant=membership.tenant,
        before=before,
        after=_membership_snapshot(membership),
    )
    return membership


@transaction.atomic
def remove_member(membership: Membership, *, actor: Any) -> None:
    _writable(membership.tenant)
    current = Membership.objects.select_related("user", "tenant").filter(pk=membership.pk).first()
    if current is None:
        return  # removed meanwhile: what was asked is done
    membership = current
    _check_keeps_an_admin(membership)
    before = _membership_snapshot(membership)
    membership.delete()
    record(actor, "membership.remove", membership, tenant=membership.tenant, before=before)
