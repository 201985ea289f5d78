from django.conf import settings
from django.db import models

from core.models import Reconciled
from core.validators import validate_dns1123_label, validate_storage_class_name
from tenants.models import Tenant


class DataVolumeQuerySet(models.QuerySet):
    def for_user(self, user):
        return self.filter(tenant__in=Tenant.objects.for_user(user))


class DataVolume(Reconciled):
    """A data disk (PVC) that outlives jobs and can be attached to later ones."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="data_volumes")
    name = models.CharField(max_length=63, validators=[validate_dns1123_label])
    size_gib = models.PositiveIntegerField()
    storage_class = models.CharField(
        max_length=253, blank=True, validators=[validate_storage_class_name]
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    delete_requested = models.BooleanField(default=False)

    objects = DataVolumeQuerySet.as_manager()

    class Meta:
        ordering = ["tenant", "name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="data_volume_name_per_tenant")
        ]

    def __str__(self):
        return f"{self.tenant.slug}/{self.name}"
