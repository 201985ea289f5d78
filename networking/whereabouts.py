"""What Whereabouts has allocated in a pool, read from its IPPool object."""

from django.conf import settings

from core.cluster import get_cluster
from k8s_adapters.errors import K8sError
from k8s_adapters.multus import WHEREABOUTS_API, allocations

from . import ipmath


def live_allocations(pool):
    """[{address, podref, ifname}] as the pool's IPPool holds them now."""
    name = pool.whereabouts_name
    ippool = get_cluster().get(WHEREABOUTS_API, "IPPool", name, settings.WHEREABOUTS_NAMESPACE)
    return allocations(ippool) if ippool else []


def allocated_now(pool):
    """{address as int: podref} of Whereabouts' allocations: read now, or the last observed
    ones when the cluster does not answer."""
    try:
        found = live_allocations(pool)
    except K8sError:
        found = pool.observed_allocations
    return {ipmath.to_int(a["address"]): a["podref"] for a in found}
