"""Choosing the next free address of a /16 pool holding 50,000 reservations (target p99 < 5 ms):
reservations scattered at random, and the worst case, one contiguous block from the range's
start, so the first gap is 50,000 addresses in. Each is measured cold (no search hint: the
first search after the reservations were written behind the portal's back, or after a pool
edit) and warm (the hint that allocation and release keep).

Then, in the same run, the real Whereabouts' own allocation time on full pools of growing size
(bench/whereabouts_scale.py): how large a pool Whereabouts copes with. `--portal-only` skips
that part."""

import random
import statistics
import sys
import time
import uuid

from common import percentile, setup_django

setup_django()

import whereabouts_scale  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402

from networking import ipmath, services  # noqa: E402
from networking.allocation import first_free  # noqa: E402
from networking.models import IPPool, IPReservation, ReservationBlock  # noqa: E402
from tenants.models import AuditEvent, Tenant  # noqa: E402

RESERVATIONS, RUNS = 50_000, 200


def fill(pool, tenant, owner, addresses):
    IPReservation.objects.filter(pool=pool).delete()
    IPReservation.objects.bulk_create(
        [IPReservation(pool=pool, address=a, tenant=tenant, owner=owner) for a in addresses],
        batch_size=5000,
    )
    # What autovacuum does for a table that grew to this size: fresh statistics and a visibility
    # map, so the planner uses the (pool, address) index and can scan it without the heap.
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {IPReservation._meta.db_table}")
        cursor.execute(f"VACUUM ANALYZE {ReservationBlock._meta.db_table}")


def measure(pool):
    first_free(pool)  # warm the connection and the plan
    samples = []
    for _ in range(RUNS):
        started = time.perf_counter()
        value = first_free(pool)
        samples.append((time.perf_counter() - started) * 1000)
    return value, samples


def report(name, value, samples):
    print(
        f"first free of a /16 with {RESERVATIONS} reservations ({name}): "
        f"{ipmath.to_str(value)} in median {statistics.median(samples):.2f} ms, "
        f"p99 {percentile(samples, 99):.2f} ms over {RUNS} runs (target p99 < 5 ms)"
    )


def main():
    owner, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True}
    )
    tenant = Tenant.objects.create(slug=f"bench-ipam-{uuid.uuid4().hex[:6]}", display_name="B")
    pool = services.create_pool(
        actor=owner,
        name=f"bench-{uuid.uuid4().hex[:6]}",
        cidr="10.200.0.0/16",
        range_start="10.200.0.1",
        range_end="10.200.255.254",
        gateway="10.200.0.1",
        master="bench0",
        vlan=4000 - random.randint(1, 99),
    )
    start, end = pool.interval
    try:
        scenarios = {
            "random": random.Random(7).sample(range(start + 1, end + 1), RESERVATIONS),
            "contiguous from the start": list(range(start + 1, start + 1 + RESERVATIONS)),
        }
        pool.tenants.add(tenant)
        for name, addresses in scenarios.items():
            fill(pool, tenant, owner, addresses)
            IPPool.objects.filter(pk=pool.pk).update(free_hint=None)
            pool.refresh_from_db()
            report(f"{name}, cold", *measure(pool))
            services.reserve_address(pool, tenant=tenant, owner=owner, actor=owner)
            pool.refresh_from_db()
            report(f"{name}, warm", *measure(pool))
    finally:
        IPReservation.objects.filter(pool=pool).delete()
        AuditEvent.objects.filter(object_repr=pool.name).delete()
        IPPool.objects.filter(pk=pool.pk).delete()
        tenant.delete()
    if "--portal-only" not in sys.argv:
        whereabouts_scale.main(settings.KUBECONFIG)


if __name__ == "__main__":
    main()
