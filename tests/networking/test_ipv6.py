"""IPv6 pools: the same exclusion, reservation and conflict rules as IPv4, exact address sets at
the edges, and a field error where a pool would mix families."""

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from networking import ipmath, services
from networking.allocation import first_free
from networking.conflicts import find
from networking.tasks import pool_spec

V6 = {"cidr": "fd00:20::/64", "range_start": "fd00:20::10", "range_end": "fd00:20::20"}


def test_ipv6_intervals_become_the_fewest_cidrs():
    first, last = ipmath.to_int("fd00::1"), ipmath.to_int("fd00::6")
    assert ipmath.to_cidrs([(first, last)], 6) == [
        "fd00::1/128",
        "fd00::2/127",
        "fd00::4/127",
        "fd00::6/128",
    ]


@pytest.mark.parametrize(
    ("text", "interval"),
    [
        ("fd00::5", ("fd00::5", "fd00::5")),
        ("fd00::5 - fd00::9", ("fd00::5", "fd00::9")),
        ("fd00::8/126", ("fd00::8", "fd00::b")),
    ],
)
def test_ipv6_exclusions_parse_as_intervals(text, interval):
    assert ipmath.parse_exclusion(text, 6) == tuple(ipmath.to_int(a) for a in interval)


@pytest.mark.parametrize("text", ["10.0.0.5", "10.0.0.1-10.0.0.3", "10.0.0.0/30"])
def test_an_ipv4_exclusion_is_not_an_ipv6_one(text):
    with pytest.raises(ValueError, match="IPv6"):
        ipmath.parse_exclusion(text, 6)


@pytest.mark.django_db
def test_a_slash_126_has_exactly_two_allocatable_addresses(make_pool, tenant, admin):
    pool = make_pool(
        cidr="fd00:30::/126", range_start="fd00:30::1", range_end="fd00:30::2", gateway=None
    )
    pool.tenants.add(tenant)
    got = [
        services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin).ip for _ in range(2)
    ]
    assert got == ["fd00:30::1", "fd00:30::2"]
    with pytest.raises(ValidationError) as caught:
        services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin)
    assert caught.value.message_dict["address"] == [f"Pool {pool.name} has no free address left."]


@pytest.mark.django_db
def test_addresses_past_64_bits_are_stored_exactly(make_pool, tenant, admin):
    pool = make_pool(
        cidr="fd00:1:2:3::/64",
        range_start="fd00:1:2:3:ffff:ffff:ffff:fff0",
        range_end="fd00:1:2:3:ffff:ffff:ffff:fffe",
        gateway="fd00:1:2:3:ffff:ffff:ffff:fff0",
        exclusions=["fd00:1:2:3:ffff:ffff:ffff:fff2/127"],
    )
    pool.tenants.add(tenant)
    got = [
        services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin).ip for _ in range(2)
    ]
    assert got == ["fd00:1:2:3:ffff:ffff:ffff:fff1", "fd00:1:2:3:ffff:ffff:ffff:fff4"]
    reserved = services.reserve_address(
        pool, tenant=tenant, owner=admin, actor=admin, address="fd00:1:2:3:ffff:ffff:ffff:fffe"
    )
    assert reserved.ip == "fd00:1:2:3:ffff:ffff:ffff:fffe"
    assert ipmath.to_str(first_free(pool), 6) == "fd00:1:2:3:ffff:ffff:ffff:fff5"
    # Gateway, two reservations and the exclusion merge into ::fff0-::fff4; the last
    # reservation is the range's end.
    assert pool_spec(pool).exclude == (
        "fd00:1:2:3:ffff:ffff:ffff:fff0/126",
        "fd00:1:2:3:ffff:ffff:ffff:fff4/128",
        "fd00:1:2:3:ffff:ffff:ffff:fffe/128",
    )


@pytest.mark.django_db
def test_a_pool_mixing_families_is_refused_field_by_field(make_pool):
    with pytest.raises(ValidationError) as caught:
        make_pool(**V6, gateway="10.20.0.1", exclusions=["10.20.0.5"])
    found = caught.value.message_dict
    assert found["gateway"] == [
        "10.20.0.1 is not an IPv6 address like the network fd00:20::/64. A pool holds one "
        "address family; for dual stack, create a pool of the other family and attach both "
        "to the job."
    ]
    with pytest.raises(ValidationError) as caught:
        make_pool(**V6, gateway=None, exclusions=["10.20.0.5"])
    assert caught.value.message_dict["exclusions"] == [
        "'10.20.0.5' is not an IPv6 address, a-b range or CIDR (10.20.0.5 is not an IPv6 address)."
    ]


@pytest.mark.django_db
def test_ipv4_and_ipv6_pools_on_one_l2_domain_do_not_overlap(make_pool):
    v4 = make_pool(cidr="10.0.0.0/24", range_start="10.0.0.10", range_end="10.0.0.20", gateway=None)
    # ::a00:a is 10.0.0.10 as an integer: still no overlap, the families differ.
    v6 = make_pool(cidr="::/96", range_start="::a00:a", range_end="::a00:14", gateway=None)
    assert find(v6, [], [v4, v6]) == []


@pytest.mark.django_db
def test_dual_stack_jobs_attach_a_pool_of_each_family_in_the_api(team, admin):
    client = APIClient()
    client.force_login(admin)
    common = {"master": "bond0", "vlan": 40, "tenants": [team["tenant"].slug]}
    v4 = {
        "name": "dual-v4",
        "cidr": "10.40.0.0/24",
        "range_start": "10.40.0.10",
        "range_end": "10.40.0.20",
    }
    v6 = {"name": "dual-v6", **V6}
    assert client.post("/api/v1/ip-pools/", {**v4, **common}, format="json").status_code == 201
    response = client.post("/api/v1/ip-pools/", {**v6, **common}, format="json")
    assert response.status_code == 201
    assert response.json()["usage"]["total"] == 17
    url = "/api/v1/ip-pools/dual-v6/reservations/"
    body = {"tenant": team["tenant"].slug, "owner": "bob", "ip": "fd00:20::15"}
    assert client.post(url, body, format="json").json()["ip"] == "fd00:20::15"
    wrong = client.post(url, {**body, "ip": "10.40.0.15"}, format="json")
    assert wrong.status_code == 400
    assert "not an IPv6 address of fd00:20::/64" in str(wrong.json())


@pytest.mark.django_db
def test_the_pool_form_takes_an_ipv6_pool_and_says_what_is_wrong_with_a_mixed_one(team, admin):
    client = APIClient()
    client.force_login(admin)
    form = {**V6, "name": "v6-form", "purpose": "compute", "master": "bond0", "vlan": "60"}
    form.update(cni_type="ipvlan-l2", mtu="9000", exclusions="fd00:20::12\nfd00:20::14/127")
    response = client.post("/network/pools/new/", form)
    assert response.status_code == 302
    page = client.post("/network/pools/new/", {**form, "name": "v6-mixed", "range_end": "10.0.0.9"})
    assert page.status_code == 200
    text = page.content.decode()
    assert "Enter a valid IPv4 address" not in text
    assert "10.0.0.9 is not an IPv6 address like the network fd00:20::/64" in text
