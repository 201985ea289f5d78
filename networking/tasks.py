"""Reconcile IP pools into NetworkAttachmentDefinitions in each allowed tenant's namespace, and
read Whereabouts' allocations back."""

import contextlib

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from core.cluster import get_cluster
from core.reconcile import RETRY, reconciler, resync
from k8s_adapters.client import ObjectRef
from k8s_adapters.errors import ConflictK8sError, TransientK8sError
from k8s_adapters.labels import portal_labels
from k8s_adapters.multus import (
    NAD_API,
    POOL_LABEL,
    WHEREABOUTS_API,
    PoolSpec,
    allocation_at,
    build_nad,
    build_static_nad,
    network_pool,
    pod_ref,
    read_whereabouts_pool,
    release_operations,
    whereabouts_reservation_name,
)

from . import ipmath
from .models import IPPool
from .whereabouts import live_allocations

# Whereabouts may rewrite a busy IPPool many times a second: re-read and retry this often.
RELEASE_ATTEMPTS = 50
ORIP = "OverlappingRangeIPReservation"


def pool_spec(pool):
    start, end = pool.interval
    taken = [(r, r) for r in pool.reservations.values_list("address", flat=True)]
    exclude = ipmath.clip(pool.excluded_intervals() + taken, start, end)
    return PoolSpec(
        name=pool.name,
        network_name=pool.network_name,
        nad_name=pool.nad_name,
        static_nad_name=pool.static_nad_name,
        cni_type=pool.cni_type,
        master=pool.master_device,
        mtu=pool.mtu,
        cidr=str(pool.network),
        range_start=pool.range_start,
        range_end=pool.range_end,
        exclude=tuple(ipmath.to_cidrs(exclude, pool.version)),
    )


def _labels(pool):
    """The labels of a pool's networks; of every pool's, without one."""
    labels = portal_labels(component="network")
    if pool is not None:
        labels[POOL_LABEL] = pool.name
    return labels


@reconciler("ip-pool", IPPool, name="networking.reconcile_pool")
def reconcile_pool(pool):
    """A NAD pair in every allowed tenant's namespace; Whereabouts' allocations read back."""
    apply_networks(pool)
    return {"observed_allocations": _observe(pool), "observed_at": timezone.now()}


def apply_networks(pool):
    """The pool's NAD pair in every allowed tenant's namespace; those of tenants no longer
    allowed go."""
    cluster = get_cluster()
    spec = pool_spec(pool)
    desired = []
    for tenant in pool.tenants.filter(state="active"):
        desired += [
            build_nad(spec, tenant.namespace, tenant.slug),
            build_static_nad(spec, tenant.namespace, tenant.slug),
        ]
    cluster.apply(desired)
    cluster.prune(
        labels=_labels(pool),
        keep={ObjectRef.of(m) for m in desired},
        kinds=[(NAD_API, "NetworkAttachmentDefinition")],
    )


def _observe(pool):
    """Whereabouts' allocations for this pool, each marked with whether its pod still exists."""
    cluster = get_cluster()
    found = live_allocations(pool)
    namespaces = {a["podref"].split("/", 1)[0] for a in found if "/" in a["podref"]}
    pods = {pod_ref(p) for ns in namespaces for p in cluster.list("v1", "Pod", namespace=ns)}
    return [{**a, "pod_exists": a["podref"] in pods} for a in found]


@shared_task(name="networking.release_allocation", ignore_result=True, **RETRY)
def release_allocation(pool_id, address, podref=None):
    """Remove one allocation from Whereabouts' IPPool (what an admin would `kubectl edit`),
    without ever undoing an allocation Whereabouts makes at the same moment."""
    pool = IPPool.objects.get(pk=pool_id)
    remove_allocation(pool, address, podref)
    reconcile_pool(pool_id)  # read the allocations back now, in this run


def remove_allocation(pool, address, podref=None):
    """True when this call removed the allocation; False when the address is free or now
    belongs to another pod than `podref`.

    Each attempt patches only the IPPool version it read (Whereabouts writes the same way), so
    an allocation Whereabouts makes meanwhile makes it read again rather than undo it. The
    address's cluster-wide OverlappingRangeIPReservation goes first, and only while it still
    names the same pod: without that, Whereabouts skips the address for good."""
    cluster = get_cluster()
    name = pool.whereabouts_name
    namespace = settings.WHEREABOUTS_NAMESPACE
    for _ in range(RELEASE_ATTEMPTS):
        ippool = cluster.get(WHEREABOUTS_API, "IPPool", name, namespace)
        entry = allocation_at(ippool, address) if ippool else None
        if entry is None or (podref is not None and entry.get("podref") != podref):
            return False
        try:
            _drop_reservation(pool, address, entry.get("podref"))
            cluster.patch_json(
                WHEREABOUTS_API,
                "IPPool",
                name,
                release_operations(ippool, address),
                namespace=namespace,
            )
        except ConflictK8sError:
            continue
        return True
    raise TransientK8sError(f"IPPool {name} kept changing; releasing {address} again later")


def _drop_reservation(pool, address, podref):
    cluster = get_cluster()
    name = whereabouts_reservation_name(pool.network_name, address)
    namespace = settings.WHEREABOUTS_NAMESPACE
    reservation = cluster.get(WHEREABOUTS_API, ORIP, name, namespace)
    if reservation and (reservation.get("spec") or {}).get("podref") == podref:
        version = reservation["metadata"]["resourceVersion"]
        cluster.delete_version(WHEREABOUTS_API, ORIP, name, namespace, version)


@shared_task(name="networking.resync_pools", ignore_result=True)
def resync_pools():
    resync("networking.reconcile_pool", IPPool.objects.values_list("pk", flat=True))
    prune_networks()


@shared_task(name="networking.prune_networks", ignore_result=True, **RETRY)
def prune_networks():
    """Remove what pools that no longer exist left in the cluster: their networks (NAD pairs, in
    every namespace) and Whereabouts' IPPool object of their range once it holds no address.
    Sent when a pool is deleted, and part of every resync, so a run that never came still
    converges."""
    cluster = get_cluster()
    networks = cluster.list(NAD_API, "NetworkAttachmentDefinition", labels=_labels(None))
    ranges = _whereabouts_pools(cluster)
    # Read after the lists: a pool made meanwhile has no network in them yet to lose.
    pools = list(IPPool.objects.all())
    existing = {pool.name for pool in pools}
    for nad in networks:
        if network_pool(nad) not in existing:
            ref = ObjectRef.of(nad)
            cluster.delete(NAD_API, "NetworkAttachmentDefinition", ref.name, ref.namespace)
    kept = {pool.whereabouts_name for pool in pools}
    for found in ranges:
        if found.portal and not found.allocated and found.name not in kept:
            _delete_empty_range(cluster, found)


def _whereabouts_pools(cluster):
    """Whereabouts' IPPool objects, none where Whereabouts is not installed."""
    if not cluster.serves(WHEREABOUTS_API, "IPPool"):
        return []
    listed = cluster.list(WHEREABOUTS_API, "IPPool", namespace=settings.WHEREABOUTS_NAMESPACE)
    return [read_whereabouts_pool(ippool) for ippool in listed]


def _delete_empty_range(cluster, found):
    """Only as read, empty: a pod given an address meanwhile (a pool made again on the range)
    changed it, and it stays (the next resync reads it again). Whereabouts makes the object
    again for the next allocation."""
    with contextlib.suppress(ConflictK8sError):
        cluster.delete_version(
            WHEREABOUTS_API, "IPPool", found.name, settings.WHEREABOUTS_NAMESPACE, found.version
        )
