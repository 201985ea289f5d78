"""The adapter against the real kube-apiserver with the upstream CRD schemas installed."""

import pytest
from urllib3.connection import HTTPSConnection

from k8s_adapters.client import Cluster, ObjectRef, load_api_client
from k8s_adapters.errors import PermanentK8sError, TransientK8sError
from k8s_adapters.labels import JOB, portal_labels

VCJOB = "batch.volcano.sh/v1alpha1"


def vcjob(namespace, name="train", replicas=2):
    return {
        "apiVersion": VCJOB,
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": portal_labels(job=name)},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": 1,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox:1.36",
                                    "resources": {"limits": {"nvidia.com/gpu": "8"}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def configmap(namespace, name, labels=None, value="1"):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "data": {"value": value},
    }


def test_upstream_crds_and_cluster_objects_are_installed(cluster):
    crds = {
        c["metadata"]["name"]
        for c in cluster.list("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    }
    assert {
        "jobs.batch.volcano.sh",
        "queues.scheduling.volcano.sh",
        "podgroups.scheduling.volcano.sh",
        "hypernodes.topology.volcano.sh",
        "network-attachment-definitions.k8s.cni.cncf.io",
        "ippools.whereabouts.cni.cncf.io",
    } <= crds
    assert cluster.get("networking.k8s.io/v1", "IngressClass", "nginx") is not None
    assert cluster.get("node.k8s.io/v1", "RuntimeClass", "nvidia")["handler"] == "nvidia"


def test_api_server_rejects_a_malformed_volcano_job_with_the_schema_message(cluster, namespace):
    bad = vcjob(namespace)
    bad["spec"]["tasks"][0]["replicas"] = "two"
    with pytest.raises(PermanentK8sError) as caught:
        cluster.apply_one(bad)
    assert ".spec.tasks[0].replicas: expected numeric" in caught.value.message
    assert cluster.get(VCJOB, "Job", "train", namespace) is None


def test_api_server_rejects_a_volcano_job_missing_a_required_field(cluster, namespace):
    bad = vcjob(namespace)
    del bad["spec"]["tasks"][0]["template"]["spec"]["containers"]
    with pytest.raises(PermanentK8sError) as caught:
        cluster.apply_one(bad)
    assert caught.value.status == 422
    # Volcano's mutating webhook turns the missing list into null before the schema check.
    assert "spec.tasks[0].template.spec.containers" in caught.value.message
    assert cluster.get(VCJOB, "Job", "train", namespace) is None


def test_api_server_accepts_and_returns_a_valid_volcano_job(cluster, namespace):
    cluster.apply_one(vcjob(namespace))
    stored = cluster.get(VCJOB, "Job", "train", namespace)
    task = stored["spec"]["tasks"][0]
    assert task["replicas"] == 2
    assert task["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": "8"
    }
    assert stored["spec"]["queue"] == "default"


def test_dry_run_validates_without_persisting(cluster, namespace):
    cluster.apply_one(vcjob(namespace), dry_run=True)
    assert cluster.get(VCJOB, "Job", "train", namespace) is None


def nad(namespace):
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "l2", "namespace": namespace},
        "spec": {"config": '{"cniVersion": "0.3.1", "type": "macvlan"}'},
    }


def test_applying_the_same_manifests_twice_changes_nothing(cluster, namespace):
    manifests = [configmap(namespace, "a"), nad(namespace)]
    first = [obj["metadata"]["resourceVersion"] for obj in cluster.apply(manifests)]
    second = [obj["metadata"]["resourceVersion"] for obj in cluster.apply(manifests)]
    assert first == second


def test_volcano_refuses_a_reapplied_job_so_the_portal_never_reapplies_one(cluster, namespace):
    # Volcano's mutating webhook fills in defaults at creation, owned by the applier; applying
    # the same manifest again would remove them, which its validating webhook refuses. So the
    # job reconciler creates a Volcano job once and never applies it again.
    cluster.apply_one(vcjob(namespace))
    with pytest.raises(PermanentK8sError) as caught:
        cluster.apply_one(vcjob(namespace))
    assert "job updates may not change fields" in caught.value.message


def test_a_changed_manifest_updates_the_object(cluster, namespace):
    cluster.apply_one(configmap(namespace, "a", value="1"))
    cluster.apply_one(configmap(namespace, "a", value="2"))
    assert cluster.get("v1", "ConfigMap", "a", namespace)["data"] == {"value": "2"}


def test_apply_takes_over_fields_edited_by_hand(cluster, namespace):
    cluster.apply_one(configmap(namespace, "a", value="1"))
    hand = Cluster(cluster.api_client, field_manager="kubectl-edit")
    hand.apply_one(configmap(namespace, "a", value="edited"))
    cluster.apply_one(configmap(namespace, "a", value="1"))
    assert cluster.get("v1", "ConfigMap", "a", namespace)["data"] == {"value": "1"}


def test_prune_removes_labelled_objects_no_longer_desired_and_nothing_else(cluster, namespace):
    ours = portal_labels(tenant="t1")
    cluster.apply(
        [
            configmap(namespace, "keep", ours),
            configmap(namespace, "stale-1", ours),
            configmap(namespace, "stale-2", ours),
            configmap(namespace, "foreign"),
            configmap(namespace, "other-tenant", portal_labels(tenant="t2")),
        ]
    )
    keep = {ObjectRef("v1", "ConfigMap", namespace, "keep")}
    deleted = cluster.prune(
        labels=ours, keep=keep, kinds=[("v1", "ConfigMap")], namespace=namespace
    )
    assert sorted(ref.name for ref in deleted) == ["stale-1", "stale-2"]
    remaining = {
        c["metadata"]["name"] for c in cluster.list("v1", "ConfigMap", namespace=namespace)
    }
    assert {"keep", "foreign", "other-tenant"} <= remaining
    assert not {"stale-1", "stale-2"} & remaining


def test_list_selects_objects_by_any_of_a_labels_values(cluster, namespace):
    for name in ("a", "b", "c"):
        cluster.apply_one(configmap(namespace, name, portal_labels(job=f"train-{name}")))

    def names(labels):
        found = cluster.list("v1", "ConfigMap", namespace=namespace, labels=labels)
        return [o["metadata"]["name"] for o in found]

    assert names({JOB: {"train-a", "train-c"}}) == ["a", "c"]
    assert names({JOB: "train-b"}) == ["b"]


def test_watch_reports_changes_after_a_listed_version(cluster, namespace):
    _, version = cluster.list_with_version("v1", "ConfigMap", namespace=namespace)
    cluster.apply_one(configmap(namespace, "watched", value="1"))
    events = []
    for kind, obj in cluster.watch(
        "v1", "ConfigMap", namespace=namespace, resource_version=version, timeout=5
    ):
        if kind != "BOOKMARK":
            events.append((kind, obj["metadata"]["name"]))
            break
    assert events == [("ADDED", "watched")]


def test_the_write_a_watch_waited_for_goes_out_on_a_connection_already_open(
    cluster, namespace, monkeypatch
):
    """Leaving a watch before its end closes its connection. The write that follows (a job's
    submission once its claim binds) must not wait for a new TLS handshake for that."""
    connects = []
    connect = HTTPSConnection.connect
    monkeypatch.setattr(HTTPSConnection, "connect", lambda c: (connects.append(c), connect(c))[1])
    _, version = cluster.list_with_version("v1", "ConfigMap", namespace=namespace)
    cluster.apply_one(configmap(namespace, "watched", value="1"))
    for kind, _ in cluster.watch(
        "v1", "ConfigMap", namespace=namespace, resource_version=version, timeout=5
    ):
        if kind != "BOOKMARK":
            break
    connects.clear()
    written = cluster.apply_one(configmap(namespace, "watched", value="2"))
    assert written["data"] == {"value": "2"}
    assert connects == []


def test_an_unreachable_api_server_is_a_transient_error(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: x}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "current-context: c\n"
    )
    unreachable = Cluster(load_api_client(kubeconfig))
    unreachable.api_client.configuration.retries = 0
    with pytest.raises(TransientK8sError):
        unreachable.get("v1", "Namespace", "default")
    assert unreachable.ready() is False


def lagging_webhook(monkeypatch, refusals, exists):
    """A Cluster whose deletes an admission webhook refuses `refusals` times as "not found"
    (its cache has not seen the object yet), while the API server has it when `exists`."""
    cluster = Cluster.__new__(Cluster)
    calls = []

    def delete(api_version, kind, name, namespace):
        calls.append(name)
        if len(calls) <= refusals:
            raise PermanentK8sError(
                'admission webhook "validatequeue.volcano.sh" denied the request: '
                f'queue.scheduling.volcano.sh "{name}" not found',
                status=400,
            )
        return True

    monkeypatch.setattr(cluster, "_delete", delete)
    monkeypatch.setattr(
        cluster, "get", lambda *args: {"metadata": {"name": "q"}} if exists else None
    )
    return cluster, calls


def test_a_delete_refused_by_a_webhook_whose_cache_lags_is_retried(monkeypatch):
    # Volcano's queue webhook reads queues from its informer's cache: a queue deleted right
    # after its creation was refused as "not found" (a test's clean-up failed so on a busy
    # machine), and a tenant removed at once would have been left in error.
    cluster, calls = lagging_webhook(monkeypatch, refusals=2, exists=True)
    assert cluster.delete("scheduling.volcano.sh/v1beta1", "Queue", "q") is True
    assert len(calls) == 3


def test_a_delete_refused_for_an_object_gone_meanwhile_is_done(monkeypatch):
    cluster, calls = lagging_webhook(monkeypatch, refusals=1, exists=False)
    assert cluster.delete("scheduling.volcano.sh/v1beta1", "Queue", "q") is False
    assert len(calls) == 1


def test_a_webhook_that_never_catches_up_is_a_transient_error(monkeypatch):
    monkeypatch.setattr("k8s_adapters.client.WEBHOOK_CACHE_LAG", 0.3)
    cluster, _ = lagging_webhook(monkeypatch, refusals=100, exists=True)
    with pytest.raises(TransientK8sError):
        cluster.delete("scheduling.volcano.sh/v1beta1", "Queue", "q")
