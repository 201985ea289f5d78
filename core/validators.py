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
