"""Launching from templates into the real API server, and status flowing back."""

import html
import re

import pytest
import yaml
from django.core.exceptions import ValidationError

from accounts.models import SSHKey
from core.cluster import node_gpus
from jobs import services
from jobs.choices import JobState
from jobs.models import Job
from jobs.tasks import reconcile_job
from k8s_adapters.names import identity_label
from k8s_adapters.volcano import VCJOB_API
from tenants.models import Tenant
from tests.helpers import our_writes, wait_for
from tests.jobs.conftest import deleted, submitted

pytestmark = pytest.mark.django_db
ED25519 = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl bob@laptop"
)


def test_a_ddp_launch_creates_the_volcano_job_pvc_pair_and_ssh_secret(
    cluster, team, templates, launch
):
    SSHKey.objects.create(user=team["bob"], name="laptop", public_key=ED25519)
    volume = services.create_data_volume(
        team["tenant"], name="corpus", size_gib=500, actor=team["bob"]
    )
    job = launch(
        templates["pytorch-ddp"],
        name="ddp-1",
        data_volume=volume,
        overrides={"replicas": {"worker": 2}, "gpus": 8},
    )
    ns = team["tenant"].namespace
    vcjob = cluster.get(VCJOB_API, "Job", "ddp-1", ns)
    spec = vcjob["spec"]
    assert spec["queue"] == team["tenant"].queue_name
    assert spec["schedulerName"] == "volcano"
    assert [(t["name"], t["replicas"]) for t in spec["tasks"]] == [("master", 1), ("worker", 2)]
    for task in spec["tasks"]:
        pod = task["template"]["spec"]
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert pod["runtimeClassName"] == "nvidia"
    assert set(spec["plugins"]) == {"svc", "env"}
    assert vcjob["metadata"]["labels"]["gpu-portal.io/owner"] == identity_label("bob")
    assert vcjob["metadata"]["annotations"]["gpu-portal.io/owner-name"] == "bob"
    workspace = cluster.get("v1", "PersistentVolumeClaim", "ddp-1-workspace", ns)
    assert workspace["spec"]["resources"]["requests"]["storage"] == "200Gi"
    assert cluster.get("v1", "PersistentVolumeClaim", "corpus", ns) is not None
    secret = cluster.get("v1", "Secret", "ddp-1-ssh-keys", ns)
    assert secret is not None
    assert job.state == JobState.PENDING
    assert job.gpus == 24


def test_the_job_page_shows_the_manifests_the_cluster_holds(
    client, cluster, team, templates, launch
):
    job = launch(templates["pytorch-ddp"], name="shown-1", overrides={"gpus": 8})
    client.force_login(team["bob"])
    page = client.get(job.get_absolute_url()).content.decode()
    shown = re.search(r'<pre data-testid="manifests">(.*?)</pre>', page, re.S).group(1)
    documents = list(yaml.safe_load_all(html.unescape(shown)))
    assert f"{len(documents)} objects, as the portal applies them" in page
    kinds = [d["kind"] for d in documents]
    assert kinds[:2] == ["PersistentVolumeClaim", "Job"], kinds
    ns = team["tenant"].namespace
    vcjob = cluster.get(VCJOB_API, "Job", "shown-1", ns)
    assert documents[1]["spec"]["tasks"][1]["replicas"] == vcjob["spec"]["tasks"][1]["replicas"]
    for document in documents:
        meta = document["metadata"]
        assert cluster.get(document["apiVersion"], document["kind"], meta["name"], ns)
        assert meta["labels"]["gpu-portal.io/tenant"] == team["tenant"].slug


def test_reconciling_again_never_rewrites_the_volcano_job(cluster, team, templates, launch):
    job = launch(templates["single-gpu"], name="script-2")
    ns = team["tenant"].namespace
    before = our_writes(cluster.get(VCJOB_API, "Job", job.name, ns))
    Job.objects.filter(pk=job.pk).update(spec={**job.spec, "image": "changed:2"})
    reconcile_job(job.pk)
    after = cluster.get(VCJOB_API, "Job", job.name, ns)
    assert our_writes(after) == before
    assert after["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["image"] != "changed:2"


def test_delete_removes_everything_the_job_owns_but_keeps_the_data_volume(
    cluster, team, templates, launch, django_capture_on_commit_callbacks
):
    SSHKey.objects.create(user=team["bob"], name="laptop", public_key=ED25519)
    volume = services.create_data_volume(
        team["tenant"], name="keep-me", size_gib=10, actor=team["bob"]
    )
    job = launch(templates["single-gpu"], name="script-5", data_volume=volume)
    ns = team["tenant"].namespace
    with django_capture_on_commit_callbacks(execute=True):
        services.delete_job(job, actor=team["bob"])
    wait_for(
        lambda: cluster.get("v1", "PersistentVolumeClaim", "script-5-workspace", ns) is None,
        message="the workspace PVC to be deleted",
    )
    assert cluster.get(VCJOB_API, "Job", "script-5", ns) is None
    assert cluster.get("v1", "Secret", "script-5-ssh-keys", ns) is None
    assert cluster.get("v1", "PersistentVolumeClaim", "keep-me", ns) is not None
    deleted(job)


def test_a_job_larger_than_the_whole_quota_is_refused(team, templates, launch):
    with pytest.raises(ValidationError) as caught:
        launch(templates["pytorch-ddp"], overrides={"replicas": {"worker": 3}})
    assert caught.value.message_dict["gpus"] == [
        "This job asks for 32 GPUs but the tenant's whole quota is 24; it could never start. "
        "Ask for fewer GPUs."
    ]
    assert not Job.objects.exists()


def test_a_job_of_more_pods_than_the_tenant_may_run_is_refused_by_its_replicas(
    client, team, templates
):
    """Replicas of tiny requests fit any CPU quota: the pod quota keeps a tenant from filling
    every node's pod slots, and a job that could never fit it is refused in words."""
    Tenant.objects.filter(pk=team["tenant"].pk).update(gpu_quota=1000, pod_quota=3)
    url = f"/api/v1/tenants/{team['tenant'].slug}/jobs/"
    body = {"template": "pytorch-ddp", "name": "wide", "replicas": {"worker": 3}}
    client.force_login(team["bob"])
    refused = client.post(url, body, content_type="application/json")
    assert refused.status_code == 400
    assert [e["message"] for e in refused.json()["errors"]["tasks.replicas"]] == [
        "This job runs 4 pods (the replicas of all its tasks) but the tenant's whole quota is "
        "3; it could never start. Ask for fewer replicas or less per task, or ask a platform "
        "admin for more."
    ]
    assert not Job.objects.exists()
    body["replicas"] = {"worker": 2}
    assert client.post(url, body, content_type="application/json").status_code == 201
    assert Job.objects.get(name="wide").pods == 3


def test_more_gpus_per_replica_than_any_node_has_is_a_warning(
    cluster, team, templates, launch, django_capture_on_commit_callbacks
):
    from django.core.cache import cache

    cache.delete("node-gpu-summary")
    largest = node_gpus().largest
    with django_capture_on_commit_callbacks(execute=True):
        job, warnings = services.launch_job(
            team["tenant"],
            team["bob"],
            actor=team["bob"],
            template_version=templates["single-gpu"],
            overrides={"gpus": largest + 1},
            name="too-wide",
        )
    assert warnings == [
        f"Task main asks for {largest + 1} GPUs per replica but no node has more "
        f"than {largest}; it could never be scheduled."
    ]
    assert job.pk


def test_bad_overrides_reach_nothing_in_the_cluster(cluster, team, templates, launch):
    with pytest.raises(ValidationError) as caught:
        launch(templates["single-gpu"], name="Bad Name", overrides={"image": "Not An Image"})
    assert "name" in caught.value.message_dict
    with pytest.raises(ValidationError) as caught:
        launch(templates["single-gpu"], name="ok-name", overrides={"image": "Not An Image"})
    assert "registry/path/name:tag" in caught.value.message_dict["image"][0]
    assert cluster.get(VCJOB_API, "Job", "ok-name", team["tenant"].namespace) is None
    assert not Job.objects.exists()


def test_a_relaunch_recreates_the_recorded_spec(
    cluster, team, templates, launch, django_capture_on_commit_callbacks
):
    job = launch(
        templates["pytorch-ddp"], name="orig", overrides={"gpus": 4, "replicas": {"worker": 1}}
    )
    with django_capture_on_commit_callbacks(execute=True):
        again, _ = services.relaunch_job(job, actor=team["bob"], name="orig-again")
    submitted(again)
    first = cluster.get(VCJOB_API, "Job", "orig", team["tenant"].namespace)["spec"]
    second = cluster.get(VCJOB_API, "Job", "orig-again", team["tenant"].namespace)["spec"]
    assert first["tasks"][1]["replicas"] == second["tasks"][1]["replicas"] == 1
    assert (
        first["tasks"][0]["template"]["spec"]["containers"][0]["resources"]
        == second["tasks"][0]["template"]["spec"]["containers"][0]["resources"]
    )
    assert again.template_version == templates["pytorch-ddp"]  # its page names where it came from


def test_a_name_already_taken_in_the_tenant_is_a_field_error_on_the_form(
    client, cluster, team, templates, launch
):
    first = launch(templates["single-gpu"], name="taken")
    client.force_login(team["alice"])
    version = templates["single-gpu"]
    response = client.post(
        f"/tenants/{team['tenant'].slug}/jobs/launch/",
        {
            "template": version.template.name,
            "version": version.version,
            "name": "taken",
            "launch": "1",
        },
    )
    assert response.status_code == 200
    assert f"A job named &#x27;taken&#x27; already exists in {team['tenant'].slug}." in (
        response.content.decode()
    )
    assert list(Job.objects.filter(tenant=team["tenant"]).values_list("pk", "owner")) == [
        (first.pk, team["bob"].pk)
    ]


def test_a_launch_over_the_tenants_cpu_quota_says_so_in_words_on_the_form(
    client, cluster, team, templates
):
    Tenant.objects.filter(pk=team["tenant"].pk).update(cpu_quota=1)
    client.force_login(team["alice"])
    version = templates["single-gpu"]
    response = client.post(
        f"/tenants/{team['tenant'].slug}/jobs/launch/",
        {"template": version.template.name, "version": version.version, "launch": "1"},
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "but the tenant&#x27;s whole quota is 1; it could never start." in page
    assert "tasks.cpu" not in page  # the spec path means nothing on the form
    assert not Job.objects.filter(tenant=team["tenant"]).exists()


def test_a_launch_names_the_tenants_own_template_before_a_global_one_of_that_name(team):
    admin = team["admin"]
    spec = {"image": "registry.local/train:1", "command": ["python", "train.py"]}
    spec["tasks"] = [{"name": "main", "replicas": 1, "gpus": 1}]
    for _ in range(3):  # the global template has versions 1 to 3
        services.save_template(name="mine", spec_data=spec, overridable=[], actor=admin)
    own = services.save_template(
        name="mine", spec_data=spec, overridable=[], actor=admin, tenant=team["tenant"]
    )
    assert services.template_version(team["tenant"], "mine") == own
    assert services.template_version(team["tenant"], "mine", "1") == own
    with pytest.raises(ValidationError) as caught:
        services.template_version(team["tenant"], "mine", 3)  # only the global one has it
    assert caught.value.message_dict == {"version": ["Template mine has no version 3."]}
    with pytest.raises(ValidationError) as caught:
        services.template_version(team["tenant"], "mine", "latest")
    assert caught.value.message_dict == {"version": ["Template mine has no version latest."]}
    with pytest.raises(ValidationError) as caught:
        services.template_version(team["tenant"], "nope")
    assert caught.value.message_dict == {
        "template": [f"No template named 'nope' in {team['tenant'].slug}."]
    }
    own.template.delete()
    found = services.template_version(team["tenant"], "mine")
    assert (found.template.tenant, found.version) == (None, 3)
