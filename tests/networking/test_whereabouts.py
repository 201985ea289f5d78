"""Jobs on IP pools against the real Whereabouts and static IPAM plugins: the test bed's CNI
runner plays the container runtime and Multus for the pods (created and bound here, as Volcano's
controller and scheduler would), and the portal reads back what really happened."""

import concurrent.futures
import ipaddress
import json
import subprocess
import time
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from jobs import services as job_services
from k8s_adapters.multus import WHEREABOUTS_API
from k8s_adapters.volcano import VCJOB_API
from networking import services
from networking.addresses import job_addresses
from networking.models import IPPool
from networking.tasks import reconcile_pool, remove_allocation
from tests.helpers import cluster_lists, wait_for
from tests.jobs.conftest import deleted, submitted
from tests.processes import ROOT

pytestmark = pytest.mark.django_db
# The test bed's CPU nodes (hack/controlplane.sh): the CPU-only pods of these tests run there.
CPU_NODE, OTHER_CPU_NODE = "kwok-cpu-00", "kwok-cpu-01"
SKIP_DEL = "gpu-portal.test/skip-cni-del"
ORIP = "OverlappingRangeIPReservation"


def api(user):
    client = APIClient()
    client.force_login(user)
    return client


@pytest.fixture
def pool_on(team, admin, cluster, django_capture_on_commit_callbacks):
    """Create pools open to the team (NADs reconciled inline); their Whereabouts IPPools are
    deleted afterwards."""
    made = []

    def make(cidr, range_start, range_end, **fields):
        with django_capture_on_commit_callbacks(execute=True):
            pool = services.create_pool(
                actor=admin,
                name=f"wb-{uuid.uuid4().hex[:6]}",
                cidr=cidr,
                range_start=range_start,
                range_end=range_end,
                master="bond0",
                vlan=fields.pop("vlan", 300),
                tenants=[team["tenant"]],
                **fields,
            )
        made.append(pool)
        return pool

    yield make
    # The pods go first, and their DELs end, so no DEL re-creates an IPPool deleted here. Their
    # Volcano jobs before them, else Volcano's controller makes the pods again (and Whereabouts
    # gives them addresses again) while this waits.
    namespace = team["tenant"].namespace
    for vcjob in cluster.list(VCJOB_API, "Job", namespace=namespace):
        cluster.delete(VCJOB_API, "Job", vcjob["metadata"]["name"], namespace)
    cluster.force_delete_pods(namespace)
    deadline = time.monotonic() + 60
    kept = [pool for pool in made if IPPool.objects.filter(pk=pool.pk).exists()]
    while time.monotonic() < deadline and any(observed(pool) for pool in kept):
        time.sleep(0.5)
    for pool in made:
        cluster.delete(WHEREABOUTS_API, "IPPool", whereabouts_name(pool), "kube-system")
    # Whereabouts' cluster-wide per-address reservations of what a failed test left behind.
    for reservation in cluster.list(WHEREABOUTS_API, ORIP, namespace="kube-system"):
        name = reservation["metadata"]["name"]  # "<network name>-<address>"
        if any(name.startswith(f"{pool.network_name}-") for pool in made):
            cluster.delete(WHEREABOUTS_API, ORIP, name, "kube-system")


def whereabouts_name(pool):
    return f"{pool.network_name}-{str(pool.network).replace(':', '-').replace('/', '-')}"


@pytest.fixture
def launch_on(team, templates, django_capture_on_commit_callbacks):
    """Launch a job of `replicas` CPU-only pods on the given networks as bob."""

    def launch(networks, replicas=1, name=None):
        spec = dict(templates["single-gpu"].spec)
        task = {**spec["tasks"][0], "replicas": replicas, "gpus": 0, "cpu": "10m"}
        task.update(memory="16Mi", shm="16Mi")
        spec.update(tasks=[task], networks=networks)
        with django_capture_on_commit_callbacks(execute=True):
            job, _ = job_services.launch_job(
                team["tenant"],
                team["bob"],
                actor=team["bob"],
                spec_data=spec,
                name=name or f"net-{uuid.uuid4().hex[:6]}",
            )
        job.refresh_from_db()
        return job

    return launch


def start_pods(cluster, job, *, annotations=None, submit=True):
    """The job's pods as the real Volcano creates and schedules them (CPU-only pods go to the
    test bed's CPU nodes), once every one is bound to a node; `annotations` are then added to
    each (the CNI runner reads them when the pod goes)."""
    namespace = job.tenant.namespace
    expected = sum(task["replicas"] for task in job.spec["tasks"])

    def bound():
        if submit:  # (threads have no test database: their caller submits)
            submitted(job)
        pods = cluster.list(
            "v1", "Pod", namespace=namespace, labels={"volcano.sh/job-name": job.name}
        )
        ready = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
        return ready if len(ready) == expected else None

    pods = wait_for(bound, timeout=180, interval=0.5, message=f"{expected} pods bound by Volcano")
    names = [p["metadata"]["name"] for p in pods]
    for name in names if annotations else []:
        cluster.patch_merge(
            "v1", "Pod", name, {"metadata": {"annotations": annotations}}, namespace
        )
    return names


def settled(job, count):
    """The job's pods once each has its addresses or a reason it has none."""

    def check():
        found = job_addresses(job)
        done = [p for p in found.pods if p.interfaces or p.problem]
        return found.pods if len(found.pods) == count and len(done) == count else None

    return wait_for(check, timeout=240, interval=1, message=f"{count} pods to settle")


def addresses_of(pods, interface="net1"):
    return [
        ip for p in pods for i in p.interfaces if i["interface"] == interface for ip in i["ips"]
    ]


def hosts(first, last):
    start, end = int(ipaddress.ip_address(first)), int(ipaddress.ip_address(last))
    return {str(ipaddress.ip_address(v)) for v in range(start, end + 1)}


def reserve(capture, pool, team, admin, addresses):
    """Reserve addresses for alice, committed (so the pool's NADs exclude them, as after any
    reservation)."""
    for address in addresses:
        with capture(execute=True):
            services.reserve_address(
                pool, tenant=team["tenant"], owner=team["alice"], actor=admin, address=address
            )


def observed(pool):
    reconcile_pool(pool.pk)
    pool.refresh_from_db()
    return {a["address"]: a["podref"] for a in pool.observed_allocations}


def page(user, job):
    client = APIClient()
    client.force_login(user)
    return client.get(reverse("jobs:detail", args=[job.tenant.slug, job.name])).content.decode()


# -- every pool shape the portal accepts -------------------------------------------------------

SHAPES = {
    # The range touches both ends of the network: every host address, nothing else.
    "range touching the ends": (
        ("10.91.0.0/28", "10.91.0.1", "10.91.0.14", {}),
        hosts("10.91.0.1", "10.91.0.14"),
    ),
    # Exclusions overlapping each other and the gateway: .4-.9 and .8/30 (.8-.11) and .20.
    "overlapping exclusions": (
        (
            "10.92.0.0/27",
            "10.92.0.2",
            "10.92.0.22",
            {
                "gateway": "10.92.0.1",
                "exclusions": ["10.92.0.4-10.92.0.9", "10.92.0.8/30", "10.92.0.20"],
            },
        ),
        hosts("10.92.0.2", "10.92.0.22") - hosts("10.92.0.4", "10.92.0.11") - {"10.92.0.20"},
    ),
    # IPv6, the range touching both ends, with overlapping exclusions (::4-::6 and ::6/127).
    "IPv6": (
        (
            "fd00:91::/124",
            "fd00:91::1",
            "fd00:91::e",
            {"exclusions": ["fd00:91::4-fd00:91::6", "fd00:91::6/127"]},
        ),
        hosts("fd00:91::1", "fd00:91::e") - hosts("fd00:91::4", "fd00:91::7"),
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_pods_get_exactly_the_free_addresses_of_each_pool_shape_and_the_job_page_shows_them(
    shape, cni_runner, cluster, team, pool_on, launch_on
):
    (cidr, first, last, fields), free = SHAPES[shape]
    pool = pool_on(cidr, first, last, **fields)
    job = launch_on([{"pool": pool.name}], replicas=len(free) + 1)
    start_pods(cluster, job)
    pods = settled(job, len(free) + 1)

    got = addresses_of(pods)
    assert sorted(got) == sorted(free)  # each free address once, no excluded one, no duplicate
    assert observed(pool) == {
        ip: f"{job.tenant.namespace}/{p.pod}" for p in pods for ip in addresses_of([p])
    }
    starved = [p for p in pods if not p.interfaces]
    assert [p.problem for p in starved] == [
        f"Pool {pool.name} exhausted: no free address left in {first}-{last}. "
        "The pod starts when an address is released."
    ]
    html = page(team["bob"], job)
    for ip in got:
        assert f"<code>{ip}</code>" in html
    assert f"Pool {pool.name} exhausted" in html


def test_reserved_and_pinned_addresses_go_only_to_their_pods(
    cni_runner, cluster, team, admin, pool_on, launch_on, django_capture_on_commit_callbacks
):
    pool = pool_on("10.93.0.0/28", "10.93.0.1", "10.93.0.14")
    reserve(
        django_capture_on_commit_callbacks,
        pool,
        team,
        admin,
        ["10.93.0.1", "10.93.0.5", "10.93.0.14"],
    )
    pinned_job = launch_on([{"pool": pool.name, "static_ip": True, "pinned": True}])
    reserved = pinned_job.ip_reservations.get()
    assert reserved.ip == "10.93.0.2"  # the first address nobody reserved
    start_pods(cluster, pinned_job)
    [pinned_pod] = settled(pinned_job, 1)
    assert pinned_pod.interfaces == (
        {
            "interface": "net1",
            "network": f"{team['tenant'].namespace}/{pool.static_nad_name}",
            "ips": ["10.93.0.2"],
        },
    )

    crowd = launch_on([{"pool": pool.name}], replicas=12)
    start_pods(cluster, crowd)
    pods = settled(crowd, 12)
    free = hosts("10.93.0.1", "10.93.0.14") - {"10.93.0.1", "10.93.0.2", "10.93.0.5", "10.93.0.14"}
    assert sorted(addresses_of(pods)) == sorted(free)
    assert len([p for p in pods if p.problem]) == 2
    assert set(observed(pool)) == free  # the static address never enters Whereabouts' pool

    body = api(team["bob"]).get(f"/api/v1/tenants/{team['tenant'].slug}/jobs/{pinned_job.name}/")
    assert body.json()["network_addresses"]["pods"][0]["interfaces"][0]["ips"] == ["10.93.0.2"]

    # The job list shows each job's own addresses, the tenant's pods read once for the page.
    with cluster_lists() as lists:
        listed = api(team["bob"]).get(f"/api/v1/tenants/{team['tenant'].slug}/jobs/").json()
    by_name = {job["name"]: job["network_addresses"] for job in listed["results"]}
    assert by_name[pinned_job.name]["pods"][0]["interfaces"][0]["ips"] == ["10.93.0.2"]
    crowd_listed = by_name[crowd.name]["pods"]
    listed_ips = [ip for p in crowd_listed for i in p["interfaces"] for ip in i["ips"]]
    assert sorted(listed_ips) == sorted(free)
    assert [(p["pod"], p["problem"]) for p in crowd_listed] == [(p.pod, p.problem) for p in pods]
    assert [kind for kind, _ in lists].count("Pod") == 1


# -- 200 pods at once on a /28 ----------------------------------------------------------------


def test_two_hundred_pods_at_once_on_a_slash_28_share_exactly_the_free_addresses(
    cni_runner, cluster, team, admin, pool_on, launch_on, django_capture_on_commit_callbacks
):
    pool = pool_on("10.94.0.0/28", "10.94.0.1", "10.94.0.14", gateway="10.94.0.1")
    reserve(
        django_capture_on_commit_callbacks,
        pool,
        team,
        admin,
        ["10.94.0.3", "10.94.0.8", "10.94.0.9"],
    )
    job = launch_on([{"pool": pool.name}], replicas=200)
    start_pods(cluster, job)
    pods = settled(job, 200)

    free = hosts("10.94.0.2", "10.94.0.14") - {"10.94.0.3", "10.94.0.8", "10.94.0.9"}
    got = addresses_of(pods)
    assert sorted(got) == sorted(free)
    starved = [p for p in pods if not p.interfaces]
    assert len(starved) == 200 - len(free)
    assert {p.problem for p in starved} == {
        f"Pool {pool.name} exhausted: no free address left in 10.94.0.1-10.94.0.14. "
        "The pod starts when an address is released."
    }
    with CaptureQueriesContext(connection) as queries:
        job_addresses(job)
    assert len(queries.captured_queries) == 1  # the pool, read once for all its starved pods
    body = api(team["bob"]).get(f"/api/v1/tenants/{team['tenant'].slug}/jobs/{job.name}/").json()
    assert sum(1 for p in body["network_addresses"]["pods"] if "exhausted" in p["problem"]) == len(
        starved
    )


# -- releasing allocations while Whereabouts allocates ----------------------------------------


def test_releasing_stale_allocations_while_fifty_pods_start_loses_no_allocation(
    cni_runner, cluster, team, pool_on, launch_on
):
    pool = pool_on("10.95.0.0/24", "10.95.0.10", "10.95.0.250")
    # Twenty pods whose node vanished: deleted without the runtime's DEL, so Whereabouts keeps
    # their addresses (the leak users report).
    lost = launch_on([{"pool": pool.name}], replicas=20)
    start_pods(cluster, lost, annotations={SKIP_DEL: "true"})
    stale = {
        ip: f"{lost.tenant.namespace}/{p.pod}"
        for p in settled(lost, 20)
        for ip in addresses_of([p])
    }
    gone(cluster, lost)
    assert observed(pool) == stale

    job = launch_on([{"pool": pool.name}], replicas=50)
    assert job.tenant.namespace  # loaded here: the threads below have no test database
    submitted(job)  # Volcano makes its pods while the stale addresses are released
    with concurrent.futures.ThreadPoolExecutor(8) as executor:
        starting = executor.submit(start_pods, cluster, job, submit=False)
        released = list(executor.map(lambda item: remove_allocation(pool, *item), stale.items()))
        starting.result()
    pods = settled(job, 50)

    assert released == [True] * 20
    mine = {ip: f"{job.tenant.namespace}/{p.pod}" for p in pods for ip in addresses_of([p])}
    assert len(mine) == 50
    assert observed(pool) == mine  # every new allocation kept, every stale one gone


def test_a_release_of_an_address_that_changed_hands_does_nothing(
    cni_runner, cluster, team, pool_on, launch_on
):
    pool = pool_on("10.96.0.0/29", "10.96.0.1", "10.96.0.6")
    job = launch_on([{"pool": pool.name}])
    start_pods(cluster, job)
    [pod] = settled(job, 1)
    [address] = addresses_of([pod])
    assert remove_allocation(pool, address, f"{job.tenant.namespace}/someone-else") is False
    assert observed(pool) == {address: f"{job.tenant.namespace}/{pod.pod}"}


def test_deleting_the_pods_returns_their_addresses(cni_runner, cluster, team, pool_on, launch_on):
    pool = pool_on("10.97.0.0/29", "10.97.0.1", "10.97.0.6")
    job = launch_on([{"pool": pool.name}], replicas=3)
    start_pods(cluster, job)
    settled(job, 3)
    assert len(observed(pool)) == 3
    cluster.delete(VCJOB_API, "Job", job.name, job.tenant.namespace)  # its pods go, DEL'd
    wait_for(lambda: not observed(pool), timeout=60, message="Whereabouts to free the addresses")


def test_a_deleted_pool_leaves_nothing_of_whereabouts_once_its_pods_are_gone(
    cni_runner, cluster, team, admin, pool_on, launch_on, django_capture_on_commit_callbacks
):
    """The IPPool object the real Whereabouts made for the pool's range, empty once its pods
    went, goes with the pool."""
    pool = pool_on("10.101.0.0/29", "10.101.0.1", "10.101.0.6")
    job = launch_on([{"pool": pool.name}], replicas=2)
    start_pods(cluster, job)
    settled(job, 2)
    assert cluster.get(WHEREABOUTS_API, "IPPool", whereabouts_name(pool), "kube-system")
    with django_capture_on_commit_callbacks(execute=True):
        job_services.delete_job(job, actor=team["bob"])
    wait_for(lambda: not observed(pool), timeout=60, message="Whereabouts to free the addresses")
    deleted(job)
    with django_capture_on_commit_callbacks(execute=True):
        services.delete_pool(IPPool.objects.get(pk=pool.pk), actor=admin)
    assert cluster.get(WHEREABOUTS_API, "IPPool", whereabouts_name(pool), "kube-system") is None


def test_the_network_status_annotation_is_what_multus_writes(
    cni_runner, cluster, team, pool_on, launch_on
):
    pool = pool_on("10.98.0.0/29", "10.98.0.1", "10.98.0.6")
    job = launch_on([{"pool": pool.name}])
    [name] = start_pods(cluster, job)
    settled(job, 1)
    pod = cluster.get("v1", "Pod", name, job.tenant.namespace)
    status = json.loads(pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"])
    assert status == [
        {
            "name": f"{job.tenant.namespace}/{pool.nad_name}",
            "interface": "net1",
            "ips": ["10.98.0.1"],
            "dns": {},
        }
    ]
    assert IPPool.objects.get(pk=pool.pk).network_name in whereabouts_name(pool)


def test_a_reservation_never_takes_an_address_whereabouts_gave_to_a_pod(
    cni_runner, cluster, team, admin, pool_on, launch_on
):
    pool = pool_on("10.99.0.0/29", "10.99.0.1", "10.99.0.6")
    crowd = launch_on([{"pool": pool.name}], replicas=3)
    start_pods(cluster, crowd)
    pods = settled(crowd, 3)
    assert sorted(addresses_of(pods)) == ["10.99.0.1", "10.99.0.2", "10.99.0.3"]
    [holder] = [p.pod for p in pods if addresses_of([p]) == ["10.99.0.2"]]

    dev = launch_on([{"pool": pool.name, "static_ip": True}])
    assert dev.ip_reservations.get().ip == "10.99.0.4"
    start_pods(cluster, dev)
    assert addresses_of(settled(dev, 1)) == ["10.99.0.4"]

    response = api(admin).post(
        f"/api/v1/ip-pools/{pool.name}/reservations/",
        {"tenant": team["tenant"].slug, "owner": "bob", "ip": "10.99.0.2"},
        format="json",
    )
    assert response.status_code == 409
    assert response.json()["detail"] == (
        f"10.99.0.2 is in use by pod {crowd.tenant.namespace}/{holder} (given by "
        "Whereabouts); release that allocation first."
    )


@pytest.fixture
def control_loop(cni_runner, cluster):
    """Whereabouts' own ip-control-loop against the local API server, for the CPU node the
    test's pods run on (the other one is cordoned meanwhile: its pod controller watches its own
    node only): call the fixture's value to start it; it is stopped after the test."""
    script = ["bash", str(ROOT / "hack" / "whereabouts.sh")]
    cordon = {"spec": {"unschedulable": True}}
    cluster.patch_merge("v1", "Node", OTHER_CPU_NODE, cordon)
    try:
        yield lambda: subprocess.run([*script, "control-loop-start", CPU_NODE], check=True)
    finally:
        subprocess.run([*script, "control-loop-stop"], check=False)
        cluster.patch_merge("v1", "Node", OTHER_CPU_NODE, {"spec": {"unschedulable": None}})


def gone(cluster, job):
    """The job's pods vanish with their node's runtime: deleted, never DEL'd. The Volcano job
    goes first, else its controller would make the pods again."""
    cluster.delete(VCJOB_API, "Job", job.name, job.tenant.namespace)
    cluster.force_delete_pods(job.tenant.namespace)
    wait_for(lambda: not cluster.list("v1", "Pod", namespace=job.tenant.namespace), timeout=60)


def lose_pods(cluster, job):
    """Pods whose node vanished with its runtime: deleted, never DEL'd."""
    start_pods(cluster, job, annotations={SKIP_DEL: "true"})
    settled(job, job.spec["tasks"][0]["replicas"])
    gone(cluster, job)


def test_whereabouts_own_cleanup_frees_what_vanished_pods_left_and_the_pool_page_shows_it(
    control_loop, cluster, team, admin, pool_on, launch_on
):
    pool = pool_on("10.100.0.0/29", "10.100.0.1", "10.100.0.6")
    lose_pods(cluster, launch_on([{"pool": pool.name}], replicas=2))
    assert set(observed(pool)) == {"10.100.0.1", "10.100.0.2"}
    client = APIClient()
    client.force_login(admin)
    conflicts = client.get(f"/api/v1/ip-pools/{pool.name}/").json()["conflicts"]
    assert sorted((c["kind"], c["address"]) for c in conflicts) == [
        ("stale-allocation", "10.100.0.1"),
        ("stale-allocation", "10.100.0.2"),
    ]

    control_loop()  # its reconciler runs every minute and finds the leftovers
    wait_for(lambda: not observed(pool), timeout=150, interval=2, message="ip-control-loop")
    assert client.get(f"/api/v1/ip-pools/{pool.name}/").json()["conflicts"] == []

    # While it runs, its pod controller frees a deleted pod's addresses at once.
    lose_pods(cluster, launch_on([{"pool": pool.name}], replicas=3))
    wait_for(lambda: not observed(pool), timeout=30, interval=1, message="the pod controller")
