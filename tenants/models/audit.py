from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    """Who changed what, from what to what, and when. Written by the services, never edited."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=64, db_index=True)
    tenant = models.ForeignKey(
        "tenants.Tenant",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
    )
    object_type = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=200)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return (
            f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_name} {self.action} {self.object_repr}"
        )

    def changes(self):
        """(field, before, after) for the fields that differ."""
        before, after = self.before or {}, self.after or {}
        keys = sorted(set(before) | set(after))
        return [(k, before.get(k), after.get(k)) for k in keys if before.get(k) != after.get(k)]
