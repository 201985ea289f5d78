"""The one place tenant access is decided: 404 for outsiders, 403 for too low a role."""

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404

from .choices import Role
from .models import Membership, Tenant

RANK = {Role.VIEWER: 1, Role.RESEARCHER: 2, Role.ADMIN: 3}


def has_role(role, needed):
    return role is not None and RANK[role] >= RANK[needed]


def get_tenant_for_user(user, slug, *, role=Role.VIEWER):
    """The tenant if the user may see it (else 404) and holds at least `role` in it (else 403)."""
    if "\x00" in str(slug):  # PostgreSQL cannot compare it: no tenant is named so
        raise Http404("No such tenant.")
    tenant = get_object_or_404(Tenant.objects.for_user(user).with_role_of(user), slug=slug)
    if not has_role(tenant.role_of(user), role):
        raise PermissionDenied(f"This needs the {Role(role).label.lower()} role in {tenant.slug}.")
    return tenant


def get_membership_for_user(user, slug, membership_id):
    """A membership of a tenant the user administers."""
    tenant = get_tenant_for_user(user, slug, role=Role.ADMIN)
    return get_object_or_404(
        Membership.objects.select_related("user", "tenant"), tenant=tenant, pk=membership_id
    )


def require_platform_admin(user):
    if not (user.is_authenticated and user.is_staff):
        raise PermissionDenied("Only platform admins can do this.")
