"""Edit pages that keep each other's changes: a page carries, signed, what it showed; only the
boxes its admin changed are saved, and a box another admin changed meanwhile is refused with
what it is now (checked with the object's row locked, so two saves at once are seen in turn)."""

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
