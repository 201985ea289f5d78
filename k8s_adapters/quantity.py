"""Kubernetes resource quantities ("500m", "8Gi", "2") as Decimals."""

from decimal import Decimal

from kubernetes.utils.quantity import parse_quantity


def to_decimal(value: str | int | float | Decimal) -> Decimal:
    return Decimal(parse_quantity(str(value)))


def gib(value: str | int | float | Decimal) -> Decimal:
    return to_decimal(value) / (1024**3)
