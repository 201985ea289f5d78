"""One error body for every API failure:
{"detail": "...", "code": "...", "errors": {"field": [{"code": "...", "message": "..."}]}}."""

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions
from rest_framework.exceptions import ErrorDetail
from rest_framework.views import exception_handler as drf_handler

from core.edits import Stale

from .parsers import RequestTooLarge


class PreconditionFailed(exceptions.APIException):
    status_code = 412
    default_detail = "The object changed since you read it."
    default_code = "stale"


def _field_errors(details):
    if isinstance(details, dict):
        return {field: _as_list(value) for field, value in details.items()}
    return {"non_field_errors": _as_list(details)}


def _as_list(value):
    if isinstance(value, dict) and "message" in value:
        return [{"code": value.get("code", "invalid"), "message": str(value["message"])}]
    if isinstance(value, list):
        return [item for v in value for item in _as_list(v)]
    if isinstance(value, dict):
        return [{"code": "invalid", "message": str(value)}]
    return [{"code": "invalid", "message": str(value)}]


def _details(errors):
    return [
        ErrorDetail(message, code=error.code or "invalid")
        for error in errors
        for message in error.messages
    ]


def from_django(exc):
    """A Django ValidationError (from a model's clean or a service) as DRF's, codes kept."""
    if hasattr(exc, "error_dict"):
        return exceptions.ValidationError(
            {
                ("non_field_errors" if field == "__all__" else field): _details(errors)
                for field, errors in exc.error_dict.items()
            }
        )
    return exceptions.ValidationError(_details(exc.error_list))


def exception_handler(exc, context):
    if isinstance(exc, DjangoValidationError):
        exc = from_django(exc)
    elif isinstance(exc, Http404):  # the same words whatever was not found (no model names)
        exc = exceptions.NotFound()
    elif isinstance(exc, RequestDataTooBig):  # a body Django read before the parser could
        exc = RequestTooLarge()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, Stale):  # a write with If-Match over a change since (RFC 9110)
        exc = PreconditionFailed(str(exc))
    response = drf_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        errors = _field_errors(exc.get_full_details())
        first = next(iter(errors.values()))[0]["message"] if errors else "Invalid input."
        response.data = {"detail": first, "code": "invalid", "errors": errors}
    elif isinstance(exc, exceptions.APIException):
        response.data = {
            "detail": str(exc.detail),
            "code": exc.get_codes() if isinstance(exc.get_codes(), str) else "error",
            "errors": {},
        }
    return response
