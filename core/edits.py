"""Edit pages that keep each other's changes: a page carries, signed, what it showed; only the
boxes its admin changed are saved, and a box another admin changed meanwhile is refused with
what it is now (checked with the object's row locked, so two saves at once are seen in turn).

An API client does the same with the object's entity tag (RFC 9110): each read and write answers
with an `ETag` standing for the object's editable values, and a write sent with that tag in
`If-Match` is refused (412) once another write changed them."""

import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.core import signing
from django.core.exceptions import ValidationError


def as_shown(value: Any) -> Any:
    """A field's value as a form shows it and the database keeps it: an empty box is none."""
    return None if value == "" else value


def sign_shown(values: dict[str, Any], salt: str) -> str:
    """What an edit page shows, for its hidden field."""
    return signing.dumps(values, salt=salt)


def changed_boxes(
    signed: str, values: dict[str, Any], salt: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the boxes changed from what the page showed, to their values sent; what the page showed
    of those), given the page's signed values and the values it sent back."""
    try:
        shown = signing.loads(signed or "", salt=salt)
    except signing.BadSignature:
        raise ValidationError(
            "This page was altered, or is from before an upgrade: reload it and make the "
            "change again."
        ) from None
    changes = {
        name: value
        for name, value in values.items()
        if as_shown(value) != as_shown(shown.get(name))
    }
    return changes, {name: shown.get(name) for name in changes}


def refuse_changed_meanwhile(
    now: dict[str, Any],
    seen: dict[str, Any],
    changes: dict[str, Any],
    said: Callable[[str, Any], Any] = lambda name, value: value,
) -> None:
    """A ValidationError by field for each box another admin changed since the page showed it
    (to something else than this admin sets), saying its value now (`said(name, value)`)."""
    errors = {}
    for name, was in seen.items():
        if as_shown(now[name]) not in (as_shown(was), as_shown(changes.get(name))):
            value = "empty" if now[name] in (None, "") else said(name, now[name])
            errors[name] = (
                f"Another admin changed this to {value} since you opened the page; reload it "
                "and decide again."
            )
    if errors:
        raise ValidationError(errors)


class Stale(Exception):  # noqa: N818 (a refusal, said to the client as 412 Precondition Failed)
    """A write sent with `If-Match` over an object another write changed since that read."""


def version_tag(values: dict[str, Any]) -> str:
    """The entity tag of an object's editable values: the same values, the same tag."""
    canonical = json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)
    return f'"{hashlib.sha256(canonical.encode()).hexdigest()[:24]}"'


def refuse_stale(values: dict[str, Any], if_match: str | None, what: str) -> None:
    """Stale unless `if_match` (the header, absent or a list of tags) names the version of
    `values` (the object's, read with its row locked), or is `*`."""
    if not if_match:
        return
    tags = {tag.strip() for tag in if_match.split(",")}
    now = version_tag(values)
    if now not in tags and "*" not in tags:
        raise Stale(
            f"{what} changed since you read it (If-Match {if_match}; its ETag is now {now}): "
            "read it again, and send your change with the new ETag."
        )
