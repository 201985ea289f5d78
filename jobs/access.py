from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404

from tenants.access import get_tenant_for_user, has_role
from tenants.choices import Role

from .models import Job


def get_job_for_user(user, slug, name, *, write=False):
    """A job of a tenant the user may see (else 404). With write=True: its owner or a tenant
    admin, else 403; viewers never write."""
    tenant = get_tenant_for_user(user, slug)
    job = get_object_or_404(
        Job.objects.select_related("tenant", "owner", "template_version__template"),
        tenant=tenant,
        name=name,
    )
    job.tenant = tenant  # the same row, read with the user's role
    if write and not may_change(user, job):
        raise PermissionDenied("Only the job's owner or a tenant admin can change it.")
    return job


def may_change(user, job):
    """Cancel, delete, extend its endpoints: its owner (a researcher still) or a tenant admin.
    `job.tenant` read with the user's role (as `get_job_for_user` reads it)."""
    role = job.tenant.role_of(user)
    return has_role(role, Role.ADMIN) or (
        has_role(role, Role.RESEARCHER) and job.owner_id == user.pk
    )


def may_delete_volume(user, volume):
    """Delete a data volume: whoever created it (a researcher still) or a tenant admin. A
    teammate's finished experiment is not one click away from anyone in the tenant."""
    role = volume.tenant.role_of(user)
    return has_role(role, Role.ADMIN) or (
        has_role(role, Role.RESEARCHER) and volume.created_by_id == user.pk
    )
