import pytest

from tenants.sso import groups_from_claims, roles_from_groups

PATTERN = (
    r"^gpu-portal:(?P<tenant>[a-z0-9]([-a-z0-9]*[a-z0-9])?):(?P<role>admin|researcher|viewer)$"
)


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        ([], {}),
        (["gpu-portal:vision:researcher"], {"vision": "researcher"}),
        (["gpu-portal:vision:viewer", "gpu-portal:vision:admin"], {"vision": "admin"}),
        (["gpu-portal:vision:admin", "gpu-portal:vision:viewer"], {"vision": "admin"}),
        (
            ["gpu-portal:vision:researcher", "gpu-portal:nlp:viewer"],
            {"vision": "researcher", "nlp": "viewer"},
        ),
        (
            ["staff", "gpu-portal:Vision:admin", "gpu-portal:vision:owner", "gpu-portal:-x:admin"],
            {},
        ),
        (["gpu-portal:platform-admins"], {}),
    ],
)
def test_groups_map_to_the_highest_role_per_tenant(groups, expected):
    assert roles_from_groups(groups, PATTERN) == expected


def test_a_custom_rule_maps_other_group_names():
    pattern = r"^/teams/(?P<tenant>[a-z0-9-]+)/(?P<role>admin|researcher|viewer)$"
    assert roles_from_groups(["/teams/nlp/viewer"], pattern) == {"nlp": "viewer"}


def test_a_group_must_match_the_rule_whole():
    """`$` matches before a final line break, and a rule written without it matched any
    group starting alike: neither grants anything."""
    assert roles_from_groups(["gpu-portal:vision:admin\n"], PATTERN) == {}
    loose = r"gpu-portal-(?P<tenant>[a-z0-9]+)-(?P<role>admin|researcher|viewer)"
    assert roles_from_groups(["gpu-portal-ml-admin-readonly"], loose) == {}
    assert roles_from_groups(["gpu-portal-ml-viewer"], loose) == {"ml": "viewer"}


def test_a_role_the_portal_does_not_have_grants_nothing_and_never_fails_a_sign_in():
    caseless = r"(?i)gpu-portal:(?P<tenant>[a-z0-9]+):(?P<role>admin|researcher|viewer)"
    assert roles_from_groups(["GPU-PORTAL:ml:ADMIN", "gpu-portal:cv:viewer"], caseless) == {
        "cv": "viewer"
    }


def test_groups_come_from_userinfo_and_id_token_merged():
    extra = {"userinfo": {"groups": ["a", "b"]}, "id_token": {"groups": ["b", "c"]}}
    assert groups_from_claims(extra, "groups") == ["a", "b", "c"]


@pytest.mark.parametrize(
    "claim", [7, {"name": "gpu-portal:vision:admin"}, [None, 3, {"x": 1}, "gpu-portal:a:viewer"]]
)
def test_groups_that_are_not_names_grant_nothing_and_never_fail_a_sign_in(claim):
    found = groups_from_claims(
        {"userinfo": {"groups": claim}, "id_token": "not a mapping"}, "groups"
    )
    assert found == (["gpu-portal:a:viewer"] if isinstance(claim, list) else [])


def test_a_single_group_string_counts_as_one_group():
    assert groups_from_claims({"id_token": {"roles": "a"}}, "roles") == ["a"]


def test_an_archived_tenants_sso_memberships_stay_as_they_were(people, settings):
    """An archived tenant's members keep reading its history: a sign-in after its archive
    (the IdP group still there, or gone) changes nothing of it, as for hand-made ones."""
    from tenants.choices import MembershipSource, Role, TenantState
    from tenants.models import Membership, Tenant
    from tenants.sso import apply_groups

    settings.SSO_GROUP_PATTERN = PATTERN
    vision, bob = people["vision"], people["bob"]
    Membership.objects.filter(tenant=vision, user=bob).update(source=MembershipSource.SSO)
    Tenant.objects.filter(pk=vision.pk).update(state=TenantState.ARCHIVED)
    apply_groups(bob, [f"gpu-portal:{vision.slug}:researcher"])
    apply_groups(bob, [])
    kept = Membership.objects.get(tenant=vision, user=bob)
    assert (kept.role, kept.source) == (Role.RESEARCHER, MembershipSource.SSO)
