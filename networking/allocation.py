"""The first free address of a pool: exclusions are skipped in Python (they are few intervals);
reservations (possibly tens of thousands) in PostgreSQL, in steps that each read at most one
block's rows: the rest of a run of reservations inside the current block, and past a full
block, the per-block counts the database keeps (ReservationBlock), never the rows of full
blocks. So the search costs a few index reads however long the run of reservations is."""

from django.db import connection

from . import ipmath
from .constants import BLOCK_SIZE
from .models import IPReservation, ReservationBlock

# Table names are the models' own, never input.
FIRST_GAP = f"""
SELECT address + 1 FROM (
    SELECT address, lead(address) OVER (ORDER BY address) AS following
    FROM {IPReservation._meta.db_table}
    WHERE pool_id = %s AND address >= %s AND address < %s
) run WHERE following IS NULL OR following > address + 1
ORDER BY address LIMIT 1
"""  # noqa: S608
FIRST_OPEN_BLOCK = f"""
SELECT block + 1 FROM (
    SELECT block, lead(block) OVER (ORDER BY block) AS following
    FROM {ReservationBlock._meta.db_table}
    WHERE pool_id = %s AND block >= %s AND taken >= %s
) run WHERE following IS NULL OR following > block + 1
ORDER BY block LIMIT 1
"""  # noqa: S608


def _query(sql, params):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else None  # numeric comes as Decimal


def _block_full(pool_id, block):
    return ReservationBlock.objects.filter(pool_id=pool_id, block=block, taken=BLOCK_SIZE).exists()


def _first_unreserved(pool_id, value):
    """value if nobody reserved it, else the first address after the run of reservations that
    starts at value (possibly past the pool's range)."""
    while IPReservation.objects.filter(pool_id=pool_id, address=value).exists():
        block = value // BLOCK_SIZE
        if not _block_full(pool_id, block):
            # The run ends inside this block, or runs on into the next one.
            limit = (block + 1) * BLOCK_SIZE
            gap = _query(FIRST_GAP, [pool_id, value, limit])
            if gap is not None and gap < limit:
                return gap
            value = limit
            continue
        # Full blocks from here on: jump to the first block that is not full.
        open_block = _query(FIRST_OPEN_BLOCK, [pool_id, block, BLOCK_SIZE])
        value = open_block * BLOCK_SIZE
    return value


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
