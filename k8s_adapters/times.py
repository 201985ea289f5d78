"""Kubernetes' timestamps (RFC 3339, as `metadata.creationTimestamp` and Events carry them)."""

from datetime import UTC, datetime
from typing import Any


def parse_time(value: Any) -> datetime | None:
    """A timezone-aware datetime, or None for a missing or malformed stamp."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
