"""The process-wide connection to the cluster named by settings.KUBECONFIG, and the few cluster
facts writes check against (cached briefly, so a burst of launches lists nodes once)."""

import functools

from django.conf import settings
from django.core.cache import cache

from k8s_adapters.client import Cluster
from k8s_adapters.errors import K8sError
from k8s_adapters.inventory import GpuSummary, gpu_summary

GPU_SUMMARY_SECONDS = 30


@functools.cache
def get_cluster() -> Cluster:
    return Cluster.connect(settings.KUBECONFIG or None, field_manager=settings.K8S_FIELD_MANAGER)


def node_gpus() -> GpuSummary | None:
    """GPUs over all nodes (total, largest node, products), or None when the cluster can't say."""
    summary = cache.get("node-gpu-summary")
    if summary is None:
        try:
            summary = gpu_summary(get_cluster().list("v1", "Node"))
        except K8sError:
            return None
        cache.set("node-gpu-summary", summary, GPU_SUMMARY_SECONDS)
    return summary
