"""The first free address of a pool: exclusions are skipped in Python (they are few intervals);
reservations (possibly tens of thousands) are searched by PostgreSQL in one ordered index scan
that stops at the first gap."""

from django.db import connection

from . import ipmath
from .models import IPReservation

# The table name is the model's own, never input.
FIRST_GAP = f"""
SELECT address + 1 FROM (
    SELECT address, lead(address) OVER (ORDER BY address) AS following
    FROM {IPReservation._meta.db_table}
    WHERE pool_id = %s AND address >= %s
) run WHERE following IS NULL OR following > address + 1
ORDER BY address LIMIT 1
"""  # noqa: S608


def _first_unreserved(pool_id, value):
    """value if nobody reserved it, else the first address after the run of reservations that
    starts at value."""
    if not IPReservation.objects.filter(pool_id=pool_id, address=value).exists():
        return value
    with connection.cursor() as cursor:
        cursor.execute(FIRST_GAP, [pool_id, value])
        return cursor.fetchone()[0]


def first_free(pool):
    """The lowest address of the pool's range that is neither excluded nor reserved, or None."""
    start, end = pool.interval
    excluded = pool.excluded_intervals()
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
