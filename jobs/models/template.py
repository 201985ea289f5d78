from django.conf import settings
from django.db import models
from django.db.models import F, Q

from core.validators import validate_dns1123_label
from tenants.models import Tenant


class JobTemplateQuerySet(models.QuerySet):
    def for_user(self, user):
        """Global templates plus those of the user's tenants."""
        return self.filter(Q(tenant__isnull=True) | Q(tenant__in=Tenant.objects.for_user(user)))

    def for_tenant(self, tenant):
        """What a launch in `tenant` may use: its own templates first, then global ones; none
        retired (a retired tenant template no longer replaces the global one of its name)."""
        return self.filter(
            Q(tenant__isnull=True) | Q(tenant=tenant), retired_at__isnull=True
        ).order_by(F("tenant").asc(nulls_last=True), "name")


class JobTemplate(models.Model):
    """A named, versioned job recipe: global (published by platform admins) or a tenant's own."""

    name = models.CharField(max_length=50, validators=[validate_dns1123_label])
    tenant = models.ForeignKey(
        Tenant,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="job_templates",
        help_text="Empty for a global template.",
    )
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Retired templates are offered to no launch and take no versions; jobs launched from them
    # keep their version (and relaunch), and the template can be restored.
    retired_at = models.DateTimeField(null=True, blank=True)

    objects = JobTemplateQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="template_name_per_tenant"),
            models.UniqueConstraint(
                fields=["name"], condition=Q(tenant__isnull=True), name="global_template_name"
            ),
        ]

    def __str__(self):
        return self.name if self.tenant_id is None else f"{self.tenant.slug}/{self.name}"

    @property
    def latest(self):
        return self.versions.order_by("-version").first()


class JobTemplateVersion(models.Model):
    """An immutable version of a template's spec; jobs record the version they came from."""

    template = models.ForeignKey(JobTemplate, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    spec = models.JSONField()
    source = models.TextField(
        blank=True,
        help_text="The spec as its author wrote it (YAML, comments and all), when saved as text.",
    )
    overridable = models.JSONField(default=list)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["template", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["template", "version"], name="one_number_per_version")
        ]

    def __str__(self):
        return f"{self.template} v{self.version}"
