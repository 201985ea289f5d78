from django.conf import settings
from django.db import models

from ..choices import MembershipSource, Role


class MembershipQuerySet(models.QuerySet):
    def for_user(self, user):
        """Memberships of the tenants this user may see."""
        tenants = self.model._meta.get_field("tenant").related_model.objects
        return self.filter(tenant__in=tenants.for_user(user))


class Membership(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role, default=Role.RESEARCHER)
    source = models.CharField(
        max_length=8, choices=MembershipSource, default=MembershipSource.MANUAL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = MembershipQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="one_membership_per_tenant"),
        ]
        ordering = ["tenant__slug", "user__username"]

    def __str__(self):
        return f"{self.user} in {self.tenant} as {self.role}"
