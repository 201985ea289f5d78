"""API fields shared by the apps."""

from typing import Any

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
