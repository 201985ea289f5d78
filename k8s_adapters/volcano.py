"""Pure builders for a training job: the Volcano job, its workspace and data PVCs, and the
Secret holding the owner's SSH public keys."""

from dataclasses import dataclass, field

from .labels import portal_labels

VCJOB_API = "batch.volcano.sh/v1alpha1"
BUS_API = "bus.volcano.sh/v1alpha1"
GPU = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
KNOWN_PLUGINS = ("svc", "env", "ssh")
SSH_KEYS_PATH = "/var/run/gpu-portal/ssh"
JOB_KINDS = ((VCJOB_API, "Job"), ("v1", "PersistentVolumeClaim"), ("v1", "Secret"))


@dataclass(frozen=True)
class Port:
    name: str
    task: str
    container_port: int
    protocol: str = "http"
    mode: str = ""  # empty: the cluster's default for the protocol
    private: bool = False  # only the job's owner may open it


@dataclass(frozen=True)
class Policy:
    event: str
    action: str


@dataclass(frozen=True)
class Task:
    name: str
    replicas: int = 1
    gpus: int = 0
    cpu: str = "4"
    memory: str = "16Gi"
    shm: str = "8Gi"
    gpu_product: str = ""
    runtime_class: str = "nvidia"
    policies: tuple[Policy, ...] = ()


@dataclass(frozen=True)
class JobSpec:
    """Everything a launch resolves to: the template with the user's overrides applied."""

    name: str
    namespace: str
    queue: str
    tenant: str
    owner: str
    image: str
    tasks: tuple[Task, ...]
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    working_dir: str = ""
    env: tuple[tuple[str, str], ...] = ()
    min_available: int | None = None
    max_retry: int = 3
    ttl_seconds_after_finished: int | None = None
    policies: tuple[Policy, ...] = ()
    plugins: tuple[str, ...] = ("svc", "env")
    topology_mode: str = ""
    topology_highest_tier: int | None = None
    ports: tuple[Port, ...] = ()
    workspace_gib: int = 50
    data_volume: str = ""  # name of the data PVC to mount at /data, if any
    storage_class: str = ""
    ssh_keys: tuple[str, ...] = ()
    networks_annotation: str = ""
    extra_env: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def total_gpus(self):
        return sum(t.gpus * t.replicas for t in self.tasks)

    @property
    def total_replicas(self):
        return sum(t.replicas for t in self.tasks)

    @property
    def workspace_claim(self):
        return f"{self.name}-workspace"

    @property
    def ssh_secret(self):
        return f"{self.name}-ssh-keys"


def _labels(spec):
    return portal_labels(tenant=spec.tenant, job=spec.name, owner=spec.owner)


def _policy(policy):
    return {"event": policy.event, "action": policy.action}


def _resources(task):
    values = {"cpu": task.cpu, "memory": task.memory}
    if task.gpus:
        values[GPU] = str(task.gpus)
    return {"requests": dict(values), "limits": dict(values)}


def _volumes(spec, task):
    volumes = [
        {"name": "workspace", "persistentVolumeClaim": {"claimName": spec.workspace_claim}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": task.shm}},
    ]
    mounts = [
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


def _container(spec, task, mounts):
    env = [{"name": k, "value": v} for k, v in (*spec.env, *spec.extra_env)]
    env += [
        {"name": "GPU_PORTAL_JOB", "value": spec.name},
        {"name": "GPU_PORTAL_TASK", "value": task.name},
        {"name": "GPU_PORTAL_GPUS", "value": str(task.gpus)},
    ]
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


def _pod_spec(spec, task):
    volumes, mounts = _volumes(spec, task)
    pod = {
        "restartPolicy": "Never",
        "containers": [_container(spec, task, mounts)],
        "volumes": volumes,
    }
    if task.gpus:
        pod["runtimeClassName"] = task.runtime_class
        pod["tolerations"] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
        if task.gpu_product:
            pod["nodeSelector"] = {PRODUCT_LABEL: task.gpu_product}
    return pod


def _task(spec, task):
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
    job = {
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
        topology = {"mode": spec.topology_mode}
        if spec.topology_highest_tier is not None:
            topology["highestTierAllowed"] = spec.topology_highest_tier
        job["networkTopology"] = topology
    return {
        "apiVersion": VCJOB_API,
        "kind": "Job",
        "metadata": {"name": spec.name, "namespace": spec.namespace, "labels": _labels(spec)},
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


def build_data_pvc(name, namespace, tenant, size_gib, storage_class="") -> dict:
    """A data disk: labelled for the tenant only, so deleting a job never prunes it."""
    return _pvc(
        name,
        namespace,
        portal_labels(tenant=tenant, component="data-volume"),
        size_gib,
        storage_class,
        "ReadWriteMany",
    )


def _pvc(name, namespace, labels, size_gib, storage_class, access):
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
    """Every object a job owns, in apply order: what the pods mount first, then the job."""
    objects = []
    if spec.ssh_keys:
        objects.append(build_ssh_secret(spec))
    objects.append(build_workspace_pvc(spec))
    objects.append(build_vcjob(spec))
    return objects


def build_abort_command(namespace, job_name, job_uid) -> dict:
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
