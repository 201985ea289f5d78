"""A unique constraint that decides a race between two writes, told as the field error a user
can act on: the checks before a write (`full_clean`, an `exists()`) see no row when two
requests create the same name at once, and the constraint refuses the second."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

UNIQUE_VIOLATION = "23505"  # PostgreSQL's SQLSTATE


@contextmanager
def taken_is_invalid(field: str, message: str) -> Iterator[None]:
    """Run the block in a savepoint; a unique violation in it becomes `{field: message}` (code
    "duplicate"), and the transaction around it stays usable. Other integrity errors pass."""
    try:
        with transaction.atomic():
            yield
    except IntegrityError as exc:
        if getattr(exc.__cause__, "sqlstate", None) != UNIQUE_VIOLATION:
            raise
        raise ValidationError({field: [ValidationError(message, code="duplicate")]}) from exc
