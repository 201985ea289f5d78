import re

from django.core.exceptions import ValidationError

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def validate_dns1123_label(value: str, *, max_length: int = 63) -> None:
    """A Kubernetes name that can also be a namespace or a DNS label."""
    if len(value) > max_length:
        raise ValidationError(
            f"Use at most {max_length} characters (this has {len(value)}).", code="max_length"
        )
    if not DNS1123_LABEL.match(value):
        raise ValidationError(
            "Use only lowercase letters, digits and '-', starting and ending with a letter or "
            "digit (a DNS-1123 label), for example 'vision-lab'.",
            code="invalid_dns1123",
        )


DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def validate_storage_class_name(value: str) -> None:
    """The name of a StorageClass (a DNS-1123 subdomain): checked before a claim is written,
    so a typo is a field error, not a claim the API server refuses later."""
    if len(value) > 253 or not DNS1123_SUBDOMAIN.match(value):
        raise ValidationError(
            "Name a StorageClass: lowercase letters, digits, '-' and '.', for example 'fast-nvme'.",
            code="invalid_storage_class",
        )


WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")  # ASCII digits only, and within a bigint


def whole_number(text: object) -> int | None:
    """A whole number sent as text (a form field, a query parameter, a path part), or None.
    Not str.isdigit(): that takes '²' and other digits int() refuses, and any length."""
    value = str(text if text is not None else "").strip()
    return int(value) if WHOLE_NUMBER.fullmatch(value) else None
