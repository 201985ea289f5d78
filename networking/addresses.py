"""The secondary addresses of a job's pods, as Multus reports them, and in plain words why a pod
has none yet (researchers need the addresses for NCCL/Gloo and SSH between nodes)."""

import functools
from dataclasses import dataclass

from core.cluster import get_cluster
from k8s_adapters.errors import K8sError
from k8s_adapters.labels import JOB
from k8s_adapters.multus import (
    SANDBOX_FAILED,
    PodNetworks,
    network_status,
    pod_networks,
    pool_of_network,
)

from .models import IPPool

# Whereabouts' words when no address of the range is left.
WHEREABOUTS_EXHAUSTED = "Could not allocate IP in range"


@dataclass(frozen=True)
class PodAddresses:
    pod: str
    node: str
    interfaces: tuple[dict, ...]  # {interface, network, ips}
    problem: str  # "" when the pod's networks are set up or simply not yet


@dataclass(frozen=True)
class JobAddresses:
    pods: tuple[PodAddresses, ...]
    unavailable: str = ""  # why the cluster could not be asked


def _pool_of(network: str) -> IPPool | None:
    name = pool_of_network(network)
    return IPPool.objects.filter(name=name).first() if name else None


def explain(found: PodNetworks, pool_of=_pool_of) -> str:
    """The pod's sandbox failure in words a researcher can act on."""
    if not found.failure:
        return ""
    pool = pool_of(found.failed_network)
    if WHEREABOUTS_EXHAUSTED in found.failure:
        if pool is None:
            return f"Pool exhausted: network {found.failed_network} has no free address left."
        return (
            f"Pool {pool.name} exhausted: no free address left in {pool.range_start}-"
            f"{pool.range_end}. The pod starts when an address is released."
        )
    where = f"pool {pool.name}" if pool else f"network {found.failed_network or '?'}"
    return f"The {where} could not be attached: {found.failure.rsplit(': ', 1)[-1]}"


def job_addresses(job) -> JobAddresses:
    """Per pod of the job, its secondary interfaces and addresses, or why it has none."""
    return jobs_addresses([job])[job.pk]


def jobs_addresses(jobs) -> dict[int, JobAddresses]:
    """`job_addresses` of each of `jobs` (by pk), reading the pods of those jobs once per
    namespace (a page of jobs in the API asks once, not once per job)."""
    found = {job.pk: JobAddresses(pods=()) for job in jobs}
    live = [job for job in jobs if job.networks and not job.is_finished]  # finished: pods gone
    by_namespace = {}
    for job in live:
        by_namespace.setdefault(job.tenant.namespace, {})[job.name] = job.pk
    for namespace, pks in by_namespace.items():
        try:
            cluster = get_cluster()
            pods = cluster.list("v1", "Pod", namespace=namespace, labels={JOB: set(pks)})
            # Why a pod has no address is in its Events: read only while one has none (a
            # running job's page, polled every few seconds, reads its pods alone).
            events = (
                cluster.list("v1", "Event", namespace=namespace, fields={"reason": SANDBOX_FAILED})
                if any(not network_status(pod) for pod in pods)
                else []
            )
        except K8sError as exc:
            unavailable = JobAddresses(
                pods=(), unavailable=f"The cluster did not answer: {exc.message}"
            )
            found.update(dict.fromkeys(pks.values(), unavailable))
            continue
        per_job = {}
        pool_of = functools.cache(_pool_of)  # many pods fail on the same network
        for pod in pod_networks(pods, events):
            if pod.job in pks:
                per_job.setdefault(pks[pod.job], []).append(_addresses(pod, pool_of))
        found.update({pk: JobAddresses(pods=tuple(p)) for pk, p in per_job.items()})
    return found


def _addresses(found: PodNetworks, pool_of) -> PodAddresses:
    return PodAddresses(
        pod=found.pod,
        node=found.node,
        interfaces=tuple(
            {"interface": i.interface, "network": i.network, "ips": list(i.ips)}
            for i in found.interfaces
        ),
        problem=explain(found, pool_of),
    )
