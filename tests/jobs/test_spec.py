"""Template specs: every problem reported by field path, with what to fix."""

import pytest
from django.core.exceptions import ValidationError

from jobs import spec as specs
from jobs.seed import TEMPLATES


def errors_of(data, **kwargs):
    with pytest.raises(ValidationError) as caught:
        specs.parse(data, **kwargs)
    return caught.value.message_dict


def base(**changes):
    data = {
        "image": "nvcr.io/nvidia/pytorch:24.10-py3",
        "command": ["python", "train.py"],
        "tasks": [{"name": "main", "replicas": 1, "gpus": 1}],
    }
    data.update(changes)
    return data


@pytest.mark.parametrize(("name", "description", "spec", "overridable"), TEMPLATES)
def test_the_seeded_templates_are_valid(name, description, spec, overridable):
    parsed = specs.parse(spec, name=name)
    assert parsed.total_gpus >= 1
    assert set(overridable) <= set(specs.OVERRIDABLE)


@pytest.mark.parametrize(
    "image",
    [
        "pytorch",
        "nvcr.io/nvidia/pytorch:24.10-py3",
        "registry.local:5000/train/llama:latest",
        "ghcr.io/org/img@sha256:" + "a" * 64,
    ],
)
def test_good_image_references_pass(image):
    assert specs.parse(base(image=image)).image == image


@pytest.mark.parametrize("image", ["", "UPPER/case", "has space:1", "img:tag:extra", "-lead"])
def test_bad_image_references_say_what_to_fix(image):
    assert "registry/path/name:tag" in errors_of(base(image=image))["image"][0]


def test_task_and_port_problems_are_keyed_by_their_path():
    errors = errors_of(
        base(
            tasks=[
                {"name": "main", "replicas": 0, "gpus": 100, "memory": "lots"},
                {"name": "main"},
            ],
            expose=[
                {"name": "jupyter", "task": "nope", "container_port": 70000},
                {"name": "jupyter", "task": "main", "container_port": 22, "protocol": "udp"},
            ],
            env={"1BAD": "x", "GOOD_NAME": "y"},
            plugins=["svc", "mpi"],
        )
    )
    assert errors["tasks[0].replicas"] == ["Must be between 1 and 1000 (got 0)."]
    assert errors["tasks[0].gpus"] == ["Must be between 0 and 64 (got 100)."]
    assert "positive Kubernetes quantity" in errors["tasks[0].memory"][0]
    assert errors["tasks[1].name"] == ["Task 'main' appears twice."]
    assert errors["expose[0].task"] == ["No task named 'nope'; tasks are main."]
    assert errors["expose[0].container_port"] == ["Must be between 1 and 65535 (got 70000)."]
    assert errors["expose[1].name"] == ["The port name 'jupyter' is used twice."]
    assert errors["expose[1].protocol"] == ["Use http, tcp or ssh."]
    assert "'1BAD' is not a valid environment variable name" in errors["env"][0]
    assert errors["plugins"] == ["Unknown Volcano plugin 'mpi'; use svc, env, ssh."]


@pytest.mark.parametrize("protocol", [None, 80, ["http"], True, {"p": 1}])
def test_a_protocol_that_is_not_text_is_a_field_error(protocol):
    # A YAML line left as `protocol:` is None; with mode ingress this was a 500.
    port = {"name": "web", "task": "main", "container_port": 8080, "mode": "ingress"}
    errors = errors_of(base(expose=[{**port, "protocol": protocol}]))
    assert errors == {"expose[0].protocol": ["Use http, tcp or ssh."]}


@pytest.mark.parametrize("amount", ["inf", "Infinity", "-inf", "NaN", "1e400", "9" * 30])
def test_quantities_without_end_are_field_errors(amount):
    # Each passed the check and was a 500 at every launch of the template.
    errors = errors_of(base(tasks=[{"name": "main", "cpu": amount, "memory": amount}]))
    assert "positive Kubernetes quantity" in errors["tasks[0].cpu"][0]
    assert "positive Kubernetes quantity" in errors["tasks[0].memory"][0]


def test_a_command_line_is_split_like_a_shell_would():
    parsed = specs.parse(base(command="python train.py --lr '1e-4 x'"))
    assert parsed.command == ("python", "train.py", "--lr", "1e-4 x")


@pytest.mark.parametrize(
    ("name", "ok"),
    [("llama-sft-001", True), ("Llama", False), ("a" * 48, True), ("a" * 49, False), ("-x", False)],
)
def test_job_names_are_dns_labels_short_enough_for_pod_names(name, ok):
    if ok:
        specs.validate_job_name(name)
    else:
        with pytest.raises(ValidationError):
            specs.validate_job_name(name)


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("gpu-portal-isolation", False),  # Volcano would take the tenant's isolation policy
        ("gpu-portal", False),
        ("ep17-train-ssh", False),  # ... or a teammate's endpoint Service and its policy
        ("ep1-x", False),
        ("epoch-17", True),
        ("ep-17", True),
        ("step17-x", True),
    ],
)
def test_job_names_never_meet_the_portals_own_objects(name, ok):
    if ok:
        specs.validate_job_name(name)
    else:
        with pytest.raises(ValidationError):
            specs.validate_job_name(name)


def test_overrides_change_only_what_the_template_allows():
    template = base(
        tasks=[
            {"name": "master", "gpus": 8},
            {"name": "worker", "replicas": 2, "gpus": 8},
            {"name": "cpu"},
        ]
    )
    data = specs.apply_overrides(
        template, {"gpus": 4, "replicas": {"worker": 5}}, ["gpus", "replicas"]
    )
    assert [(t["name"], t.get("replicas", 1), t.get("gpus", 0)) for t in data["tasks"]] == [
        ("master", 1, 4),
        ("worker", 5, 4),
        ("cpu", 1, 0),
    ]
    assert template["tasks"][1]["replicas"] == 2  # the template itself is untouched
    with pytest.raises(ValidationError) as caught:
        specs.apply_overrides(template, {"image": "other:1"}, ["gpus"])
    assert caught.value.message_dict == {
        "image": ["This template does not allow changing 'image'."]
    }


def test_the_launch_form_round_trips_a_template_command_unchanged(db, templates):
    from jobs.forms import LaunchForm
    from tenants.models import Tenant

    version = templates["pytorch-ddp"]
    tenant = Tenant.objects.create(slug="rt", display_name="RT")
    form = LaunchForm(version=version, tenant=tenant)
    shown = form.fields["command"].initial
    assert specs.parse({**version.spec, "command": shown}).command == tuple(version.spec["command"])


def test_a_launch_form_sent_back_as_shown_launches_the_template_as_it_is(db):
    """A browser sends every box back, filled as the page showed it, and its textarea's line
    breaks as CRLF. The GPU box shows the first GPU task's count: taken as an override, it gave
    every GPU task that count (a 33-GPU job ran on 5), and a multi-line script reached the
    container with a stray CR on each line."""
    from django.contrib.auth import get_user_model

    from jobs import services
    from jobs.forms import LaunchForm
    from tenants.models import Tenant

    admin = get_user_model().objects.create(username="tpl-admin", is_staff=True)
    script = ["bash", "-c", "pip install -r req.txt\npython train.py"]
    version = services.save_template(
        name="ps-workers",
        spec_data=base(
            command=script,
            tasks=[
                {"name": "ps", "gpus": 1},
                {"name": "worker", "replicas": 4, "gpus": 8},
            ],
        ),
        overridable=["gpus", "command", "replicas", "image", "workspace_gib"],
        actor=admin,
    )
    tenant = Tenant.objects.create(slug="shown", display_name="Shown")
    shown = LaunchForm(version=version, tenant=tenant)
    sent = {
        name: str(field.initial).replace("\n", "\r\n")
        for name, field in shown.fields.items()
        if field.initial is not None
    }
    form = LaunchForm(sent, version=version, tenant=tenant)
    assert form.is_valid(), form.errors
    assert form.overrides() == {}
    launched = specs.parse(specs.apply_overrides(version.spec, {}, version.overridable))
    assert launched.total_gpus == 33
    assert launched.command == tuple(script)

    changed = LaunchForm({**sent, "gpus": "2"}, version=version, tenant=tenant)
    assert changed.is_valid(), changed.errors
    assert changed.overrides() == {"gpus": 2}  # what the user changed, and only that
    # The tasks' counts differ: the box is empty, so even one of their counts typed in is one
    # number for every GPU task.
    assert shown.fields["gpus"].initial is None
    assert "ps 1, worker 8" in shown.fields["gpus"].widget.attrs["placeholder"]
    ones = LaunchForm({**sent, "gpus": "1"}, version=version, tenant=tenant)
    assert ones.is_valid(), ones.errors
    assert ones.overrides() == {"gpus": 1}
    edited = {**sent, "command": "bash -c 'pip install -r req.txt\r\npython train.py --fast'"}
    retyped = LaunchForm(edited, version=version, tenant=tenant)
    assert retyped.is_valid(), retyped.errors
    argv = specs.parse({**version.spec, "command": retyped.overrides()["command"]}).command
    assert argv == ("bash", "-c", "pip install -r req.txt\npython train.py --fast")


def test_a_spec_shown_back_reads_in_the_documented_order_whatever_the_database_kept():
    # As PostgreSQL's jsonb gives a spec back: shorter keys first.
    stored = {
        "tasks": [{"gpus": 1, "name": "main", "replicas": 2, "custom": 1}],
        "image": "registry.local/train:1",
        "command": ["python", "train.py"],
        "max_retry": 1,
    }
    shown = specs.in_reading_order(stored)
    assert list(shown) == ["image", "command", "tasks", "max_retry"]
    assert list(shown["tasks"][0]) == ["name", "replicas", "gpus", "custom"]
    assert shown == stored  # the same spec, only in another order
    assert specs.in_reading_order(["not", "a", "spec"]) == ["not", "a", "spec"]


@pytest.mark.parametrize(
    ("policies", "path", "said"),
    [
        (
            [
                {"event": "PodEvicted", "action": "RestartJob"},
                {"event": "PodEvicted", "action": "AbortJob"},
            ],
            "policies[1].event",
            "PodEvicted already has a policy in this list (policies[0]); give each event one",
        ),
        (
            [{"event": "*", "action": "RestartJob"}, {"event": "PodFailed", "action": "AbortJob"}],
            "policies[0].event",
            "'*' (any event) stands alone in its list",
        ),
    ],
)
def test_policies_volcano_would_refuse_are_field_errors(policies, path, said):
    # Volcano's job webhook refuses both, after the portal had admitted the job: it sat in
    # error holding its GPUs.
    assert said in errors_of(base(policies=policies))[path][0]
    task_level = base(tasks=[{"name": "main", "gpus": 1, "policies": policies}])
    assert (
        said.replace("policies[", "tasks[0].policies[")
        in (errors_of(task_level)[f"tasks[0].{path}"][0])
    )


@pytest.mark.parametrize("amount", [" 8", "1_000", "8 Gi", True, "4\n"])
def test_quantities_kubernetes_would_refuse_are_field_errors(amount):
    assert (
        "positive Kubernetes quantity"
        in errors_of(base(tasks=[{"name": "main", "cpu": amount}]))["tasks[0].cpu"][0]
    )


def test_yaml_blanks_are_empty_and_booleans_are_said_not_turned_into_words():
    parsed = specs.parse(
        base(
            tasks=[{"name": "main", "gpus": 1, "gpu_product": None}],
            working_dir=None,
            env={"HF_TOKEN": None, "PORT": 8080},
        )
    )
    assert parsed.tasks[0].gpu_product == ""  # not 'None', which no node is labelled with
    blank = specs.parse(
        base(tasks=[{"name": "main", "runtime_class": None}], volumes={"storage_class": None})
    )
    assert (blank.tasks[0].runtime_class, blank.storage_class) == ("nvidia", "")
    assert parsed.working_dir == ""
    assert dict(parsed.env) == {"HF_TOKEN": "", "PORT": "8080"}
    errors = errors_of(base(env={"DEBUG": False}, working_dir="src"))
    assert errors["env.DEBUG"] == ["This was read as false; put it in quotes if it is text."]
    assert errors["working_dir"] == ["'src' is not an absolute path; start it with '/'."]


def test_an_override_of_a_task_the_template_does_not_have_is_an_error_not_dropped():
    template = base(tasks=[{"name": "worker", "replicas": 2, "gpus": 1}])
    with pytest.raises(ValidationError) as caught:
        specs.apply_overrides(template, {"replicas": {"wroker": 4}}, ["replicas"])
    assert caught.value.message_dict == {
        "replicas.wroker": ["No task named 'wroker'; this template's tasks are worker."]
    }


def test_generated_names_are_valid_job_names_whatever_the_template_is_named():
    from jobs.services import generate_name

    for template in ("7b-sft", "a" * 50, "x" * 39 + "-y", "gpu-portal-demo", "ep1-web", "ep12"):
        for name in (generate_name(template), generate_name(template, "preview")):
            specs.validate_job_name(name)


def test_only_the_runtime_classes_admins_offer_are_taken(settings):
    """A RuntimeClass brings its own node selector, tolerations and handler: one meant for the
    cluster's own pods would place a job where it should not run."""
    spec = base(tasks=[{"name": "main", "gpus": 1, "runtime_class": "kata-infra"}])
    assert errors_of(spec)["tasks[0].runtime_class"] == [
        "Jobs here run under nvidia, not 'kata-infra' (platform admins choose the "
        "RuntimeClasses jobs may use)."
    ]
    settings.RUNTIME_CLASSES = ["nvidia", "kata-infra"]
    assert specs.parse(spec).tasks[0].runtime_class == "kata-infra"
    # a cluster whose GPU class is another: tasks naming none get it; CPU tasks run under none
    settings.RUNTIME_CLASSES = ["nvidia-cdi"]
    assert specs.parse(base()).tasks[0].runtime_class == "nvidia-cdi"
    cpu_only = base(tasks=[{"name": "prep", "gpus": 0, "runtime_class": "nvidia"}])
    assert specs.parse(cpu_only).tasks[0].gpus == 0
