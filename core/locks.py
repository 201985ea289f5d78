"""Writes that check something across many rows take turns: two at once would each find the
other's change not there yet. A PostgreSQL advisory lock held until the transaction ends."""

from django.db import connection

POOL_WRITES = 0x6770_706F_6F6C  # "gppool": IP pools' overlap check
GUARANTEES = 0x6770_6775_6172  # "gpguar": tenants' guaranteed GPUs against the cluster's
DEPARTMENTS = 0x6770_6465_7074  # "gpdept": tenants' queues against their department's


def take_turn(lock: int) -> None:
    """Wait for the writes holding `lock`; hold it until this transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [lock])
