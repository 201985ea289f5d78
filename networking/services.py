"""Writes to IP pools and reservations: validated, locked, audited, reconciled after commit."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from core.edits import refuse_changed_meanwhile, refuse_stale
from core.locks import POOL_WRITES, take_turn
from core.reconcile import enqueue, send
from core.unique import taken_is_invalid
from k8s_adapters.errors import K8sError
from tenants.services import record

from . import ipmath
from .allocation import first_free
from .models import POOL_FIELDS, IPPool, IPReservation
from .whereabouts import allocated_now, live_allocations

if TYPE_CHECKING:
    from tenants.models import Tenant


# What other apps know to keep a pool in use (jobs: its jobs still queued or running on it, of
# the given tenants or of every tenant), each naming what it found.
delete_blockers: list[Callable[[IPPool, list[Tenant] | None], list[str]]] = []
# ... and a reserved address in use (jobs: the job it was reserved for, still queued or running).
release_blockers: list[Callable[[IPReservation], list[str]]] = []
SHOWN_BLOCKERS = 10


def snapshot(pool: IPPool) -> dict[str, Any]:
    data = {f: getattr(pool, f) for f in POOL_FIELDS}
    data["tenants"] = sorted(pool.tenants.values_list("slug", flat=True)) if pool.pk else []
    return data


# What a pool's edit page changes: all but its name (which names its cluster objects).
EDITABLE = [*(f for f in POOL_FIELDS if f != "name"), "tenants"]


def shown_values(pool: IPPool) -> dict[str, Any]:
    """What the edit page shows of a pool, the tenants by slug."""
    data = snapshot(pool)
    return {name: data[name] for name in EDITABLE}


def _said(name: str, value: Any) -> Any:
    """A pool's field as an error message says it: lists (tenants, exclusions) comma-separated."""
    return ", ".join(value) or "none" if isinstance(value, list) else value


def _locked(pool: IPPool, *, delete: bool = False) -> IPPool:
    """The pool's row, locked until the transaction ends; refused when it was deleted meanwhile
    (a second click of Delete, or a change racing with one). Changes and reservations take
    turns (FOR NO KEY UPDATE) without waiting for launches that hold the pool (FOR KEY SHARE,
    see `attach`): two launches reserving on one pool would otherwise deadlock. Only a
    deletion waits for those launches."""
    locked = IPPool.objects.select_for_update(no_key=not delete).filter(pk=pool.pk).first()
    if locked is None:
        raise ValidationError(f"The pool {pool.name} was deleted meanwhile.", code="gone")
    return locked


def lock_for_reservations(pool_ids: Iterable[int]) -> None:
    """Take the locks `reserve_address` takes on these pools, in one order: a launch reserving
    on two pools would otherwise deadlock with one reserving on them the other way round."""
    list(
        IPPool.objects.select_for_update(no_key=True)
        .filter(pk__in=sorted(set(pool_ids)))
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def _reconcile(pool: IPPool) -> None:
    enqueue("networking.reconcile_pool", pool.pk)


def _check_overlap(pool: IPPool) -> None:
    """No two pools of one L2 domain (the interface the CNI plugin attaches to: a VLAN on a host
    interface, however written, `bond0` with VLAN 10 or `bond0.10`) may overlap."""
    take_turn(POOL_WRITES)  # two writes at once would each find the other's range free
    mine = pool.interval
    others = IPPool.objects.exclude(pk=pool.pk).only(
        "name", "cidr", "range_start", "range_end", "master", "vlan"
    )
    for other in others:
        if other.master_device != pool.master_device:
            continue
        if other.version == pool.version and ipmath.overlaps(mine, other.interval):
            raise ValidationError(
                {
                    "range_start": (
                        f"This range overlaps pool '{other.name}' "
                        f"({other.range_start}-{other.range_end}) on the same L2 domain "
                        f"({pool.master_device})."
                    )
                }
            )


def _check_shrink(pool: IPPool) -> None:
    """Refuse a range or exclusions that would drop live reservations or allocations."""
    start, end = pool.interval
    excluded = pool.excluded_intervals()

    def outside(value: int) -> bool:
        return not start <= value <= end or ipmath.skip(value, excluded) != value

    lost = [
        f"{r.ip} (reserved by {r.owner.username})"
        for r in pool.reservations.select_related("owner")
        if outside(r.address)
    ]
    lost += [
        f"{a['address']} (in use by {a['podref']})"
        for a in pool.observed_allocations
        if outside(ipmath.to_int(a["address"]))
    ]
    if lost:
        raise ValidationError(
            {
                "range_start": "These addresses are in use and would fall out of "
                f"the pool: {', '.join(lost)}."
            }
        )


def _validate(pool: IPPool) -> None:
    pool.exclusions = [text.strip() for text in pool.exclusions if text.strip()]
    pool.full_clean(exclude=["tenants"])
    _check_overlap(pool)


@transaction.atomic
def create_pool(*, actor: Any, tenants: Iterable[Tenant] = (), **fields: Any) -> IPPool:
    pool = IPPool(**fields)
    _validate(pool)
    with taken_is_invalid("name", f"An IP pool named '{pool.name}' already exists."):
        pool.save()
    pool.tenants.set(tenants)
    record(actor, "ip_pool.create", pool, after=snapshot(pool))
    _reconcile(pool)
    return pool


@transaction.atomic
def update_pool(
    pool: IPPool,
    *,
    actor: Any,
    tenants: Iterable[Tenant] | None = None,
    seen: dict[str, Any] | None = None,
    if_match: str | None = None,
    **changes: Any,
) -> IPPool:
    """`seen`: what the editor showed of the changed fields (an edit page); a field another
    admin changed to something else since is refused, with what it is now. `if_match`: the
    pool's ETag as an API client read it; any change since refuses the whole write (Stale)."""
    pool = _locked(pool)
    before, previous = snapshot(pool), copy.copy(pool)
    refuse_stale(before, if_match, f"The pool {pool.name}")
    if tenants is not None:
        tenants = list(tenants)
    if seen:
        asked = {**changes}
        if tenants is not None:
            asked["tenants"] = sorted(t.slug for t in tenants)
        refuse_changed_meanwhile(before, seen, asked, _said)  # its row is locked: saves take turns
    changes.pop("name", None)  # names NetworkAttachmentDefinitions: never changes
    for name, value in changes.items():
        setattr(pool, name, value)
    _validate(pool)
    _check_shrink(pool)
    if pool.whereabouts_name != previous.whereabouts_name:
        _check_renumber(previous)
    _check_l2_change(pool, previous)
    pool.free_hint = None  # exclusions or the range may have changed: search from the start
    if tenants is not None:
        _check_tenants_left(pool, {t.pk for t in tenants})
    pool.save()
    if tenants is not None:
        pool.tenants.set(tenants)
    after = snapshot(pool)
    if after != before:
        record(actor, "ip_pool.update", pool, before=before, after=after)
    _reconcile(pool)
    return pool


def _check_renumber(pool: IPPool) -> None:
    """A new CIDR is a new IPPool object for Whereabouts, which starts empty: the addresses its
    pods hold in the old one would be handed out again, and the portal would no longer see them.
    So the CIDR changes only while nothing uses the pool (read from the cluster itself)."""
    _locked(pool, delete=True)  # after the launches holding the pool (see _check_l2_change)
    try:
        allocated = live_allocations(pool)
    except K8sError as exc:
        raise ValidationError(
            {
                "cidr": f"Cannot read Whereabouts' allocations of the pool ({exc}); try again "
                "once the cluster answers."
            }
        ) from exc
    blockers = delete_blocked_by(pool, allocated)
    if blockers:
        raise ValidationError(
            {
                "cidr": f"The CIDR can change only while nothing uses the pool (Whereabouts "
                f"keeps its addresses per CIDR), and it is in use: {listed(blockers)}. Change "
                "the range or exclusions instead, or wait for its jobs to end and release its "
                "addresses."
            }
        )


L2_FIELDS = {"master": "host interface", "vlan": "VLAN", "cni_type": "plugin", "mtu": "MTU"}


def _check_l2_change(pool: IPPool, previous: IPPool) -> None:
    """A pool's interface, VLAN, plugin and MTU reach the pods that start after a change: a
    job whose pods restart or start late would be split across two L2 networks (its
    collective then hangs). So they change only while nothing uses the pool."""
    changed = [name for name in L2_FIELDS if getattr(pool, name) != getattr(previous, name)]
    if not changed:
        return
    # Launches hold the pool (FOR KEY SHARE) until their job is saved: wait for those, so a job
    # saved meanwhile is seen below.
    _locked(previous, delete=True)
    words = [L2_FIELDS[name] for name in changed]
    what = " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)
    try:
        blockers = delete_blocked_by(previous, live_allocations(previous))
    except K8sError as exc:
        raise ValidationError(
            {
                changed[0]: f"Cannot read Whereabouts' allocations of the pool ({exc}); try "
                "again once the cluster answers."
            }
        ) from exc
    if blockers:
        raise ValidationError(
            {
                changed[0]: f"The {what} can change only while nothing uses the pool: pods "
                "started after the change would join another network than their job's running "
                f"pods. It is in use: {listed(blockers)}. Wait for its jobs to end, or make a "
                "new pool."
            }
        )


def _check_tenants_left(pool: IPPool, kept: set[int]) -> None:
    """A tenant leaves a pool only once nothing of its own uses it: its networks go from its
    namespace, and a job of it on the pool could not start (or restart) without them."""
    gone = list(pool.tenants.exclude(pk__in=kept))
    if not gone:
        return
    # Launches hold the pool (FOR KEY SHARE) until their job is saved: wait for those, as a
    # deletion does, so a job saved meanwhile is seen below.
    _locked(pool, delete=True)
    blockers = [item for check in delete_blockers for item in check(pool, gone)]
    for r in pool.reservations.filter(tenant__in=gone).select_related("owner", "tenant"):
        blockers.append(f"{r.ip} reserved for {r.owner.username} in {r.tenant.slug}")
    if blockers:
        raise ValidationError(
            {
                "tenants": f"{', '.join(t.slug for t in gone)} still "
                f"{'uses' if len(gone) == 1 else 'use'} the pool: "
                f"{listed(blockers)}. Remove a tenant once its jobs on the pool have ended and "
                "its addresses are released."
            }
        )


def listed(blockers: list[str]) -> str:
    """The first few of what uses a pool, and how many more."""
    shown = ", ".join(blockers[:SHOWN_BLOCKERS])
    more = len(blockers) - SHOWN_BLOCKERS
    return f"{shown} and {more} more" if more > 0 else shown


def delete_blocked_by(pool: IPPool, allocated: list[dict[str, Any]]) -> list[str]:
    """What still uses the pool: jobs on it, reserved addresses, Whereabouts' allocations."""
    blockers = [item for check in delete_blockers for item in check(pool, None)]
    for r in pool.reservations.select_related("owner", "tenant", "job"):
        held = f" for job {r.job.name}" if r.job else ""
        pinned = ", pinned" if r.pinned else ""
        blockers.append(f"{r.ip} reserved for {r.owner.username} in {r.tenant.slug}{held}{pinned}")
    gone = {
        (a["address"], a["podref"])
        for a in pool.observed_allocations
        if not a.get("pod_exists", True)
    }
    for a in allocated:
        stale = " (its pod is gone: release it)" if (a["address"], a["podref"]) in gone else ""
        blockers.append(f"{a['address']} allocated by Whereabouts to pod {a['podref']}{stale}")
    return blockers


def delete_pool(pool: IPPool, *, actor: Any) -> None:
    """Delete a pool nothing uses any more; its networks leave every tenant's namespace. A pool
    still in use is refused, naming what uses it: deleting it would leave pods that cannot
    start and addresses Whereabouts still holds. Whereabouts' allocations are read first, from
    the cluster itself (no deletion on the last observed ones)."""
    try:
        allocated = live_allocations(pool)
    except K8sError as exc:
        raise ValidationError(
            f"Cannot read Whereabouts' allocations of the pool {pool.name} ({exc}); try again "
            "once the cluster answers.",
            code="unavailable",
        ) from exc
    with transaction.atomic():
        pool = _locked(pool, delete=True)
        blockers = delete_blocked_by(pool, allocated)
        if blockers:
            raise ValidationError(
                f"The pool {pool.name} is still in use: {listed(blockers)}. It can be deleted "
                "once its jobs have ended and its addresses are released (on the pool's page).",
                code="in_use",
            )
        record(actor, "ip_pool.delete", pool, before=snapshot(pool))
        pool.delete()
        send("networking.prune_networks")


@transaction.atomic
def reserve_address(
    pool: IPPool,
    *,
    tenant: Tenant,
    owner: Any,
    actor: Any,
    address: str | None = None,
    job: Any = None,  # a jobs.Job: networking sits below jobs and does not import it
    pinned: bool = False,
    note: str = "",
) -> IPReservation:
    """Reserve the given address, or the first free one; a ValidationError (409 in the API)
    when the pool is full or the address is taken."""
    pool = _locked(pool)
    if not pool.tenants.filter(pk=tenant.pk).exists():
        raise ValidationError({"pool": f"Tenant {tenant.slug} may not use pool {pool.name}."})
    if not owner.is_staff and not tenant.memberships.filter(user=owner).exists():
        raise ValidationError(
            {"owner": f"{owner.username} is not a member of {tenant.slug}; add them first."}
        )
    allocated = allocated_now(pool)
    if address is None:
        value = first_free(pool, in_use=allocated)
        if value is None:
            raise ValidationError(
                {
                    "address": [
                        ValidationError(
                            f"Pool {pool.name} has no free address left.", code="pool_full"
                        )
                    ]
                }
            )
    else:
        try:
            value = ipmath.to_int(address, pool.version)
        except ValueError as exc:
            raise ValidationError(
                {"address": f"{address} is not an IPv{pool.version} address of {pool.network}."}
            ) from exc
        start, end = pool.interval
        if not start <= value <= end or ipmath.skip(value, pool.excluded_intervals()) != value:
            raise ValidationError(
                {"address": f"{address} is not an allocatable address of pool {pool.name}."}
            )
        if value in allocated:
            raise ValidationError(
                {
                    "address": [
                        ValidationError(
                            f"{address} is in use by pod {allocated[value]} (given by "
                            "Whereabouts); release that allocation first.",
                            code="taken",
                        )
                    ]
                }
            )
    if address is None:
        # Below the new hint everything is excluded or reserved, except Whereabouts'
        # allocations skipped on the way, which may be released later.
        skipped = [a for a in allocated if a < value]
        IPPool.objects.filter(pk=pool.pk).update(free_hint=min([value + 1, *skipped]))
    try:
        with transaction.atomic():
            reservation = IPReservation.objects.create(
                pool=pool,
                address=value,
                tenant=tenant,
                owner=owner,
                job=job,
                pinned=pinned,
                note=note,
            )
    except IntegrityError as exc:
        raise ValidationError(
            {
                "address": [
                    ValidationError(
                        f"{ipmath.to_str(value, pool.version)} is already reserved.", code="taken"
                    )
                ]
            }
        ) from exc
    record(
        actor,
        "ip_reservation.create",
        reservation,
        tenant=tenant,
        after={"pool": pool.name, "address": reservation.ip, "owner": owner.username},
    )
    _reconcile(pool)
    return reservation


@transaction.atomic
def release_address(reservation: IPReservation, *, actor: Any) -> None:
    record(
        actor,
        "ip_reservation.release",
        reservation,
        tenant=reservation.tenant,
        before={"pool": reservation.pool.name, "address": reservation.ip},
    )
    IPPool.objects.filter(pk=reservation.pool_id, free_hint__gt=reservation.address).update(
        free_hint=reservation.address
    )
    reservation.delete()
    _reconcile(reservation.pool)


def reuse_pinned(pool: IPPool, *, tenant: Tenant, owner: Any, job: Any) -> IPReservation | None:
    """A pinned address of this owner in this tenant on the pool that no queued or running job
    holds, now the job's: what `pinned` promises (a dev box keeps its address from one run to
    the next). None when there is none; the oldest first."""
    _locked(pool)  # reservations of the pool take turns
    pinned = pool.reservations.filter(tenant=tenant, owner=owner, pinned=True).select_related(
        "job__tenant"
    )
    for reservation in pinned.order_by("created_at"):
        if not any(check(reservation) for check in release_blockers):
            reservation.job = job
            reservation.save(update_fields=["job"])
            return reservation
    return None


def release_reservation(reservation: IPReservation, *, actor: Any) -> None:
    """A platform admin's release of a reserved address, refused while the job it was reserved
    for may still hold it: Whereabouts would hand it to the next pod beside the job's own. The
    job's end releases it (a pinned one stays until released here). It takes the pool's turn
    and reads the reservation again: a launch reusing a pinned address meanwhile holds it."""
    with transaction.atomic():
        _locked(reservation.pool)
        now = (
            IPReservation.objects.select_related("pool", "tenant", "owner", "job__tenant")
            .filter(pk=reservation.pk)
            .first()
        )
        if now is None:
            raise ValidationError("This reservation was released meanwhile.", code="gone")
        _release_unless_held(now, actor=actor)


def _release_unless_held(reservation: IPReservation, *, actor: Any) -> None:
    blockers = [item for check in release_blockers for item in check(reservation)]
    if blockers:
        raise ValidationError(
            f"{reservation.ip} is still in use by {listed(blockers)}; it is released when that "
            "job is deleted, or can be released here once the job has ended.",
            code="in_use",
        )
    release_address(reservation, actor=actor)


def release_for_job(job: Any, *, actor: Any = None) -> None:
    """Free the job's reservations, except pinned ones (which outlive it)."""
    for reservation in IPReservation.objects.filter(job=job, pinned=False).select_related(
        "pool", "tenant"
    ):
        release_address(reservation, actor=actor)


@transaction.atomic
def release_allocation(
    pool: IPPool, address: str, *, actor: Any, podref: str | None = None
) -> None:
    """Ask a worker to remove Whereabouts' allocation of `address` from the pool's IPPool; with
    `podref`, only while the address still belongs to that pod (what the admin saw)."""
    try:
        value = ipmath.to_int(address, pool.version)
    except ValueError as exc:
        raise ValidationError(
            {"address": f"'{address}' is not an IPv{pool.version} address."}
        ) from exc
    net = pool.network
    if not int(net.network_address) <= value <= int(net.broadcast_address):
        raise ValidationError({"address": f"{address} is not in {net}."})
    address = ipmath.to_str(value, pool.version)
    record(actor, "ip_pool.release_allocation", pool, before={"address": address, "podref": podref})
    send("networking.release_allocation", pool.pk, address, podref or None)
