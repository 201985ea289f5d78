"""Pure builders for a training job: the Volcano job, its workspace and data PVCs, and the
Secret holding the owner's SSH public keys."""

from dataclasses import dataclass
from typing import Any

from .jobspec import JobSpec, Policy, Task
from .labels import TENANT, portal_labels

VCJOB_API = "batch.volcano.sh/v1alpha1"
BUS_API = "bus.volcano.sh/v1alpha1"
GPU = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
KNOWN_PLUGINS = ("svc", "env", "ssh")
OWNER_ANNOTATION = "gpu-portal.io/owner-name"
SSH_KEYS_PATH = "/var/run/gpu-portal/ssh"
# What a job's objects are pruned by (its label); its SSH-key Secret is deleted by name: the
# worker may not list Secrets (a list returns them whole, everyone's).
JOB_KINDS = ((VCJOB_API, "Job"), ("v1", "PersistentVolumeClaim"))


def _labels(spec: JobSpec) -> dict[str, str]:
    return portal_labels(tenant=spec.tenant, job=spec.name, owner=spec.owner)


def _policy(policy: Policy) -> dict[str, str]:
    return {"event": policy.event, "action": policy.action}


def _resources(task: Task) -> dict[str, dict[str, str]]:
    values = {"cpu": task.cpu, "memory": task.memory}
    if task.gpus:
        values[GPU] = str(task.gpus)
    return {"requests": dict(values), "limits": dict(values)}


def _volumes(spec: JobSpec, task: Task) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = [
        {"name": "workspace", "persistentVolumeClaim": {"claimName": spec.workspace_claim}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": task.shm}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "workspace", "mountPath": "/workspace"},
        {"name": "dshm", "mountPath": "/dev/shm"},  # noqa: S108
    ]
    if spec.data_volume:
        volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": spec.data_volume}})
        mounts.append({"name": "data", "mountPath": "/data"})
    if spec.ssh_keys:
        volumes.append(
            {"name": "ssh-keys", "secret": {"secretName": spec.ssh_secret, "defaultMode": 0o444}}
        )
        mounts.append({"name": "ssh-keys", "mountPath": SSH_KEYS_PATH, "readOnly": True})
    return volumes, mounts


def _container(spec: JobSpec, task: Task, mounts: list[dict[str, Any]]) -> dict[str, Any]:
    env = [{"name": k, "value": v} for k, v in (*spec.env, *spec.extra_env)]
    env += [
        {"name": "GPU_PORTAL_JOB", "value": spec.name},
        {"name": "GPU_PORTAL_TASK", "value": task.name},
        {"name": "GPU_PORTAL_GPUS", "value": str(task.gpus)},
    ]
    if not task.gpus:
        # CUDA images set NVIDIA_VISIBLE_DEVICES=all; where the NVIDIA runtime is the node's
        # default, a pod given no GPU would see every GPU of its node, outside every quota.
        env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})
    container = {
        "name": "main",
        "image": spec.image,
        "env": env,
        "resources": _resources(task),
        "volumeMounts": mounts,
    }
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    if spec.working_dir:
        container["workingDir"] = spec.working_dir
    ports = [
        {"name": p.name[:15], "containerPort": p.container_port, "protocol": "TCP"}
        for p in spec.ports
        if p.task == task.name
    ]
    if ports:
        container["ports"] = ports
    return container


def _pod_spec(spec: JobSpec, task: Task) -> dict[str, Any]:
    volumes, mounts = _volumes(spec, task)
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        # Job code gets no credentials for the Kubernetes API.
        "automountServiceAccountToken": False,
        "containers": [_container(spec, task, mounts)],
        "volumes": volumes,
    }
    if task.gpus:
        pod["runtimeClassName"] = task.runtime_class
        pod["tolerations"] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
        if task.gpu_product:
            pod["nodeSelector"] = {PRODUCT_LABEL: task.gpu_product}
    return pod


def _task(spec: JobSpec, task: Task) -> dict[str, Any]:
    metadata = {"labels": _labels(spec)}
    if spec.networks_annotation:
        metadata["annotations"] = {"k8s.v1.cni.cncf.io/networks": spec.networks_annotation}
    built = {
        "name": task.name,
        "replicas": task.replicas,
        "template": {"metadata": metadata, "spec": _pod_spec(spec, task)},
    }
    if task.policies:
        built["policies"] = [_policy(p) for p in task.policies]
    return built


def build_vcjob(spec: JobSpec) -> dict:
    job: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": spec.queue,
        "minAvailable": spec.total_replicas if spec.min_available is None else spec.min_available,
        "maxRetry": spec.max_retry,
        "plugins": {name: [] for name in spec.plugins},
        "tasks": [_task(spec, task) for task in spec.tasks],
    }
    if spec.policies:
        job["policies"] = [_policy(p) for p in spec.policies]
    if spec.ttl_seconds_after_finished is not None:
        job["ttlSecondsAfterFinished"] = spec.ttl_seconds_after_finished
    if spec.topology_mode:
        topology: dict[str, Any] = {"mode": spec.topology_mode}
        if spec.topology_highest_tier is not None:
            topology["highestTierAllowed"] = spec.topology_highest_tier
        job["networkTopology"] = topology
    return {
        "apiVersion": VCJOB_API,
        "kind": "Job",
        "metadata": {
            "name": spec.name,
            "namespace": spec.namespace,
            "labels": _labels(spec),
            "annotations": {OWNER_ANNOTATION: spec.owner},  # the full name; labels hash it
        },
        "spec": job,
    }


def build_workspace_pvc(spec: JobSpec) -> dict:
    """The job's scratch disk, shared by its pods, deleted with the job."""
    access = "ReadWriteMany" if spec.total_replicas > 1 else "ReadWriteOnce"
    return _pvc(
        spec.workspace_claim,
        spec.namespace,
        _labels(spec),
        spec.workspace_gib,
        spec.storage_class,
        access,
    )


def build_data_pvc(
    name: str, namespace: str, tenant: str, size_gib: int, storage_class: str = ""
) -> dict[str, Any]:
    """A data disk: labelled for the tenant only, so deleting a job never prunes it."""
    return _pvc(
        name,
        namespace,
        portal_labels(tenant=tenant, component="data-volume"),
        size_gib,
        storage_class,
        "ReadWriteMany",
    )


def _pvc(
    name: str,
    namespace: str,
    labels: dict[str, str],
    size_gib: int,
    storage_class: str,
    access: str,
) -> dict[str, Any]:
    spec = {"accessModes": [access], "resources": {"requests": {"storage": f"{size_gib}Gi"}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def build_ssh_secret(spec: JobSpec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": spec.ssh_secret, "namespace": spec.namespace, "labels": _labels(spec)},
        "stringData": {"authorized_keys": "\n".join(spec.ssh_keys) + "\n"},
    }


def build_job(spec: JobSpec) -> list[dict]:
    """Every object a job owns, in apply order: what the pods mount first, then the job. The
    claim comes first of all: its bind is what the job's submission waits for."""
    objects = [build_workspace_pvc(spec)]
    if spec.ssh_keys:
        objects.append(build_ssh_secret(spec))
    objects.append(build_vcjob(spec))
    return objects


def build_abort_command(namespace: str, job_name: str, job_uid: str) -> dict[str, Any]:
    """Volcano's way to abort a job (what `vcctl job suspend` sends)."""
    return {
        "apiVersion": BUS_API,
        "kind": "Command",
        "metadata": {
            "name": f"{job_name}-abort",
            "namespace": namespace,
            "labels": portal_labels(job=job_name),
            "ownerReferences": [
                {
                    "apiVersion": VCJOB_API,
                    "kind": "Job",
                    "name": job_name,
                    "uid": job_uid,
                    "controller": True,
                }
            ],
        },
        "action": "AbortJob",
        "target": {"apiVersion": VCJOB_API, "kind": "Job", "name": job_name, "uid": job_uid},
    }


# -- readers ----------------------------------------------------------------------------------

PODGROUP_API = "scheduling.volcano.sh/v1beta1"
QUEUE_API = "scheduling.volcano.sh/v1beta1"
COUNTERS = ("pending", "running", "succeeded", "failed")
FINISHED_PHASES = frozenset({"Completed", "Failed", "Terminated", "Aborted"})


@dataclass(frozen=True)
class JobStatus:
    """What the portal reads of a Volcano job's status."""

    name: str
    uid: str
    phase: str  # "" before the controller's first status
    message: str
    counts: dict[str, int]


def read_job(vcjob: dict) -> JobStatus:
    status = vcjob.get("status") or {}
    state = status.get("state") or {}
    return JobStatus(
        name=vcjob["metadata"]["name"],
        uid=vcjob["metadata"].get("uid", ""),
        phase=state.get("phase") or "",
        message=state.get("message") or "",
        counts={k: int(status.get(k) or 0) for k in COUNTERS},
    )


def reduce_vcjob(vcjob: dict) -> dict[str, Any]:
    """What the job watcher compares: which portal job, and what Volcano says of it."""
    status = read_job(vcjob)
    labels = vcjob["metadata"].get("labels") or {}
    return {
        "tenant": labels.get(TENANT, ""),
        "namespace": vcjob["metadata"].get("namespace", ""),
        "name": status.name,
        "phase": status.phase,
        "counts": status.counts,
        "message": status.message,
    }


def podgroup_name(job_name: str, job_uid: str) -> str:
    """The PodGroup Volcano's job controller creates for a job."""
    return f"{job_name}-{job_uid}"


def unschedulable_messages(podgroup: dict | None) -> list[str]:
    """The scheduler's reasons from a PodGroup's Unschedulable conditions."""
    conditions = ((podgroup or {}).get("status") or {}).get("conditions") or []
    return [
        c.get("message", "")
        for c in conditions
        if c.get("type") == "Unschedulable" and c.get("status") == "True"
    ]


@dataclass(frozen=True)
class QueueFacts:
    state: str  # Open, Closed, Closing, Unknown
    parent: str


def read_queue(queue: dict) -> QueueFacts:
    return QueueFacts(
        state=(queue.get("status") or {}).get("state") or "Open",
        parent=(queue.get("spec") or {}).get("parent") or "",
    )
