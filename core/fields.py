"""API fields shared by the apps."""

from collections.abc import Mapping
from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers

from .edits import version_tag

NAME_REGEX = "[-a-z0-9]+"  # URL lookups of slugs and names: never reach the database otherwise
ID_REGEX = "[0-9]+"


class SlugRelatedField(serializers.SlugRelatedField):
    """DRF's SlugRelatedField, refusing text PostgreSQL cannot compare (NUL characters) with a
    400 instead of a database error."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value="(contains NUL)")
        return super().to_internal_value(data)


class NoUnknownFields:
    """A write serializer that refuses fields it does not have, naming those it takes: DRF
    drops them without a word, so a typo ('gpu' for 'gpus') launched the template's default.
    Read-only fields a client sends back from a read are accepted (and ignored)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            fields = self.fields  # type: ignore[attr-defined]
            unknown = sorted(str(key) for key in data if key not in fields)
            if unknown:
                taken = ", ".join(name for name, field in fields.items() if not field.read_only)
                raise serializers.ValidationError(
                    {key: [f"Unknown field; this takes {taken}."] for key in unknown}
                )
        return super().to_internal_value(data)  # type: ignore[misc]


class FixedOnceMade:
    """A write serializer whose `fixed` fields are set at creation only: an update sending one
    with another value is refused by its name (the service behind it would keep the old one
    without a word, or blame another field). The same value sent back is accepted."""

    fixed: tuple[str, ...] = ()

    def validate(self, attrs: Any) -> Any:
        instance = getattr(self, "instance", None)
        if instance is not None:
            changed = [f for f in self.fixed if f in attrs and attrs[f] != getattr(instance, f)]
            if changed:
                raise serializers.ValidationError(
                    {
                        f: [f"Set when it is made, and fixed since ({getattr(instance, f)!r})."]
                        for f in changed
                    }
                )
        return super().validate(attrs)  # type: ignore[misc]


class LocationOnCreate:
    """A `Location` header on every 201, naming the new object's detail URL: clients (and
    Schemathesis's stateful phase, which chains create → read → change → delete by it) follow
    it instead of building URLs."""

    def location(self, data: dict) -> str:
        field = self.lookup_field  # type: ignore[attr-defined]
        value = data["id" if field == "pk" else field]  # serializers call the primary key id
        url_kwarg = getattr(self, "lookup_url_kwarg", None) or field
        kwargs = {**self.kwargs, url_kwarg: value}  # type: ignore[attr-defined]
        return reverse(f"{self.basename}-detail", kwargs=kwargs)  # type: ignore[attr-defined]

    def get_success_headers(self, data: dict) -> dict[str, str]:
        return {"Location": self.location(data)}


IF_MATCH = OpenApiParameter(
    "If-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="The ETag a read of the object answered with: the write is refused (412) if "
    "another write changed the object since. Without it, the write goes through whatever "
    "changed.",
)


def etagged_schema(viewset: type) -> type:
    """The viewset's writes documented with their If-Match header."""
    documented = extend_schema(parameters=[IF_MATCH])
    return extend_schema_view(update=documented, partial_update=documented)(viewset)


class ETagged:
    """Reads and writes of one object answer with its `ETag` (`core.edits.version_tag` of
    `version_values(obj)`, the values an edit may change), for the client to send back in
    `If-Match` (`if_match()`, for the viewset's service to check under the row lock). Only to
    platform admins, who alone write these objects: a tag stands for values a member may not
    see (a pool's tag would tell a member when a tenant they cannot see joins the pool)."""

    VERSIONED_ACTIONS = frozenset({"retrieve", "create", "update", "partial_update"})

    def version_values(self, obj: Any) -> dict[str, Any]:
        raise NotImplementedError

    def if_match(self) -> str | None:
        return self.request.headers.get("If-Match")  # type: ignore[attr-defined]

    def get_serializer(self, *args: Any, **kwargs: Any) -> Any:
        self._serializer = super().get_serializer(*args, **kwargs)  # type: ignore[misc]
        return self._serializer

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        serializer = getattr(self, "_serializer", None)
        instance = getattr(serializer, "instance", None)
        action = getattr(self, "action", None)
        if not request.user.is_staff:
            return response
        if action in self.VERSIONED_ACTIONS and 200 <= response.status_code < 300 and instance:
            if action != "retrieve":  # as the database keeps what was written (its own types)
                instance = type(instance)._default_manager.get(pk=instance.pk)
            response["ETag"] = version_tag(self.version_values(instance))
        return response
