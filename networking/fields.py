from django.db import models


class IPIntegerField(models.Field):
    """An IPv4 or IPv6 address as an integer: numeric(39, 0) in PostgreSQL (IPv6 needs 128 bits,
    more than bigint holds), so interval queries and address arithmetic stay in SQL; a Python
    int in the model."""

    description = "An IP address as an integer"

    def db_type(self, connection):
        return "numeric(39, 0)"

    def from_db_value(self, value, expression, connection):
        return None if value is None else int(value)

    def to_python(self, value):
        return None if value is None else int(value)

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return None if value is None else int(value)
