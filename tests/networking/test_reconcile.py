"""Pools reconciled into NetworkAttachmentDefinitions (validated by the real NAD CRD), Whereabouts
allocations read back, conflicts flagged and fixed, and jobs attached to pools."""

import json

import pytest
from django.urls import reverse

from jobs import services as job_services
from jobs.models import Job
from k8s_adapters.multus import NAD_API, WHEREABOUTS_API
from k8s_adapters.volcano import VCJOB_API
from networking import services
from networking.conflicts import find, utilization
from networking.models import IPReservation
from networking.tasks import reconcile_pool, release_allocation
from tests.helpers import wait_for
from tests.jobs.conftest import deleted, submitted

pytestmark = pytest.mark.django_db
NAD = "NetworkAttachmentDefinition"


@pytest.fixture
def pool(team, admin, django_capture_on_commit_callbacks, cluster):
    with django_capture_on_commit_callbacks(execute=True):
        pool = services.create_pool(
            actor=admin,
            name=f"compute-{team['tenant'].slug[-6:]}",
            purpose="compute",
            cidr="10.77.0.0/24",
            range_start="10.77.0.10",
            range_end="10.77.0.100",
            gateway="10.77.0.1",
            exclusions=["10.77.0.20-10.77.0.29"],
            vlan=77,
            master="bond0",
            mtu=9000,
            tenants=[team["tenant"]],
        )
    yield pool
    cluster.delete(WHEREABOUTS_API, "IPPool", f"{pool.network_name}-10.77.0.0-24", "kube-system")


def test_each_allowed_tenant_gets_a_valid_nad_with_whereabouts(cluster, team, pool):
    nad = cluster.get(NAD_API, NAD, pool.nad_name, team["tenant"].namespace)
    config = json.loads(nad["spec"]["config"])
    assert config == {
        "cniVersion": "0.3.1",
        "name": pool.network_name,
        "type": "ipvlan",
        "mode": "l2",
        "master": "bond0.77",
        "mtu": 9000,
        "ipam": {
            "type": "whereabouts",
            "range": "10.77.0.0/24",
            "range_start": "10.77.0.10",
            "range_end": "10.77.0.100",
            "network_name": pool.network_name,
            "exclude": ["10.77.0.20/30", "10.77.0.24/30", "10.77.0.28/31"],
        },
    }
    static = json.loads(
        cluster.get(NAD_API, NAD, pool.static_nad_name, team["tenant"].namespace)["spec"]["config"]
    )
    assert static["plugins"][0]["capabilities"] == {"ips": True}
    assert static["plugins"][0]["ipam"] == {"type": "static"}


def test_removing_a_tenant_from_the_pool_removes_its_nads(
    cluster, team, pool, admin, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        services.update_pool(pool, actor=admin, tenants=[])
    assert cluster.get(NAD_API, NAD, pool.nad_name, team["tenant"].namespace) is None
    assert cluster.get(NAD_API, NAD, pool.static_nad_name, team["tenant"].namespace) is None


def test_a_tenant_whose_job_uses_the_pool_stays_on_it(
    cluster, team, pool, admin, templates, django_capture_on_commit_callbacks
):
    """Its networks would leave its namespace, and its job's pods could not start without."""
    data = {**templates["single-gpu"].spec, "networks": [{"pool": pool.name}]}
    with django_capture_on_commit_callbacks(execute=True):
        job_services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name="on-pool"
        )
    with pytest.raises(services.ValidationError) as caught:
        services.update_pool(pool, actor=admin, tenants=[])
    message = caught.value.message_dict["tenants"][0]
    assert message.startswith(f"{team['tenant'].slug} still uses the pool: job ")
    assert f"{team['tenant'].slug}/on-pool" in message
    assert list(pool.tenants.all()) == [team["tenant"]]
    assert cluster.get(NAD_API, NAD, pool.nad_name, team["tenant"].namespace) is not None


def test_a_job_on_the_pool_carries_the_annotation_and_the_nccl_interface(
    cluster, team, pool, templates, django_capture_on_commit_callbacks
):
    data = {
        **templates["single-gpu"].spec,
        "networks": [{"pool": pool.name}, {"pool": pool.name, "static_ip": True}],
    }
    with django_capture_on_commit_callbacks(execute=True):
        job, _ = job_services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name="netjob"
        )
    submitted(job)
    vcjob = cluster.get(VCJOB_API, "Job", "netjob", team["tenant"].namespace)
    template = vcjob["spec"]["tasks"][0]["template"]
    reserved = IPReservation.objects.get(job=job)
    assert json.loads(template["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]) == [
        {"name": pool.nad_name, "interface": "net1"},
        {"name": pool.static_nad_name, "interface": "net2", "ips": [f"{reserved.ip}/24"]},
    ]
    env = {e["name"]: e["value"] for e in template["spec"]["containers"][0]["env"]}
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "net1"
    assert reserved.ip == "10.77.0.10"
    nad = json.loads(
        cluster.get(NAD_API, NAD, pool.nad_name, team["tenant"].namespace)["spec"]["config"]
    )
    assert "10.77.0.10/32" in nad["ipam"]["exclude"]  # nobody else gets the reserved address

    with django_capture_on_commit_callbacks(execute=True):
        job_services.delete_job(job, actor=team["bob"])
    deleted(job)
    assert not IPReservation.objects.exists()
    assert not Job.objects.exists()


def test_a_static_address_for_a_multi_pod_job_is_refused(team, pool, templates):
    data = {**templates["pytorch-ddp"].spec, "networks": [{"pool": pool.name, "static_ip": True}]}
    with pytest.raises(job_services.ValidationError) as caught:
        job_services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name="ddp-static"
        )
    assert caught.value.message_dict["networks[0].static_ip"] == [
        "A fixed address needs a job with exactly one pod; this one has 3."
    ]


def test_a_pinned_address_outlives_its_job(
    team, pool, templates, django_capture_on_commit_callbacks
):
    data = {
        **templates["single-gpu"].spec,
        "networks": [{"pool": pool.name, "static_ip": True, "pinned": True}],
    }
    with django_capture_on_commit_callbacks(execute=True):
        job, _ = job_services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name="devbox"
        )
        job_services.delete_job(job, actor=team["bob"])
    kept = IPReservation.objects.get()
    assert (kept.ip, kept.job, kept.pinned) == ("10.77.0.10", None, True)

    # the next run of the dev box keeps it; another running beside it gets one of its own
    with django_capture_on_commit_callbacks(execute=True):
        again, _ = job_services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name="devbox"
        )
        beside, _ = job_services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name="devbox-2"
        )
    assert IPReservation.objects.get(job=again).ip == "10.77.0.10"
    assert IPReservation.objects.get(job=beside).ip == "10.77.0.11"
    assert IPReservation.objects.count() == 2


def test_whereabouts_allocations_show_in_utilization_and_conflicts_are_flagged_and_fixed(
    cluster, team, pool, admin, django_capture_on_commit_callbacks
):
    services.reserve_address(
        pool, tenant=team["tenant"], owner=team["bob"], actor=admin, address="10.77.0.50"
    )
    ns = team["tenant"].namespace
    cluster.apply_one(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "alive", "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
        }
    )
    cluster.apply_one(
        {  # what Whereabouts itself would have written
            "apiVersion": WHEREABOUTS_API,
            "kind": "IPPool",
            "metadata": {"name": f"{pool.network_name}-10.77.0.0-24", "namespace": "kube-system"},
            "spec": {
                "range": "10.77.0.0/24",
                "allocations": {
                    "11": {"id": "c1", "podref": f"{ns}/alive", "ifname": "net1"},
                    "12": {"id": "c2", "podref": f"{ns}/gone", "ifname": "net1"},
                    "50": {"id": "c3", "podref": f"{ns}/alive", "ifname": "net2"},
                },
            },
        }
    )
    reconcile_pool(pool.pk)
    pool.refresh_from_db()
    assert utilization(pool, pool.reservations.count()) == {
        "total": 91,
        "excluded": 10,
        "reserved": 1,
        "allocated": 3,
        "free": 77,
    }
    reservations = [(r.address, r.owner.username) for r in pool.reservations.all()]
    conflicts = {(c.kind, c.address) for c in find(pool, reservations, [pool])}
    assert conflicts == {
        ("stale-allocation", "10.77.0.12"),
        ("reserved-and-allocated", "10.77.0.50"),
    }

    release_allocation(pool.pk, "10.77.0.12")
    pool.refresh_from_db()
    assert [a["address"] for a in pool.observed_allocations] == ["10.77.0.11", "10.77.0.50"]
    wait_for(
        lambda: (
            "12"
            not in cluster.get(
                WHEREABOUTS_API, "IPPool", f"{pool.network_name}-10.77.0.0-24", "kube-system"
            )["spec"]["allocations"]
        ),
        message="the stale allocation to leave Whereabouts' IPPool",
    )


def test_a_pool_in_use_is_kept_and_a_deleted_pool_leaves_every_tenant(
    client, cluster, team, pool, admin, templates, django_capture_on_commit_callbacks
):
    """Deleting a pool is refused, naming what uses it, while a job is on it or an address of it
    is reserved; once nothing is, its networks leave every tenant's namespace."""
    from accounts.models import ApiToken
    from tenants.models import AuditEvent

    namespace = team["tenant"].namespace
    data = {**templates["single-gpu"].spec, "networks": [{"pool": pool.name}]}
    with django_capture_on_commit_callbacks(execute=True):
        job, _ = job_services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name="on-pool"
        )
    kept = services.reserve_address(
        pool, tenant=team["tenant"], owner=team["bob"], actor=admin, pinned=True
    )
    client.force_login(admin)
    page = client.post(f"/network/pools/{pool.name}/delete/", follow=True).content.decode()
    assert (f"The pool {pool.name} is still in use: job {team['tenant'].slug}/on-pool (") in page
    assert f"10.77.0.10 reserved for bob in {team['tenant'].slug}, pinned" in page
    api = f"/api/v1/ip-pools/{pool.name}/"
    raw = {who: ApiToken.issue(team[who], "t")[1] for who in ("admin", "alice")}
    refused = client.delete(api, HTTP_AUTHORIZATION=f"Bearer {raw['admin']}")
    assert refused.status_code == 409
    assert "still in use" in refused.json()["detail"]
    assert cluster.get(NAD_API, NAD, pool.nad_name, namespace) is not None

    with django_capture_on_commit_callbacks(execute=True):
        job_services.delete_job(job, actor=team["bob"])
        services.release_address(kept, actor=admin)
    # A tenant admin is no platform admin: the pool is not theirs to delete.
    assert client.delete(api, HTTP_AUTHORIZATION=f"Bearer {raw['alice']}").status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        deleted = client.delete(api, HTTP_AUTHORIZATION=f"Bearer {raw['admin']}")
    assert deleted.status_code == 204
    again = client.delete(api, HTTP_AUTHORIZATION=f"Bearer {raw['admin']}")
    assert again.status_code == 404  # a second click finds nothing, no error page
    with pytest.raises(services.ValidationError) as raced:  # one that read it before
        services.delete_pool(pool, actor=admin)
    assert raced.value.messages == [f"The pool {pool.name} was deleted meanwhile."]
    assert cluster.get(NAD_API, NAD, pool.nad_name, namespace) is None
    assert cluster.get(NAD_API, NAD, pool.static_nad_name, namespace) is None
    event = AuditEvent.objects.get(action="ip_pool.delete")
    assert (event.actor_name, event.before["cidr"]) == ("admin", "10.77.0.0/24")
    assert pool.name not in client.get("/network/pools/").content.decode()
    # A launch naming the deleted pool says which pools there are.
    with pytest.raises(job_services.ValidationError) as caught:
        job_services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name="too-late"
        )
    assert caught.value.message_dict["networks[0].pool"] == [
        f"No pool '{pool.name}' is open to {team['tenant'].slug}; available: none."
    ]


def test_networks_of_a_pool_that_no_longer_exists_go_with_the_next_resync(cluster, team, pool):
    """A deletion whose cleanup never ran (a worker lost it) still converges."""
    from networking.tasks import resync_pools

    leftover = cluster.get(NAD_API, NAD, pool.nad_name, team["tenant"].namespace)
    leftover["metadata"] = {
        "name": "left-behind",
        "namespace": team["tenant"].namespace,
        "labels": {**leftover["metadata"]["labels"], "gpu-portal.io/ip-pool": "gone-pool"},
    }
    cluster.apply_one(leftover)
    resync_pools()
    assert cluster.get(NAD_API, NAD, "left-behind", team["tenant"].namespace) is None
    assert cluster.get(NAD_API, NAD, pool.nad_name, team["tenant"].namespace) is not None


def test_a_pool_is_not_deleted_on_allocations_the_cluster_could_not_confirm(
    team, pool, admin, monkeypatch
):
    from k8s_adapters.errors import TransientK8sError

    def silent(pool):
        raise TransientK8sError("connection refused")

    monkeypatch.setattr(services, "live_allocations", silent)
    with pytest.raises(services.ValidationError) as caught:
        services.delete_pool(pool, actor=admin)
    assert "Cannot read Whereabouts' allocations of the pool" in caught.value.messages[0]
    assert type(pool).objects.filter(pk=pool.pk).exists()


def test_whereabouts_empty_range_of_a_deleted_pool_goes_and_every_other_range_stays(
    cluster, team, pool
):
    """Whereabouts keeps a range's IPPool object after its last address is released; once the
    portal pool of that range is gone, the resync removes it, empty. Whereabouts' objects of
    other networks, a gone pool's range that still holds an address, and a live pool's range
    stay."""
    from networking.tasks import resync_pools

    tag = team["tenant"].slug[-6:]

    def whereabouts(name, cidr, allocations=None):
        cluster.apply_one(
            {  # what Whereabouts itself would have written
                "apiVersion": WHEREABOUTS_API,
                "kind": "IPPool",
                "metadata": {"name": name, "namespace": "kube-system"},
                "spec": {"range": cidr, "allocations": allocations or {}},
            }
        )
        return name

    held = {"5": {"id": "c1", "podref": f"{team['tenant'].namespace}/left", "ifname": "net1"}}
    gone = whereabouts(f"gpu-portal-gone-{tag}-10.78.0.0-24", "10.78.0.0/24")
    busy = whereabouts(f"gpu-portal-busy-{tag}-10.79.0.0-24", "10.79.0.0/24", held)
    other = whereabouts(f"other-net-{tag}-10.80.0.0-24", "10.80.0.0/24")
    live = whereabouts(pool.whereabouts_name, "10.77.0.0/24")
    try:
        resync_pools()
        left = {
            n
            for n in (gone, busy, other, live)
            if cluster.get(WHEREABOUTS_API, "IPPool", n, "kube-system")
        }
        assert left == {busy, other, live}
    finally:
        for name in (gone, busy, other):
            cluster.delete(WHEREABOUTS_API, "IPPool", name, "kube-system")


def test_an_empty_range_given_an_address_after_it_was_read_is_not_deleted(cluster, team):
    """A pool made again on the range, whose first pod Whereabouts gave an address between the
    prune's read and its delete: the object changed, and stays with that allocation."""
    from k8s_adapters.multus import read_whereabouts_pool
    from networking.tasks import _delete_empty_range

    name = f"gpu-portal-again-{team['tenant'].slug[-6:]}-10.81.0.0-24"
    ippool = {
        "apiVersion": WHEREABOUTS_API,
        "kind": "IPPool",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {"range": "10.81.0.0/24", "allocations": {}},
    }
    read = read_whereabouts_pool(cluster.apply_one(ippool))
    assert (read.portal, read.allocated) == (True, 0)
    ippool["spec"]["allocations"] = {"1": {"id": "c1", "podref": "ns/first", "ifname": "net1"}}
    cluster.apply_one(ippool)
    try:
        _delete_empty_range(cluster, read)
        kept = cluster.get(WHEREABOUTS_API, "IPPool", name, "kube-system")
        assert kept is not None
        assert "1" in kept["spec"]["allocations"]
    finally:
        cluster.delete(WHEREABOUTS_API, "IPPool", name, "kube-system")


def test_a_pool_whose_addresses_whereabouts_holds_keeps_its_cidr(cluster, team, pool, admin):
    """Whereabouts keeps a range's addresses in an IPPool object named by the CIDR: under a new
    CIDR it would start empty and hand out the addresses pods still hold."""
    held = {"15": {"id": "c1", "podref": f"{team['tenant'].namespace}/trainer-0", "ifname": "n1"}}
    cluster.apply_one(
        {  # what Whereabouts itself writes for a pod on the pool
            "apiVersion": WHEREABOUTS_API,
            "kind": "IPPool",
            "metadata": {"name": pool.whereabouts_name, "namespace": "kube-system"},
            "spec": {"range": "10.77.0.0/24", "allocations": held},
        }
    )
    with pytest.raises(services.ValidationError) as caught:
        services.update_pool(pool, actor=admin, cidr="10.77.0.0/23", range_end="10.77.1.100")
    message = caught.value.message_dict["cidr"][0]
    assert "can change only while nothing uses the pool" in message
    assert f"10.77.0.15 allocated by Whereabouts to pod {team['tenant'].namespace}/trainer-0" in (
        message
    )
    pool.refresh_from_db()
    assert pool.cidr == "10.77.0.0/24"

    cluster.delete(WHEREABOUTS_API, "IPPool", pool.whereabouts_name, "kube-system")  # released
    services.update_pool(pool, actor=admin, cidr="10.77.0.0/23", range_end="10.77.1.100")
    pool.refresh_from_db()
    assert pool.cidr == "10.77.0.0/23"


def test_an_address_reserved_for_a_live_job_is_not_released_from_under_it(
    cluster, team, pool, admin, templates, django_capture_on_commit_callbacks, client
):
    """Released, Whereabouts would hand it to the next pod while the job's own pod has it."""
    from rest_framework.test import APIClient

    data = {**templates["single-gpu"].spec, "networks": [{"pool": pool.name, "static_ip": True}]}
    with django_capture_on_commit_callbacks(execute=True):
        job, _ = job_services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name="static-one"
        )
    reserved = IPReservation.objects.get(job=job)
    api = APIClient()
    api.force_login(admin)
    response = api.delete(f"/api/v1/ip-pools/{pool.name}/reservations/{reserved.pk}/")
    assert response.status_code == 409
    assert response.json()["detail"].startswith(
        f"10.77.0.10 is still in use by job {team['tenant'].slug}/static-one"
    )
    client.force_login(admin)
    page = client.post(
        reverse("networking:release-reservation", args=[pool.name, reserved.pk]), follow=True
    ).content.decode()
    assert "is still in use by job" in page
    assert IPReservation.objects.filter(pk=reserved.pk).exists()


def test_a_fixed_address_whereabouts_gave_away_first_keeps_its_job_waiting(
    cluster, team, pool, templates, django_capture_on_commit_callbacks
):
    """Between the reservation and the pool's networks excluding it, Whereabouts (which hands
    out the lowest free address too) gave the address to another pod: the job's pod would
    share it on the wire. It waits, saying why, and starts once the address is free."""
    from jobs.choices import JobState
    from jobs.tasks import reconcile_job

    data = {**templates["single-gpu"].spec, "networks": [{"pool": pool.name, "static_ip": True}]}
    with django_capture_on_commit_callbacks(execute=False) as launched:
        job, _ = job_services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name="fixed"
        )
    reserved = IPReservation.objects.get(job=job)
    other = f"{team['tenant'].namespace}/early-0"
    ippool = {  # what Whereabouts wrote for a pod that started meanwhile
        "apiVersion": WHEREABOUTS_API,
        "kind": "IPPool",
        "metadata": {"name": pool.whereabouts_name, "namespace": "kube-system"},
        "spec": {
            "range": "10.77.0.0/24",
            "allocations": {"10": {"id": "c1", "podref": other, "ifname": "net1"}},
        },
    }
    cluster.apply_one(ippool)
    for callback in launched:
        callback()

    def told():  # reconciled as the collector's watch on its claim would, once bound
        reconcile_job(job.pk)
        job.refresh_from_db()
        return job.pending_reason.startswith("Its fixed address")

    wait_for(told, timeout=30, interval=0.3, message="the job to say its address is taken")
    assert job.state == JobState.PENDING
    assert job.pending_reason.startswith(
        f"Its fixed address {reserved.ip} on pool {pool.name} is in use by pod {other}"
    )
    assert cluster.get(VCJOB_API, "Job", "fixed", team["tenant"].namespace) is None
    nad = json.loads(
        cluster.get(NAD_API, NAD, pool.nad_name, team["tenant"].namespace)["spec"]["config"]
    )
    assert f"{reserved.ip}/32" in nad["ipam"]["exclude"]  # Whereabouts hands it out no more

    cluster.delete(WHEREABOUTS_API, "IPPool", pool.whereabouts_name, "kube-system")  # released
    reconcile_job(job.pk)
    submitted(job)


def test_a_pinned_address_is_not_reused_while_its_last_pod_still_stops(
    cluster, team, pool, templates, django_capture_on_commit_callbacks
):
    """Volcano may end a job while its pod still stops (here its Volcano job was deleted by
    hand): the next job taking that pinned address would share it on the wire meanwhile."""
    from jobs.choices import JobState
    from jobs.tasks import reconcile_job
    from tests.jobs.conftest import settle

    data = {
        **templates["single-gpu"].spec,
        "command": "sh -c \"trap 'sleep 6' TERM; python train.py\"",
        "networks": [{"pool": pool.name, "static_ip": True, "pinned": True}],
    }

    def launch(name):
        with django_capture_on_commit_callbacks(execute=True):
            job, _ = job_services.launch_job(
                team["tenant"], team["bob"], actor=team["bob"], spec_data=data, name=name
            )
        return job

    first = settle(submitted(launch("box")), JobState.RUNNING)
    cluster.delete(VCJOB_API, "Job", "box", team["tenant"].namespace)
    first = settle(first, JobState.FAILED)
    assert first.quota_released_at is None  # its pod still stops
    beside = launch("box-2")
    assert IPReservation.objects.get(job=beside).ip == "10.77.0.11"
    wait_for(
        lambda: reconcile_job(first.pk) or Job.objects.get(pk=first.pk).quota_released_at,
        timeout=30,
        interval=0.5,
        message="the ended job's pod to stop",
    )
    again = launch("box-3")
    assert IPReservation.objects.get(job=again).ip == "10.77.0.10"
