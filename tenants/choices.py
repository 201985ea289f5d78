from django.db import models


class Role(models.TextChoices):
    ADMIN = "admin", "Tenant admin"
    RESEARCHER = "researcher", "Researcher"
    VIEWER = "viewer", "Viewer"


class TenantState(models.TextChoices):
    ACTIVE = "active", "Active"
    ARCHIVED = "archived", "Archived"


class MembershipSource(models.TextChoices):
    MANUAL = "manual", "Added in the portal"
    SSO = "sso", "From SSO groups"
