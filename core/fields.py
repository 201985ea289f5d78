"""API fields shared by the apps."""

from collections.abc import Mapping
from typing import Any

from django.urls import reverse
from rest_framework import serializers

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
