"""What a job's page reads from the cluster to show its pods' addresses."""

import json

import pytest

from k8s_adapters.labels import JOB
from networking import addresses


class Recorded:
    """The cluster as the page's read sees it: pods of a job, each with or without the
    interfaces Multus reported; which kinds were listed."""

    def __init__(self, pods):
        self.pods, self.listed = pods, []

    def list(self, api, kind, **query):
        self.listed.append(kind)
        return self.pods if kind == "Pod" else []


def pod(name, job, interfaces):
    status = [{"name": "t/pool-a", "interface": "net1", "ips": ["10.0.0.5"]}] if interfaces else []
    annotations = {"k8s.v1.cni.cncf.io/network-status": json.dumps(status)} if interfaces else {}
    return {
        "metadata": {
            "name": name,
            "uid": name,
            "labels": {JOB: job},
            "annotations": annotations,
        },
        "spec": {"nodeName": "n1"},
    }


@pytest.mark.django_db
def test_events_are_read_only_while_a_pod_has_no_address(monkeypatch, team, templates):
    """The page polls every few seconds: a running job's addresses need its pods alone."""
    from jobs.models import Job

    job = Job(tenant=team["tenant"], name="net", networks=[{"pool": "a"}], state="running")
    job.pk = 1
    for with_address, reads in ((True, ["Pod"]), (False, ["Pod", "Event"])):
        cluster = Recorded([pod("net-main-0", "net", with_address)])
        monkeypatch.setattr(addresses, "get_cluster", lambda cluster=cluster: cluster)
        addresses.jobs_addresses([job])
        assert cluster.listed == reads
