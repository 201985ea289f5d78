"""Every user, name and spec the portal accepts becomes objects the real API server accepts (a
server-side dry run), and everything else is a refusal with a field path that says what to fix."""

import time
from urllib.parse import quote

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jobs import services
from jobs import spec as specs
from jobs.choices import JobState
from jobs.models import DataVolume, Endpoint, Job, JobTemplate
from jobs.tasks import reconcile_data_volume, reconcile_job
from k8s_adapters.names import endpoint_host_label, identity_label, pool_nad, pool_static_nad
from k8s_adapters.routing import DRIVERS, AuthSpec, EndpointSpec, endpoint_objects
from k8s_adapters.volcano import VCJOB_API, build_job
from tenants.models import Tenant
from tests.helpers import wait_for
from tests.jobs.conftest import launch_as, settle, submitted
from tests.tenants.conftest import make_user

pytestmark = pytest.mark.django_db

job_names = st.from_regex(r"[a-z]([-a-z0-9]{0,46}[a-z0-9])?", fullmatch=True)
port_names = st.from_regex(specs.PORT_NAME.pattern, fullmatch=True)
task_names = st.from_regex(specs.TASK_NAME.pattern, fullmatch=True)
usernames = st.one_of(
    st.emails().map(lambda e: e[:150]),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=150),
    st.from_regex(r"[\w.@+-]{1,150}", fullmatch=True),
)
env_values = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=50
)
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,20}", fullmatch=True).filter(
    lambda n: n not in specs.RESERVED_ENV and not n.startswith(specs.RESERVED_ENV_PREFIXES)
)


@st.composite
def launches(draw):
    tasks = draw(st.lists(task_names, min_size=1, max_size=3, unique=True))
    ports = draw(st.lists(port_names, max_size=3, unique=True))
    data = {
        "image": "nvcr.io/nvidia/pytorch:24.10-py3",
        "command": draw(st.lists(env_values, max_size=3)),
        "env": draw(st.dictionaries(names, env_values, max_size=3)),
        "tasks": [
            {
                "name": t,
                "replicas": draw(st.integers(1, 4)),
                "gpus": draw(st.integers(0, 8)),
                "gpu_product": draw(
                    st.sampled_from(["", "NVIDIA-H100-80GB-HBM3", "A100_SXM4.40GB"])
                ),
            }
            for t in tasks
        ],
        "expose": [
            {
                "name": p,
                "task": draw(st.sampled_from(tasks)),
                "container_port": draw(st.integers(1, 65535)),
            }
            for p in ports
        ],
        "volumes": {"workspace_gib": draw(st.integers(1, 500))},
        "ttl_seconds_after_finished": draw(st.none() | st.integers(0, 86400)),
    }
    return draw(job_names), draw(usernames), data


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(launch=launches())
def test_every_accepted_launch_is_accepted_by_the_api_server(cluster, namespace, launch):
    name, owner, data = launch
    try:
        spec = specs.parse(
            data, name=name, namespace=namespace, queue="default", tenant="vision", owner=owner
        )
    except ValidationError as refused:  # a refusal names the field and says what to fix
        unnamed = [p for p, messages in refused.message_dict.items() if not (p and messages)]
        event("refused")
        assert unnamed == []  # noqa: PT017  (the refusal is the input's expected outcome)
        return
    event("accepted")
    endpoints = [
        EndpointSpec(
            id=i + 1,
            name=p.name,
            job=name,
            task=p.task,
            tenant="vision",
            owner=owner,
            namespace=namespace,
            container_port=p.container_port,
            protocol="http",
            mode=mode,
            host=f"{endpoint_host_label('vision', name, p.name)}.endpoints.example.org",
        )
        for i, p in enumerate(spec.ports)
        for mode in ["ingress"]
    ]
    auth = AuthSpec("http://portal.portal.svc", "https://portal.example.org", "router/gw")
    objects = [*build_job(spec)]
    for driver in DRIVERS:
        objects += endpoint_objects(endpoints, auth, driver)
    cluster.apply(objects, dry_run=True)  # a refusal raises PermanentK8sError


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"tasks": [["main"]]}, "tasks[0]"),
        ({"tasks": {"name": "main"}}, "tasks"),
        ({"volumes": ["big"]}, "volumes"),
        ({"network_topology": "hard"}, "network_topology"),
        ({"expose": [{"name": "8888", "task": "main", "container_port": 8888}]}, "expose[0].name"),
        ({"expose": [{"name": "web--ui", "task": "main", "container_port": 80}]}, "expose[0].name"),
        ({"expose": "jupyter"}, "expose"),
        ({"plugins": "svc"}, "plugins"),
        ({"policies": ["RestartJob"]}, "policies[0]"),
        ({"tasks": [{"name": "9lives"}]}, "tasks[0].name"),
        ({"tasks": [{"name": "main", "gpu_product": "H100 80GB"}]}, "tasks[0].gpu_product"),
        ({"tasks": [{"name": "main", "runtime_class": "Nvidia!"}]}, "tasks[0].runtime_class"),
        ({"ttl_seconds_after_finished": "soon"}, "ttl_seconds_after_finished"),
        ({"env": {"CUDA_VISIBLE_DEVICES": "0"}}, "env"),
        ({"env": {"NAME": "a\x00b"}}, "env.NAME"),
        ({"command": ["python", "\ud800"]}, "command[1]"),
        ({"networks": [{"pool": "compute-a", "static_ip": "10.10.1.20"}]}, "networks[0].static_ip"),
        ({"networks": [{"pool": "compute-a", "pinned": 1}]}, "networks[0].pinned"),
        ({"comand": ["python"]}, "comand"),
        ({"tasks": [{"name": "main", "gpu": 1}]}, "tasks[0].gpu"),
    ],
)
def test_malformed_specs_are_field_errors_never_crashes(data, path):
    base = {"image": "pytorch", "tasks": [{"name": "main"}]}
    with pytest.raises(ValidationError) as caught:
        specs.parse({**base, **data}, name="j")
    assert path in caught.value.message_dict, caught.value.message_dict


def test_a_mistyped_field_is_named_with_what_was_meant():
    with pytest.raises(ValidationError) as caught:
        specs.parse({"image": "pytorch", "comand": ["python"], "tasks": [{"name": "main"}]})
    assert caught.value.message_dict == {
        "comand": ["Unknown field 'comand'; did you mean 'command'?"]
    }
    with pytest.raises(ValidationError) as caught:
        specs.parse(
            {
                "image": "pytorch",
                "tasks": [{"name": "main"}],
                "networks": [{"pool": "a", "static_ip": "10.0.0.5"}],
            }
        )
    assert caught.value.message_dict["networks[0].static_ip"] == [
        "Give true or false (true reserves one address of the pool for the job; the portal "
        'picks it), not "10.0.0.5".'
    ]


def test_the_api_answers_a_malformed_spec_with_400_and_field_paths(team, client):
    client.force_login(team["bob"])
    answer = client.post(
        f"/api/v1/tenants/{team['tenant'].slug}/jobs/",
        {"name": "bad", "spec": {"image": "pytorch", "tasks": [["main"]], "volumes": []}},
        content_type="application/json",
    )
    assert answer.status_code == 400
    assert set(answer.json()["errors"]) >= {"tasks[0]", "volumes"}


def alias_bomb(levels=9):
    """YAML of a few hundred bytes whose last list expands to 9**levels strings."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nimage: pytorch\ncommand: *a{levels - 1}\n"


def merge_bomb(keys=3000, merges=9000):
    """YAML whose merge keys copy one mapping into thousands: tens of millions of pairs."""
    mapping = ", ".join(f"k{i}: 0" for i in range(keys))
    return f"image: x\ndefaults: &d {{{mapping}}}\nmany: [{', '.join(['{<<: *d}'] * merges)}]\n"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (alias_bomb(), "The spec holds more than 20000 values"),
        (merge_bomb(), "The spec holds more than 20000 values"),
        ("image: x\nenv: {A: 2024-01-01}", "env.A: This value was read as a date; put it in"),
        ("image: x\nenv: {A: .nan}", "env.A: This value is not a finite number."),
        ("image: x\nenv: {1: one}", "env: The key 1 must be text (put it in quotes)."),
        ("image: x\ncommand: !!binary aGk=", "command: This value was read as a bytes"),
        ("image: x\nenv: " + "{a: " * 900 + "b" + "}" * 900, "The spec nests deeper than 32"),
        ("image: x\ncommand: " + "[" * 50_000 + "]" * 50_000, "This is not valid YAML"),
        ("image: x\nenv:\n" + "".join(f"{' ' * i}k:\n" for i in range(1, 600)), "deeper"),
    ],
)
def test_a_template_that_would_expand_or_nest_without_end_is_refused_at_once(
    client, team, text, said
):
    """YAML aliases expand a few hundred bytes into billions of values, and deep nesting
    exhausts the stack: the editor says so within a moment, never hangs or crashes."""
    client.force_login(team["bob"])
    started = time.monotonic()
    page = client.post(
        "/templates/new/",
        {"name": "bomb", "scope": team["tenant"].slug, "spec": text},
    )
    assert time.monotonic() - started < 5
    assert page.status_code == 200
    assert said in page.content.decode()
    assert not JobTemplate.objects.filter(name="bomb").exists()


def test_json_nested_past_the_recursion_limit_is_a_400_not_a_crash(team, client):
    client.force_login(team["bob"])
    nul_key = client.post(
        f"/api/v1/tenants/{team['tenant'].slug}/jobs/",
        {"name": "x", "spec": {"image": "x", "volumes": {"a\u0000": 1}}},
        content_type="application/json",
    )
    assert nul_key.status_code == 400, nul_key.content[:300]
    for body in (
        '{"name": "x", "spec": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"name": "x", "spec": {"image": "x", "env": ' + '{"a": ' * 500 + "1" + "}" * 501 + "}",
    ):
        answer = client.post(
            f"/api/v1/tenants/{team['tenant'].slug}/jobs/", body, content_type="application/json"
        )
        assert answer.status_code == 400, answer.content[:300]
        assert "nest" in answer.json()["detail"]
    assert not Job.objects.exists()


def test_job_names_must_start_with_a_letter(templates, launch):
    with pytest.raises(ValidationError) as caught:
        launch(templates["single-gpu"], name="1st-try")
    assert "starting with a letter" in caught.value.message_dict["name"][0]


def test_two_jobs_never_share_or_prune_each_others_service(
    cluster, team, templates, django_capture_on_commit_callbacks
):
    jobs = {}
    for name, port in [("train", "web-ui"), ("train-web", "ui")]:
        spec = {
            **templates["single-gpu"].spec,
            "expose": [{"name": port, "task": "main", "container_port": 8000}],
        }
        with django_capture_on_commit_callbacks(execute=True):
            jobs[name] = services.launch_job(
                team["tenant"], team["bob"], actor=team["bob"], spec_data=spec, name=name
            )[0]
    ns = team["tenant"].namespace
    names = {n: Endpoint.objects.get(job=j).service_name for n, j in jobs.items()}
    assert len(set(names.values())) == 2
    assert all("--" not in n for n in names.values())  # the router folds runs of '-'
    with django_capture_on_commit_callbacks(execute=True):
        services.delete_job(jobs["train"], actor=team["bob"])
    assert cluster.get("v1", "Service", names["train"], ns) is None
    service = cluster.get("v1", "Service", names["train-web"], ns)
    assert service["spec"]["selector"]["volcano.sh/job-name"] == "train-web"
    assert endpoint_host_label("a--b", "c", "web") != endpoint_host_label("a", "b--c", "web")


def test_usernames_of_any_shape_become_distinct_valid_label_values():
    values = {
        identity_label(u) for u in ["dana.lee@example.com", "dana_lee@example.com", "ü" * 150]
    }
    assert len(values) == 3
    for value in values:
        assert specs.LABEL_VALUE.match(value), value  # Kubernetes' label value rule


def test_a_member_with_an_email_for_a_username_launches_a_job(
    cluster, team, templates, django_capture_on_commit_callbacks
):
    from tenants.models import Membership

    dana = make_user("dana.lee+gpu@example.com")
    Membership.objects.create(tenant=team["tenant"], user=dana, role="researcher")
    with django_capture_on_commit_callbacks(execute=True):
        job, _ = services.launch_job(
            team["tenant"], dana, actor=dana, template_version=templates["single-gpu"], name="dana"
        )
    job = submitted(job)
    assert job.state in ("pending", "running"), job.message
    vcjob = cluster.get(VCJOB_API, "Job", "dana", team["tenant"].namespace)
    assert vcjob["metadata"]["annotations"]["gpu-portal.io/owner-name"] == dana.username


def test_a_data_volume_may_not_take_a_jobs_workspace_name(team):
    with pytest.raises(ValidationError) as caught:
        services.create_data_volume(
            team["tenant"], name="train-workspace", size_gib=10, actor=team["bob"]
        )
    assert "belong to jobs' own disks" in caught.value.message_dict["name"][0]


def test_a_volcano_job_deleted_after_it_ran_is_never_created_again(
    cluster, team, templates, launch
):
    job = launch(templates["single-gpu"], name="gone")
    settle(job, JobState.RUNNING)
    cluster.delete(VCJOB_API, "Job", "gone", team["tenant"].namespace)  # an admin, or a TTL
    reconcile_job(job.pk)
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state == "failed"
    assert "deleted outside the portal (last phase Running)" in job.message
    assert cluster.get(VCJOB_API, "Job", "gone", team["tenant"].namespace) is None


def test_a_data_volume_used_by_finished_jobs_is_deleted_once(
    cluster, team, templates, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        volume = services.create_data_volume(
            team["tenant"], name="corpus", size_gib=10, actor=team["bob"]
        )
        job, _ = services.launch_job(
            team["tenant"],
            team["bob"],
            actor=team["bob"],
            template_version=templates["pytorch-ddp"],
            name="used",
            data_volume=volume,
        )
    Job.objects.filter(pk=job.pk).update(state="succeeded")
    with django_capture_on_commit_callbacks(execute=True):
        services.delete_data_volume(volume, actor=team["bob"])
    assert not DataVolume.objects.filter(pk=volume.pk).exists()
    reconcile_data_volume(volume.pk)  # a resync after it is gone finds nothing to do
    assert Job.objects.get(pk=job.pk).job_spec().data_volume == "corpus"


def test_a_data_volume_being_deleted_is_attached_to_no_new_job(client, team, templates):
    """Its claim goes once the delete is reconciled (a moment later, or after an outage of the
    API server): a job launched on it meanwhile lost its data when it did."""
    volume = services.create_data_volume(
        team["tenant"], name="corpus", size_gib=10, actor=team["bob"]
    )
    services.delete_data_volume(volume, actor=team["bob"])  # not reconciled yet
    with pytest.raises(ValidationError) as caught:
        launch_as(team, "bob", templates["single-gpu"], name="late", data_volume=volume)
    assert caught.value.message_dict["data_volume"] == [
        "Data volume corpus is being deleted; pick another, or none."
    ]
    client.force_login(team["bob"])
    url = f"/api/v1/tenants/{team['tenant'].slug}/jobs/"
    for name in ("corpus", "no-such-volume"):
        answer = client.post(
            url,
            {"template": "single-gpu", "name": "late", "data_volume": name},
            content_type="application/json",
        )
        assert answer.status_code == 400  # a field error, not a 404 that reads as a wrong URL
        assert answer.json()["errors"]["data_volume"][0]["message"] == (
            f"No data volume named '{name}' in {team['tenant'].slug}."
        )
    assert not Job.objects.filter(name="late").exists()


def test_a_job_whose_disks_together_could_never_fit_is_refused_not_queued(team, templates):
    """Admission counts its data volume and its workspace: over the whole storage quota
    together, it waited at the head of the tenant's queue forever, and every job behind it."""
    Tenant.objects.filter(pk=team["tenant"].pk).update(storage_quota_gib=500)
    team["tenant"].refresh_from_db()
    volume = services.create_data_volume(
        team["tenant"], name="corpus", size_gib=400, actor=team["bob"]
    )
    with pytest.raises(ValidationError) as caught:
        launch_as(
            team,
            "bob",
            templates["single-gpu"],
            overrides={"workspace_gib": 200},
            name="too-big",
            data_volume=volume,
        )
    assert (
        "together are larger than the tenant's whole storage quota (500 GiB)"
        in (caught.value.message_dict["volumes.workspace_gib"][0])
    )
    assert not Job.objects.filter(name="too-big").exists()


def test_a_template_named_in_the_launch_url_opens_its_form(client, team, templates):
    client.force_login(team["bob"])
    url = f"/tenants/{team['tenant'].slug}/jobs/launch/"
    assert client.get(url, {"template": "pytorch-ddp"}).status_code == 200
    assert client.get(url, {"template": "no-such"}).status_code == 404
    assert client.get(url, {"template": "pytorch-ddp", "version": "x\x00"}).status_code == 404


def test_nul_characters_in_names_a_page_looks_up_find_nothing(client, team, templates):
    """PostgreSQL cannot compare NUL: a name holding one is no tenant's or template's (it was
    a 500)."""
    client.force_login(team["bob"])
    slug = team["tenant"].slug
    launch = f"/tenants/{slug}/jobs/launch/"
    response = client.get(launch, {"template": "pytorch-ddp\x00"})
    assert response.status_code == 404
    assert "No template named" in response.content.decode()
    spec = "image: python:3.12\ncommand: [python, x.py]\ntasks: [{name: main, gpus: 1}]\n"
    data = {"scope": "lab\x00", "name": "nul", "spec": spec}
    assert client.post("/templates/new/", data).status_code == 404


def test_an_api_server_refusal_reads_in_plain_words_with_the_details_beside(
    cluster, team, templates, client, launch
):
    ns = team["tenant"].namespace
    # Someone added a ResourceQuota of their own by hand, behind the portal's admission.
    cluster.apply_one(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "hand-made", "namespace": ns},
            "spec": {"hard": {"requests.storage": "1Gi"}},
        }
    )
    wait_for(
        lambda: (cluster.get("v1", "ResourceQuota", "hand-made", ns).get("status") or {}).get(
            "hard"
        ),
        message="the quota controller to take the new quota",
    )
    job = launch(templates["single-gpu"], name="too-big")
    assert job.state == "error"
    assert job.message.startswith(
        "The tenant's quota in the cluster refused it (asked for requests.storage="
    )
    assert "exceeded quota: hand-made" in job.sync_message  # the raw words, for the details
    client.force_login(team["bob"])
    page = client.get(f"/tenants/{team['tenant'].slug}/jobs/too-big/").content.decode()
    assert "Details from the cluster" in page


def test_the_portals_own_quota_shrunk_by_hand_keeps_a_job_waiting_until_it_is_set_again(
    cluster, team, templates, client, django_capture_on_commit_callbacks
):
    """The tenant's run sets its ResourceQuota from the tenant's quota again; meanwhile the job
    waits, saying why, instead of failing."""
    from jobs import pending

    ns = team["tenant"].namespace
    cluster.patch_merge(
        "v1", "ResourceQuota", "gpu-portal", {"spec": {"hard": {"requests.storage": "1Gi"}}}, ns
    )
    wait_for(
        lambda: (
            cluster.get("v1", "ResourceQuota", "gpu-portal", ns)["status"]["hard"][
                "requests.storage"
            ]
            == "1Gi"
        ),
        message="the quota controller to take the new limit",
    )
    with django_capture_on_commit_callbacks(execute=False):
        job = launch_as(team, "bob", templates["single-gpu"], name="waits")
    with django_capture_on_commit_callbacks(execute=False) as sent:
        reconcile_job(job.pk)  # the job's first run, without the tenant's it sends
    job.refresh_from_db()
    assert (job.state, job.pending_reason) == ("pending", pending.QUOTA_BEHIND)
    client.force_login(team["bob"])
    page = client.get(f"/tenants/{team['tenant'].slug}/jobs/waits/").content.decode()
    assert "lowered by hand" in page
    with django_capture_on_commit_callbacks(execute=True):
        for callback in sent:  # the tenant's run sets the quota again
            callback()
    assert submitted(Job.objects.get(pk=job.pk)).state != "error"


def test_a_data_volume_larger_than_the_tenants_storage_quota_is_refused_at_creation(team):
    quota = team["tenant"].storage_quota_gib
    services.create_data_volume(team["tenant"], name="half", size_gib=quota // 2, actor=team["bob"])
    with pytest.raises(ValidationError) as caught:
        services.create_data_volume(team["tenant"], name="more", size_gib=quota, actor=team["bob"])
    assert f"at most {quota - quota // 2} GiB more fit" in caught.value.message_dict["size_gib"][0]
    assert not DataVolume.objects.filter(name="more").exists()


def test_pod_names_too_long_for_a_host_name_are_refused_before_the_cluster():
    data = {"image": "pytorch", "tasks": [{"name": "t" * 20, "replicas": 100}]}
    with pytest.raises(ValidationError) as caught:
        specs.parse(data, name="j" * 48)
    assert "Kubernetes allows 63" in caught.value.message_dict["tasks[0].name"][0]


@given(st.lists(job_names, min_size=2, max_size=2, unique=True))
def test_two_ip_pools_never_share_a_network_attachment_name(pools):
    first, second = ({pool_nad(p), pool_static_nad(p)} for p in pools)
    assert len(first) == len(second) == 2
    assert not first & second
    assert all(len(name) <= 63 for name in first | second)


@pytest.mark.parametrize("number", ["²", "٣", "9" * 40, "-1", " "])
def test_numbers_that_are_not_plain_digits_are_refused_not_a_500(
    client, team, templates, number, django_capture_on_commit_callbacks
):
    """str.isdigit() takes '²' (which int() refuses) and any length: each of these was a 500."""
    with django_capture_on_commit_callbacks(execute=True):
        job, _ = services.launch_job(
            team["tenant"],
            team["bob"],
            actor=team["bob"],
            template_version=templates["jupyter-ssh"],
            name="nums",
        )
    jupyter = Endpoint.objects.get(job=job, name="jupyter")
    client.force_login(team["bob"])
    slug = team["tenant"].slug
    extended = client.post(
        f"/tenants/{slug}/jobs/nums/endpoints/jupyter/extend/", {"hours": number}, follow=True
    )
    assert extended.status_code == 200
    assert "as a whole number" in extended.content.decode()
    client.force_login(team["admin"])
    assert client.post("/console/endpoints/", {"endpoint": number}).status_code == 404
    launch = f"/tenants/{slug}/jobs/launch/"
    assert client.get(launch, {"template": "pytorch-ddp", "version": number}).status_code == 404
    # Forward-auth: an id of plain digits names no endpoint, answered as any endpoint is
    # before signing in to it; anything else is no address of the portal's.
    expected = 401 if number.isascii() and number.isdigit() else 404
    assert client.get(f"/auth/endpoint/{quote(number)}").status_code == expected
    assert jupyter.pk  # the endpoint itself was there all along


def test_an_api_launch_with_a_spec_and_overrides_beside_it_is_refused(team, client):
    """With a spec, gpus, image and the like were accepted and dropped without a word."""
    client.force_login(team["bob"])
    answer = client.post(
        f"/api/v1/tenants/{team['tenant'].slug}/jobs/",
        {
            "name": "both",
            "spec": {"image": "pytorch", "tasks": [{"name": "main", "gpus": 1}]},
            "gpus": 8,
        },
        content_type="application/json",
    )
    assert answer.status_code == 400
    assert answer.json()["errors"]["gpus"][0]["message"] == (
        "Not with a spec: write it into the spec (an override changes a template)."
    )
    assert not Job.objects.filter(name="both").exists()


def test_a_tenant_with_data_volumes_is_not_archived_until_they_are_deleted(
    cluster, team, django_capture_on_commit_callbacks
):
    """Archiving deletes the tenant's namespace, and with it every claim: a data volume's data
    went without a word, and its row stayed, in error every resync. Volumes are deleted first,
    on purpose; one left from before that rule goes with its tenant's archive."""
    from tenants import services as tenant_services
    from tenants.choices import TenantState

    tenant = team["tenant"]
    with django_capture_on_commit_callbacks(execute=True):
        volume = services.create_data_volume(tenant, name="corpus", size_gib=10, actor=team["bob"])
    with pytest.raises(ValidationError) as caught:
        tenant_services.archive_tenant(tenant, actor=team["admin"])
    assert (
        "data volume corpus (10 GiB; its data would go with the namespace: delete it first)"
        in (caught.value.messages[0])
    )
    assert Tenant.objects.get(pk=tenant.pk).state == TenantState.ACTIVE

    Tenant.objects.filter(pk=tenant.pk).update(state=TenantState.ARCHIVED)  # as before the rule
    reconcile_data_volume(volume.pk)
    assert not DataVolume.objects.filter(pk=volume.pk).exists()


def test_the_data_volumes_page_reads_the_same_however_many_jobs_used_a_volume(team, client):
    """Each job's link read its tenant again: one query per job ever attached."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    volume = services.create_data_volume(
        team["tenant"], name="corpus", size_gib=10, actor=team["bob"]
    )

    def used_by(count):
        for _ in range(count):
            Job.objects.create(
                tenant=team["tenant"],
                owner=team["bob"],
                name=f"user-{Job.objects.count()}",
                spec={},
                data_volume=volume,
                gpus=1,
                state=JobState.SUCCEEDED,
                queued_at=timezone.now(),
            )
        with CaptureQueriesContext(connection) as queries:
            page = client.get(f"/tenants/{team['tenant'].slug}/volumes/")
        assert page.status_code == 200
        return len(queries)

    client.force_login(team["bob"])
    assert used_by(2) == used_by(10)
