"""Pool validation and address allocation against PostgreSQL: exact address sets and edges."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from jobs.choices import JobState
from jobs.models import Job
from networking import attach, ipmath, services
from networking.allocation import first_free
from networking.models import IPPool, IPReservation, ReservationBlock
from tests.tenants.conftest import make_user

pytestmark = pytest.mark.django_db


def errors(make_pool, **fields):
    with pytest.raises(ValidationError) as caught:
        make_pool(**fields)
    return caught.value.message_dict


def test_the_range_must_avoid_network_and_broadcast(make_pool):
    assert "network (10.20.0.0)" in errors(make_pool, range_start="10.20.0.0")["range_start"][0]
    assert "broadcast (10.20.0.255)" in errors(make_pool, range_end="10.20.0.255")["range_end"][0]
    outside = errors(make_pool, range_end="10.20.1.5")["range_end"][0]
    assert "must lie inside 10.20.0.0/24" in outside


@pytest.mark.parametrize(
    ("cidr", "message"),
    [
        ("10.20.0.0/31", "Use a /30 or larger network"),
        ("10.20.0.7/32", "Use a /30 or larger network"),
        ("10.20.0.1/24", "host bits zero"),
        ("2001:db8::/127", "Use a /126 or larger network"),
        ("10.20.0.0/33", "not an IPv4 or IPv6 network"),
    ],
)
def test_tiny_or_malformed_networks_are_refused(make_pool, cidr, message):
    first = "2001:db8::1" if ":" in cidr else "10.20.0.1"
    found = errors(make_pool, cidr=cidr, range_start=first, range_end=first, gateway=None)
    assert message in " ".join(found["cidr"])


def test_a_slash_30_has_exactly_two_allocatable_addresses(make_pool, tenant, admin):
    pool = make_pool(
        cidr="10.30.0.0/30", range_start="10.30.0.1", range_end="10.30.0.2", gateway=None
    )
    pool.tenants.add(tenant)
    got = [
        services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin).ip for _ in range(2)
    ]
    assert got == ["10.30.0.1", "10.30.0.2"]
    with pytest.raises(ValidationError) as caught:
        services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin)
    assert caught.value.message_dict["address"] == [f"Pool {pool.name} has no free address left."]


def test_exclusions_must_lie_inside_the_range_and_parse(make_pool):
    found = errors(make_pool, exclusions=["10.20.0.5", "10.20.0.20-10.20.0.30", "bogus"])
    assert found["exclusions"] == [
        "'10.20.0.5' lies outside the range 10.20.0.10-10.20.0.200.",
        "'bogus' is not an address, a-b range or CIDR ('bogus' does not appear to be an IPv4 "
        "or IPv6 address).",
    ] or "bogus" in " ".join(found["exclusions"])


def test_an_exclusion_written_as_a_network_with_host_bits_says_which_network_it_is(make_pool):
    """It excluded 10.20.0.96-111 without a word (or blamed the range when that fell outside)."""
    found = errors(make_pool, exclusions=["10.20.0.100/28"])
    assert found["exclusions"] == [
        "'10.20.0.100/28' is not an IPv4 address, a-b range or CIDR (10.20.0.100/28 has host "
        "bits set: the network is 10.20.0.96/28 (10.20.0.96 to 10.20.0.111); write that, or a "
        "range such as A-B)."
    ]


def test_a_pool_saved_before_host_bits_were_refused_keeps_excluding_the_whole_network(
    make_pool,
):
    """Refused when a pool is saved, not when a stored one is read: its pages and launches
    would fail."""
    pool = make_pool()
    IPPool.objects.filter(pk=pool.pk).update(exclusions=["10.20.0.100/28"])
    pool.refresh_from_db()
    start, end = ipmath.to_int("10.20.0.96"), ipmath.to_int("10.20.0.111")
    assert (start, end) in pool.excluded_intervals()


def test_overlapping_pools_on_one_l2_domain_are_refused_naming_the_other(make_pool):
    make_pool(name="compute-a", range_start="10.20.0.10", range_end="10.20.0.100")
    found = errors(make_pool, name="compute-b", range_start="10.20.0.100", range_end="10.20.0.150")
    assert found["range_start"] == [
        "This range overlaps pool 'compute-a' (10.20.0.10-10.20.0.100)"
        " on the same L2 domain (bond0.100)."
    ]
    assert make_pool(
        name="other-vlan", vlan=200, range_start="10.20.0.100", range_end="10.20.0.150"
    ).pk
    # The same interface written the other way (the VLAN in its name): the same L2 domain.
    found = errors(
        make_pool,
        name="compute-c",
        master="bond0.100",
        vlan=None,
        range_start="10.20.0.50",
        range_end="10.20.0.60",
    )
    assert found["range_start"] == [
        "This range overlaps pool 'compute-a' (10.20.0.10-10.20.0.100)"
        " on the same L2 domain (bond0.100)."
    ]


@pytest.mark.django_db(transaction=True)
def test_two_overlapping_pools_created_at_once_are_not_both_saved(admin):
    from networking.models import IPPool
    from tests.helpers import in_threads

    gate = threading.Barrier(2)  # both check for overlap in the same instant

    def create(name):
        def call():
            gate.wait(timeout=30)
            return services.create_pool(
                actor=admin,
                name=name,
                cidr="10.21.0.0/24",
                range_start="10.21.0.10",
                range_end="10.21.0.100",
                master="bond0",
                vlan=121,
            )

        return call

    results, errors_seen = in_threads(create("race-a"), create("race-b"))
    assert len([r for r in results if r is not None]) == 1
    assert len(errors_seen) == 1
    assert "overlaps pool" in str(errors_seen[0])
    assert IPPool.objects.filter(name__startswith="race-").count() == 1


@pytest.mark.parametrize(
    ("master", "vlan", "field"),
    [
        ("eth/0", None, "master"),
        ("a" * 16, None, "master"),
        ("en p5s0", None, "master"),
        ("enp5s0f1np1", 4000, "vlan"),
        ("ëth0ëth0ëth0ëth", None, "master"),  # 15 characters, 19 bytes: Linux counts bytes
    ],
)
def test_interface_names_follow_linux_rules(make_pool, master, vlan, field):
    assert field in errors(make_pool, master=master, vlan=vlan)


def test_first_free_skips_gateway_exclusions_and_reservations(make_pool, tenant, admin):
    pool = make_pool(
        cidr="10.40.0.0/24",
        range_start="10.40.0.1",
        range_end="10.40.0.20",
        gateway="10.40.0.1",
        exclusions=["10.40.0.2-10.40.0.4", "10.40.0.6"],
    )
    pool.tenants.add(tenant)
    got = [
        services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin).ip for _ in range(4)
    ]
    assert got == ["10.40.0.5", "10.40.0.7", "10.40.0.8", "10.40.0.9"]
    services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin, address="10.40.0.11")
    assert ipmath.to_str(first_free(pool)) == "10.40.0.10"
    services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin)
    assert ipmath.to_str(first_free(pool)) == "10.40.0.12"


def test_the_last_address_of_the_range_is_handed_out(make_pool, tenant, admin):
    pool = make_pool(
        cidr="10.50.0.0/29",
        range_start="10.50.0.1",
        range_end="10.50.0.6",
        gateway="10.50.0.1",
        exclusions=["10.50.0.2-10.50.0.5"],
    )
    pool.tenants.add(tenant)
    assert services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin).ip == "10.50.0.6"
    assert first_free(pool) is None


def test_a_reserved_or_excluded_address_cannot_be_taken_by_name(make_pool, tenant, admin):
    pool = make_pool()
    pool.tenants.add(tenant)
    services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin, address="10.20.0.50")
    with pytest.raises(ValidationError) as caught:
        services.reserve_address(
            pool, tenant=tenant, owner=admin, actor=admin, address="10.20.0.50"
        )
    assert caught.value.message_dict["address"] == ["10.20.0.50 is already reserved."]
    with pytest.raises(ValidationError):
        services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin, address="10.20.0.1")


def test_tenants_not_allowed_on_a_pool_cannot_reserve(make_pool, tenant, admin):
    with pytest.raises(ValidationError) as caught:
        services.reserve_address(make_pool(), tenant=tenant, owner=admin, actor=admin)
    assert "may not use pool" in caught.value.message_dict["pool"][0]


def pool_with_member(make_pool, tenant):
    """A pool open to the tenant, and bob, a researcher of it who may reserve on it."""
    pool = make_pool()
    pool.tenants.add(tenant)
    bob = make_user("bob")
    tenant.memberships.create(user=bob, role="researcher")
    return pool, bob


def test_shrinking_below_live_reservations_is_refused_listing_them(make_pool, tenant, admin):
    pool, bob = pool_with_member(make_pool, tenant)
    services.reserve_address(pool, tenant=tenant, owner=bob, actor=admin, address="10.20.0.150")
    with pytest.raises(ValidationError) as caught:
        services.update_pool(pool, actor=admin, range_end="10.20.0.100")
    assert caught.value.message_dict["range_start"] == [
        "These addresses are in use and would fall out of the pool: 10.20.0.150 (reserved by bob)."
    ]
    with pytest.raises(ValidationError):
        services.update_pool(pool, actor=admin, exclusions=["10.20.0.140-10.20.0.160"])
    pool.refresh_from_db()
    assert pool.range_end == "10.20.0.200"


def test_a_pools_vlan_and_mtu_change_only_while_nothing_uses_it(make_pool, tenant, admin):
    """Pods started after such a change join another network than their job's running pods."""
    pool, bob = pool_with_member(make_pool, tenant)
    held = services.reserve_address(pool, tenant=tenant, owner=bob, actor=admin)
    with pytest.raises(ValidationError) as caught:
        services.update_pool(pool, actor=admin, vlan=101, mtu=9000)
    [message] = caught.value.message_dict["vlan"]
    assert message.startswith("The VLAN and MTU can change only while nothing uses the pool")
    assert f"{held.ip} reserved for bob in {tenant.slug}" in message
    pool.refresh_from_db()
    assert (pool.vlan, pool.mtu) == (100, 1500)
    services.release_reservation(held, actor=admin)
    changed = services.update_pool(pool, actor=admin, vlan=101, mtu=9000)
    assert (changed.vlan, changed.mtu) == (101, 9000)


def test_a_release_checks_the_reservation_as_it_is_now_not_as_the_page_read_it(
    make_pool, tenant, admin
):
    """A launch reusing a pinned address between the admin's read and release held it: the
    release went ahead, and Whereabouts could hand the job's address to another pod."""
    pool, bob = pool_with_member(make_pool, tenant)
    read = services.reserve_address(pool, tenant=tenant, owner=bob, actor=admin, pinned=True)
    job = Job.objects.create(
        tenant=tenant,
        owner=bob,
        name="dev",
        spec={},
        gpus=1,
        state=JobState.RUNNING,
        queued_at=timezone.now(),
    )
    services.IPReservation.objects.filter(pk=read.pk).update(job=job)  # the launch's reuse
    with pytest.raises(ValidationError) as caught:
        services.release_reservation(read, actor=admin)
    assert f"still in use by job {tenant.slug}/dev (running)" in caught.value.messages[0]
    assert services.IPReservation.objects.filter(pk=read.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_200_concurrent_reservations_on_a_slash_28_grant_exactly_the_free_addresses(
    make_pool, tenant, admin
):
    pool = make_pool(
        cidr="10.60.0.0/28",
        range_start="10.60.0.1",
        range_end="10.60.0.14",
        gateway="10.60.0.1",
        vlan=600,
    )
    pool.tenants.add(tenant)
    granted, refused, failures = [], [], []
    barrier = threading.Barrier(200)

    def request():
        try:
            barrier.wait()
            granted.append(
                services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin).ip
            )
        except ValidationError as exc:
            refused.append(exc.message_dict["address"][0])
        except Exception as exc:  # asserted empty below
            failures.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=request) for _ in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert sorted(granted, key=ipmath.to_int) == [f"10.60.0.{i}" for i in range(2, 15)]
    assert len(refused) == 200 - 13
    assert IPReservation.objects.filter(pool=pool).count() == 13


def test_a_released_address_is_handed_out_again_before_higher_ones(make_pool, tenant, admin):
    pool = make_pool(
        cidr="10.70.0.0/24",
        range_start="10.70.0.10",
        range_end="10.70.0.20",
        gateway=None,
        vlan=700,
    )
    pool.tenants.add(tenant)
    first, second, _ = (
        services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin) for _ in range(3)
    )
    services.release_address(first, actor=admin)
    assert (
        services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin).ip == "10.70.0.10"
    )
    assert (
        services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin).ip == "10.70.0.13"
    )
    services.update_pool(pool, actor=admin, exclusions=[])
    services.release_address(second, actor=admin)
    assert ipmath.to_str(first_free(pool)) == "10.70.0.11"


def test_full_blocks_of_reservations_are_skipped_and_counted_by_the_database(
    make_pool, tenant, admin
):
    pool = make_pool(
        cidr="10.60.0.0/22", range_start="10.60.0.1", range_end="10.60.3.254", gateway=None
    )
    first, last = ipmath.to_int("10.60.0.1"), ipmath.to_int("10.60.2.9")
    # Written behind the portal's back: no hint, only the database's own counts.
    IPReservation.objects.bulk_create(
        IPReservation(pool=pool, address=a, tenant=tenant, owner=admin)
        for a in range(first, last + 1)
    )
    counts = dict(
        ReservationBlock.objects.filter(pool=pool).values_list("block", "taken").order_by("block")
    )
    base = ipmath.to_int("10.60.0.0") // 256
    assert counts == {base: 255, base + 1: 256, base + 2: 10}
    assert ipmath.to_str(first_free(pool)) == "10.60.2.10"

    IPReservation.objects.filter(pool=pool, address=ipmath.to_int("10.60.1.77")).delete()
    assert ipmath.to_str(first_free(pool)) == "10.60.1.77"
    IPReservation.objects.filter(pool=pool, address=ipmath.to_int("10.60.0.1")).update(
        address=ipmath.to_int("10.60.3.1")
    )
    assert ipmath.to_str(first_free(pool)) == "10.60.0.1"
    counts = dict(ReservationBlock.objects.filter(pool=pool).values_list("block", "taken"))
    assert counts == {base: 254, base + 1: 255, base + 2: 10, base + 3: 1}


def test_a_run_of_reservations_ending_on_a_block_edge_continues_in_the_next_block(
    make_pool, tenant, admin
):
    pool = make_pool(
        cidr="10.61.0.0/23", range_start="10.61.0.250", range_end="10.61.1.10", gateway=None
    )
    IPReservation.objects.bulk_create(
        IPReservation(pool=pool, address=a, tenant=tenant, owner=admin)
        for a in range(ipmath.to_int("10.61.0.250"), ipmath.to_int("10.61.1.3") + 1)
    )
    assert ipmath.to_str(first_free(pool)) == "10.61.1.4"
    IPReservation.objects.bulk_create(
        IPReservation(pool=pool, address=a, tenant=tenant, owner=admin)
        for a in range(ipmath.to_int("10.61.1.4"), ipmath.to_int("10.61.1.10") + 1)
    )
    assert first_free(pool) is None


def test_a_launch_waiting_for_a_pool_its_tenant_leaves_meanwhile_is_refused(
    make_pool, tenant, monkeypatch
):
    """The tenant's pools were read before the launch held them: a removal committed while it
    waited let the job onto a pool whose networks then left its namespace (its pods never
    started)."""
    pool = make_pool()
    pool.tenants.add(tenant)
    hold = attach._key_share

    def removed_while_waiting(ids):
        pool.tenants.remove(tenant)  # the admin's change, committed as the launch waits
        return hold(ids)

    monkeypatch.setattr(attach, "_key_share", removed_while_waiting)
    with pytest.raises(ValidationError) as caught:
        attach.validate_requests(tenant, [{"pool": pool.name}], 1)
    assert caught.value.message_dict["networks[0].pool"] == [
        f"No pool '{pool.name}' is open to {tenant.slug}; available: none."
    ]
