"""What every reconciled model shares: how its last reconcile went, kept apart from the
object's own lifecycle (a job stays `running` while the API server is briefly unreachable)."""

from django.db import models


class SyncState(models.TextChoices):
    PENDING = "pending", "Pending"
    IN_SYNC = "in_sync", "In sync"
    RETRYING = "retrying", "Retrying"
    ERROR = "error", "Error"


class Reconciled(models.Model):
    sync_state = models.CharField(max_length=16, choices=SyncState, default=SyncState.PENDING)
    sync_message = models.TextField(blank=True)
    synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
