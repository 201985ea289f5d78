"""The job spec's one codec: what a job stores reads back as the same spec, and a stored spec
turned back into a template (a relaunch) parses to the same spec again."""

import json

from django.test import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import spec as specs
from jobs.choices import POLICY_ACTIONS, POLICY_EVENTS
from k8s_adapters.jobspec import JobSpec, Policy, Port, Task
from k8s_adapters.volcano import KNOWN_PLUGINS

label = st.from_regex(r"[a-z]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20
)
quantity = st.sampled_from(["1", "500m", "4", "16Gi", "64Gi", "1.5"])
policy = st.builds(
    Policy, event=st.sampled_from(POLICY_EVENTS), action=st.sampled_from(POLICY_ACTIONS)
)
# As Volcano takes them: one policy per event in a list, and '*' (any event) alone.
policies = st.lists(policy, max_size=2, unique_by=lambda p: p.event).filter(
    lambda listed: len(listed) < 2 or all(p.event != "*" for p in listed)
)


@st.composite
def tasks(draw):
    names = draw(
        st.lists(label.filter(lambda n: len(n) <= 20), min_size=1, max_size=3, unique=True)
    )
    return tuple(
        Task(
            name=name,
            replicas=draw(st.integers(1, specs.MAX_REPLICAS)),
            gpus=draw(st.integers(0, specs.MAX_GPUS_PER_REPLICA)),
            cpu=draw(quantity),
            memory=draw(quantity),
            shm=draw(quantity),
            gpu_product=draw(st.sampled_from(["", "NVIDIA-H100-80GB-HBM3"])),
            runtime_class=draw(st.sampled_from(["nvidia", "nvidia-cdi"])),
            policies=tuple(draw(policies)),
        )
        for name in names
    )


@st.composite
def job_specs(draw):
    job_tasks = draw(tasks())
    port_names = draw(
        st.lists(
            label.filter(lambda n: len(n) <= 15 and n not in specs.RESERVED_PORT_NAMES),
            max_size=3,
            unique=True,
        )
    )
    numbers = draw(  # a port of a task is exposed once
        st.lists(
            st.integers(1, 65535), min_size=len(port_names), max_size=len(port_names), unique=True
        )
    )
    ports = tuple(
        Port(
            name=name,
            task=draw(st.sampled_from([t.name for t in job_tasks])),
            container_port=number,
            protocol="http",
            mode=draw(st.sampled_from(["", "ingress", "nodeport"])),
            private=draw(st.booleans()),
        )
        for name, number in zip(port_names, numbers, strict=True)
    )
    mode = draw(st.sampled_from(["", "hard", "soft"]))
    env_names = st.from_regex(r"[A-Z_][A-Z0-9_]{0,10}", fullmatch=True)
    user_env_names = env_names.filter(
        lambda n: n not in specs.RESERVED_ENV and not n.startswith(specs.RESERVED_ENV_PREFIXES)
    )
    return JobSpec(
        name=draw(label),
        namespace=draw(label),
        queue=draw(label),
        tenant=draw(label),
        owner=draw(text),
        image=draw(st.sampled_from(["pytorch", "nvcr.io/nvidia/pytorch:24.10-py3"])),
        tasks=job_tasks,
        command=tuple(draw(st.lists(text, max_size=3))),
        args=tuple(draw(st.lists(text, max_size=3))),
        working_dir=draw(st.sampled_from(["", "/workspace"])),
        env=tuple(draw(st.dictionaries(user_env_names, text, max_size=3)).items()),
        min_available=draw(st.none() | st.integers(1, sum(t.replicas for t in job_tasks))),
        max_retry=draw(st.integers(0, 100)),
        ttl_seconds_after_finished=draw(st.none() | st.integers(0, 86400)),
        policies=tuple(draw(policies)),
        plugins=tuple(draw(st.lists(st.sampled_from(KNOWN_PLUGINS), max_size=3, unique=True))),
        topology_mode=mode,
        topology_highest_tier=draw(st.integers(1, 10)) if mode else None,
        ports=ports,
        workspace_gib=draw(st.integers(1, specs.MAX_DISK_GIB)),
        data_volume=draw(st.sampled_from(["", "datasets"])),
        storage_class=draw(st.sampled_from(["", "fast-nvme"])),
        ssh_keys=tuple(draw(st.lists(text, max_size=2))),
        networks_annotation=draw(st.sampled_from(["", '[{"name": "pool-a"}]'])),
        extra_env=tuple(draw(st.dictionaries(env_names, text, max_size=2)).items()),
    )


@settings(max_examples=200, deadline=None)
@given(job_specs())
def test_a_stored_spec_reads_back_as_the_same_spec(spec):
    stored = json.loads(json.dumps(spec.to_dict()))  # what the JSON column gives back
    read = JobSpec.from_dict(stored)
    assert read == spec
    assert read.to_dict() == spec.to_dict()  # extra_env too, which == leaves out


@settings(max_examples=200, deadline=None)
@given(job_specs())
def test_a_relaunch_parses_to_the_spec_it_came_from(spec):
    template = json.loads(json.dumps(spec.to_template()))
    with override_settings(RUNTIME_CLASSES=["nvidia", "nvidia-cdi"]):  # both are drawn
        parsed = specs.parse(
            template,
            name=spec.name,
            namespace=spec.namespace,
            queue=spec.queue,
            tenant=spec.tenant,
            owner=spec.owner,
            ssh_keys=spec.ssh_keys,
            data_volume=spec.data_volume,
            networks_annotation=spec.networks_annotation,
            extra_env=spec.extra_env,
        )
    assert parsed.to_dict() == spec.to_dict()
