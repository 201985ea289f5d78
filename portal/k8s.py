"""The process-wide connection to the cluster named by settings.KUBECONFIG."""

import functools

from django.conf import settings

from k8s_adapters.client import Cluster


@functools.cache
def get_cluster() -> Cluster:
    return Cluster.connect(settings.KUBECONFIG or None, field_manager=settings.K8S_FIELD_MANAGER)
