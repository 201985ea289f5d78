"""What is wrong with a pool, and how to fix it: pure functions over what the portal and the
cluster know."""

from dataclasses import dataclass

from . import ipmath


@dataclass(frozen=True)
class Conflict:
    kind: str  # "reserved-and-allocated" | "stale-allocation" | "overlapping-pools"
    address: str
    detail: str
    fix: str
    podref: str = ""  # the pod an allocation belongs to: a release applies only while it does


def find(pool, reservations, other_pools):
    """Conflicts of one pool. reservations: [(address int, owner name)]; the pool's observed
    allocations carry `pod_exists`."""
    found = []
    reserved = dict(reservations)
    for allocation in pool.observed_allocations:
        value = ipmath.to_int(allocation["address"])
        if value in reserved:
            found.append(
                Conflict(
                    "reserved-and-allocated",
                    allocation["address"],
                    f"reserved for {reserved[value]} but Whereabouts gave it to "
                    f"{allocation['podref']}",
                    "Release the Whereabouts allocation (the pod gets a new address when "
                    "restarted) or release the reservation.",
                    allocation["podref"],
                )
            )
        if not allocation.get("pod_exists", True):
            found.append(
                Conflict(
                    "stale-allocation",
                    allocation["address"],
                    f"allocated to {allocation['podref']}, which no longer exists",
                    "Release the allocation so the address can be handed out again.",
                    allocation["podref"],
                )
            )
    for other in other_pools:
        if (
            other.pk != pool.pk
            and other.master_device == pool.master_device
            and other.version == pool.version
            and ipmath.overlaps(pool.interval, other.interval)
        ):
            found.append(
                Conflict(
                    "overlapping-pools",
                    f"{other.range_start}-{other.range_end}",
                    f"overlaps pool {other.name} on the same L2 domain {pool.master_device}",
                    f"Shrink or move one of the two pools (edit {pool.name} or {other.name}).",
                )
            )
    return found


def utilization(pool, reserved_count):
    """Total, excluded, reserved, allocated and free addresses of the pool's range."""
    start, end = pool.interval
    total = end - start + 1
    excluded = ipmath.size(ipmath.clip(pool.excluded_intervals(), start, end))
    allocated = len(pool.observed_allocations)
    return {
        "total": total,
        "excluded": excluded,
        "reserved": reserved_count,
        "allocated": allocated,
        "free": max(total - excluded - reserved_count - allocated, 0),
    }
