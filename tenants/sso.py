"""Map identity-provider groups to tenant memberships, at every SSO login."""

import re

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from .access import RANK
from .choices import MembershipSource, Role
from .models import Membership, Tenant
from .services import record


def roles_from_groups(groups, pattern):
    """{tenant slug: role} for the groups the pattern matches whole (a group with more after
    what the pattern names, or a line break, grants nothing); the highest role wins. A role the
    portal does not have (a pattern matching case-insensitively, say) grants nothing."""
    compiled = re.compile(pattern)
    roles = {}
    for group in groups:
        match = compiled.fullmatch(group)
        if not match or match.group("role") not in Role.values:
            continue
        tenant, role = match.group("tenant"), Role(match.group("role"))
        if tenant not in roles or RANK[role] > RANK[roles[tenant]]:
            roles[tenant] = role
    return roles


def groups_from_claims(extra_data, claim):
    """The groups claim from the userinfo response and the ID token, merged."""
    groups = set()
    for source in ("userinfo", "id_token"):
        found = extra_data.get(source)
        value = (found.get(claim) if isinstance(found, dict) else None) or []
        values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        # Only names count: a provider sending numbers, objects or nulls grants nothing by them
        groups.update(v for v in values if isinstance(v, str))
    return sorted(groups)


def sso_record(action, obj, **kwargs):
    return record(None, action, obj, actor_name="sso login", **kwargs)


@transaction.atomic
def apply_groups(user, groups):
    """Make the user's SSO memberships and platform-admin flag match the groups.

    Memberships added by hand in the portal are left alone; SSO ones follow the groups, so a
    group removed in the identity provider removes the access at the next login.
    """
    user = get_user_model().objects.select_for_update().get(pk=user.pk)
    desired = roles_from_groups(groups, settings.SSO_GROUP_PATTERN)
    tenants = {t.slug: t for t in Tenant.objects.active().filter(slug__in=desired)}
    current = {
        m.tenant.slug: m for m in Membership.objects.filter(user=user).select_related("tenant")
    }
    for slug, membership in current.items():
        # Hand-made ones are left alone; so are an archived tenant's, which stay as they were
        # (its members keep reading its history), whatever the groups say now.
        if membership.source != MembershipSource.SSO or membership.tenant.is_archived:
            continue
        if slug not in tenants:
            membership.delete()
            sso_record(
                "membership.remove",
                membership,
                tenant=membership.tenant,
                before={"user": user.username, "role": membership.role, "source": "sso"},
            )
        elif membership.role != desired[slug]:
            before = {"user": user.username, "role": membership.role, "source": "sso"}
            membership.role = desired[slug]
            membership.save(update_fields=["role"])
            sso_record(
                "membership.change",
                membership,
                tenant=membership.tenant,
                before=before,
                after={**before, "role": membership.role},
            )
    for slug, tenant in tenants.items():
        if slug not in current:
            membership = Membership.objects.create(
                user=user, tenant=tenant, role=desired[slug], source=MembershipSource.SSO
            )
            sso_record(
                "membership.add",
                membership,
                tenant=tenant,
                after={"user": user.username, "role": membership.role, "source": "sso"},
            )
    is_admin = settings.SSO_PLATFORM_ADMIN_GROUP in groups
    if user.is_staff != is_admin:
        sso_record(
            "user.platform_admin",
            user,
            before={"is_staff": user.is_staff},
            after={"is_staff": is_admin},
        )
        user.is_staff = is_admin
        user.save(update_fields=["is_staff"])
