"""Secondary networks of a job: which NetworkAttachmentDefinition each interface uses, static
addresses reserved for single-pod jobs, and the NCCL/Gloo interface for compute networks."""

from django.core.exceptions import ValidationError
from django.db import connection

from k8s_adapters.multus import network_selection

from .choices import Purpose
from .models import IPPool
from .services import lock_for_reservations, reserve_address, reuse_pinned
from .tasks import apply_networks
from .whereabouts import allocated_now


def validate_requests(tenant, networks, total_replicas):
    """The pools of the requested networks, or a ValidationError keyed by networks[i]."""
    if not networks:
        return []
    errors, pools = {}, []
    requested = {str(request.get("pool")) for request in networks}
    named = IPPool.objects.filter(name__in=requested).values_list("pk", flat=True)
    held = _key_share(set(named))
    # Read once the pools are held: a tenant taken off a pool meanwhile (that change waits for
    # launches holding it, then commits) is seen here, and its job is refused, not saved on a
    # pool whose networks are about to leave its namespace.
    usable = IPPool.objects.for_tenant(tenant).filter(pk__in=held)
    allowed = {p.name: p for p in usable}
    for i, request in enumerate(networks):
        pool = allowed.get(request.get("pool"))
        if pool is None:
            available = IPPool.objects.for_tenant(tenant).values_list("name", flat=True)
            errors[f"networks[{i}].pool"] = (
                f"No pool '{request.get('pool')}' is open to {tenant.slug}; available: "
                f"{', '.join(sorted(available)) or 'none'}."
            )
        elif request.get("static_ip") and total_replicas != 1:
            errors[f"networks[{i}].static_ip"] = (
                f"A fixed address needs a job with exactly one pod; this one has {total_replicas}."
            )
        pools.append(pool)
    if errors:
        raise ValidationError(errors)
    return pools


def _key_share(ids):
    """Lock these pools' rows until the launch commits (it calls this inside its transaction),
    as a foreign key would: a pool is never deleted between this check and the job that
    attaches to it, while launches on one pool never wait for each other. The ids of the pools
    that still exist."""
    if not ids:
        return set()
    table = connection.ops.quote_name(IPPool._meta.db_table)
    key = connection.ops.quote_name(IPPool._meta.pk.column)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {key} FROM {table} WHERE {key} = ANY(%s) ORDER BY {key} FOR KEY SHARE",  # noqa: S608
            [sorted(ids)],
        )
        return {row[0] for row in cursor.fetchall()}


def attach(job, networks, pools, *, actor):
    """(annotation, extra env) for the job; reserves static addresses (call inside the launch's
    transaction, so a failed launch reserves nothing)."""
    attachments, env = [], []
    lock_for_reservations(p.pk for r, p in zip(networks, pools, strict=True) if r.get("static_ip"))
    for i, (request, pool) in enumerate(zip(networks, pools, strict=True)):
        interface = f"net{i + 1}"
        entry = {"name": pool.nad_name, "interface": interface}
        if request.get("static_ip"):
            pinned = bool(request.get("pinned"))
            reused = pinned and reuse_pinned(pool, tenant=job.tenant, owner=job.owner, job=job)
            reservation = reused or reserve_address(
                pool,
                tenant=job.tenant,
                owner=job.owner,
                actor=actor,
                job=job,
                pinned=pinned,
            )
            entry = {
                "name": pool.static_nad_name,
                "interface": interface,
                "ips": [f"{reservation.ip}/{pool.network.prefixlen}"],
            }
        attachments.append(entry)
        if pool.purpose == Purpose.COMPUTE and not env:
            env = [("NCCL_SOCKET_IFNAME", interface), ("GLOO_SOCKET_IFNAME", interface)]
    return (network_selection(attachments) if attachments else ""), env


def static_addresses_waiting(job):
    """Before a job with fixed addresses is submitted: why it must wait, or "". Each pool's
    networks are applied now with its reservation excluded (the pool's own run may come after
    Whereabouts gave the address to another pod), and then an address Whereabouts handed out
    before that is named: the job's pod would share it."""
    for reservation in job.ip_reservations.select_related("pool"):
        pool = reservation.pool
        apply_networks(pool)
        holder = allocated_now(pool).get(reservation.address)
        if holder:
            return (
                f"Its fixed address {reservation.ip} on pool {pool.name} is in use by pod "
                f"{holder}, which got it before the reservation reached the network; it starts "
                "once that pod has ended or a platform admin releases the address on the "
                "pool's page."
            )
    return ""
