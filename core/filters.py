"""Query-string filters shared by pages and the API."""

from collections.abc import Iterable, Mapping
from typing import Any


def text_filters(params: Mapping[str, Any], keys: Iterable[str]) -> dict[str, str]:
    """The named query parameters as stripped text; characters PostgreSQL cannot compare
    (NUL) are dropped, so a hostile query string filters nothing instead of failing."""
    return {key: str(params.get(key, "")).replace("\x00", "").strip() for key in keys}
