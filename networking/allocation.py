"""The first free address of a pool: exclusions are skipped in Python (they are few intervals);
reservations (possibly tens of thousands) in PostgreSQL, in one round trip per step: the
database function networking_first_unreserved (migration 0005) reads at most one block's rows
(the rest of a run of reservations inside a block) and skips full blocks through the per-block
counts the database keeps (ReservationBlock), never reading their rows. So a search costs a few
index reads however long the run of reservations is."""

from django.db import connection

from . import ipmath


def _first_unreserved(pool_id, value):
    """value if nobody reserved it, else the first address after the run of reservations that
    starts at value (possibly past the pool's range)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT networking_first_unreserved(%s, %s)", [pool_id, value])
        return int(cursor.fetchone()[0])  # numeric comes as a Decimal


def first_free(pool, in_use=()):
    """The lowest address of the pool's range that is neither excluded nor reserved nor among
    `in_use` (addresses as ints, Whereabouts' allocations), or None."""
    start, end = pool.interval
    excluded = ipmath.merge(pool.excluded_intervals() + [(a, a) for a in in_use])
    value = max(start, pool.free_hint or start)
    while value <= end:
        value = ipmath.skip(value, excluded)
        if value > end:
            return None
        free = _first_unreserved(pool.pk, value)
        if free == value:
            return value
        value = free
    return None
