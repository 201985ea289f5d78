"""How launches, reservations and a deletion of one pool take turns in the database: launches
hold the pools they attach to (a key-share lock, as a foreign key would), reservations take
turns among themselves, and only a deletion waits for the launches."""

import contextlib
import threading
import uuid

import pytest
from django.db import transaction

from networking import attach, services
from tenants.models import Tenant
from tests.helpers import in_threads
from tests.tenants.conftest import make_user


@pytest.fixture
def shared(transactional_db):
    """A pool open to two tenants, committed (each thread has its own connection)."""
    admin = make_user(f"a-{uuid.uuid4().hex[:6]}", staff=True)
    tenants = [
        Tenant.objects.create(slug=f"lock-{uuid.uuid4().hex[:6]}", display_name="L")
        for _ in range(2)
    ]
    pool = services.create_pool(
        actor=admin,
        name=f"locks-{uuid.uuid4().hex[:6]}",
        cidr="10.66.0.0/24",
        range_start="10.66.0.10",
        range_end="10.66.0.20",
        master="bond0",
        vlan=66,
    )
    pool.tenants.set(tenants)  # rows only: these tenants have no namespace to reconcile into
    return pool, tenants, admin


def test_two_launches_reserving_on_one_pool_at_once_never_deadlock(shared):
    """Both hold the pool (as each launch does once it checked its networks) before either
    reserves: with reservations taking the row exclusively, PostgreSQL aborted one launch."""
    pool, tenants, admin = shared
    both = threading.Barrier(2)

    def launch(tenant):
        def work():
            with transaction.atomic():
                assert attach._key_share({pool.pk}) == {pool.pk}
                both.wait(timeout=30)
                services.reserve_address(pool, tenant=tenant, owner=admin, actor=admin)

        return work

    assert in_threads(*(launch(t) for t in tenants))[1] == []
    assert sorted(r.ip for r in pool.reservations.all()) == ["10.66.0.10", "10.66.0.11"]


def test_a_deletion_waits_for_a_launch_holding_the_pool_and_then_sees_its_job(shared):
    pool, tenants, admin = shared
    held, asked = threading.Event(), threading.Event()

    def launch():
        with transaction.atomic():
            assert attach._key_share({pool.pk}) == {pool.pk}
            held.set()
            asked.wait(timeout=30)
            services.reserve_address(pool, tenant=tenants[0], owner=admin, actor=admin, pinned=True)

    def delete():
        held.wait(timeout=30)
        asked.set()  # the launch commits its reservation while the deletion waits for it
        services.delete_pool(pool, actor=admin)

    _, errors = in_threads(launch, delete)
    assert [type(e).__name__ for e in errors] == ["ValidationError"]
    assert "10.66.0.10 reserved for" in errors[0].messages[0]
    assert type(pool).objects.filter(pk=pool.pk).exists()


def test_two_launches_reserving_on_two_pools_in_opposite_orders_never_deadlock(shared, monkeypatch):
    """Each reserves on its first pool, then on its second: taken in the order asked, the
    locks crossed and PostgreSQL aborted one launch (a 500)."""
    from django.utils import timezone

    from jobs.models import Job

    first, tenants, admin = shared
    second = services.create_pool(
        actor=admin,
        name=f"locks-{uuid.uuid4().hex[:6]}",
        cidr="10.67.0.0/24",
        range_start="10.67.0.10",
        range_end="10.67.0.20",
        master="bond0",
        vlan=67,
    )
    second.tenants.set(tenants)
    jobs = [
        Job.objects.create(
            tenant=t, owner=admin, name=f"j{i}", spec={}, gpus=0, queued_at=timezone.now()
        )
        for i, t in enumerate(tenants)
    ]
    both = threading.Barrier(2)
    reserve = attach.reserve_address

    def reserve_then_meet(pool, **kwargs):
        reservation = reserve(pool, **kwargs)
        # the other launch reserves on its first pool meanwhile, unless it waits for a lock
        with contextlib.suppress(threading.BrokenBarrierError):
            both.wait(timeout=3)
        return reservation

    monkeypatch.setattr(attach, "reserve_address", reserve_then_meet)

    def launch(job, pools):
        def work():
            with transaction.atomic():
                attach.attach(
                    job, [{"pool": p.name, "static_ip": True} for p in pools], pools, actor=admin
                )

        return work

    _, errors = in_threads(launch(jobs[0], [first, second]), launch(jobs[1], [second, first]))
    assert errors == []
    assert first.reservations.count() == second.reservations.count() == 2
