"""The process-wide connection to the cluster named by settings.KUBECONFIG, and the few cluster
facts writes check against: kept fresh by the collector, which watches the nodes anyway, else
listed by the write that needs them and cached briefly (a burst of launches lists nodes once)."""

import functools

from django.conf import settings
from django.core.cache import cache

from k8s_adapters.client import Cluster
from k8s_adapters.errors import K8sError
from k8s_adapters.inventory import GpuSummary, gpu_summary

GPU_SUMMARY_KEY = "node-gpu-summary"
GPU_SUMMARY_SECONDS = 30  # listed by a write
# Written by the collector on every change of the nodes and at least every PUBLISH_EVERY
# seconds: a launch then never lists the nodes (a LIST of a hundred nodes took 15-90 ms, on the
# path of one launch in thirty).
PUBLISH_EVERY = 20
COLLECTED_GPU_SUMMARY_SECONDS = 3 * PUBLISH_EVERY


@functools.cache
def get_cluster() -> Cluster:
    return Cluster.connect(settings.KUBECONFIG or None, field_manager=settings.K8S_FIELD_MANAGER)


def node_gpus() -> GpuSummary | None:
    """GPUs over all nodes (total, largest node, products), or None when the cluster can't say."""
    summary = cache.get(GPU_SUMMARY_KEY)
    if summary is None:
        try:
            summary = gpu_summary(get_cluster().list("v1", "Node"))
        except K8sError:
            return None
        cache.set(GPU_SUMMARY_KEY, summary, GPU_SUMMARY_SECONDS)
    return summary


def publish_node_gpus(summary: GpuSummary) -> None:
    """The collector's account of the nodes' GPUs, for writes to read instead of listing."""
    cache.set(GPU_SUMMARY_KEY, summary, COLLECTED_GPU_SUMMARY_SECONDS)
