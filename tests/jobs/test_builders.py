from k8s_adapters.jobspec import JobSpec, Policy, Port, Task
from k8s_adapters.names import identity_label
from k8s_adapters.volcano import build_data_pvc, build_job, build_vcjob

LABELS = {
    "app.kubernetes.io/managed-by": "gpu-portal",
    "gpu-portal.io/tenant": "vision",
    "gpu-portal.io/job": "sft",
    "gpu-portal.io/owner": identity_label("bob"),
}
SPEC = JobSpec(
    name="sft",
    namespace="tenant-vision",
    queue="tenant-vision",
    tenant="vision",
    owner="bob",
    image="img:1",
    command=("python", "train.py"),
    tasks=(
        Task(
            "master",
            1,
            8,
            "32",
            "256Gi",
            "64Gi",
            "NVIDIA-H100-80GB-HBM3",
            policies=(Policy("TaskCompleted", "CompleteJob"),),
        ),
        Task("worker", 2, 8, "32", "256Gi", "64Gi"),
    ),
    policies=(Policy("PodEvicted", "RestartJob"),),
    plugins=("svc", "env"),
    ports=(Port("tensorboard", "master", 6006),),
    workspace_gib=100,
    data_volume="corpus",
    ssh_keys=("ssh-ed25519 AAAA bob@laptop",),
    topology_mode="hard",
    topology_highest_tier=1,
    ttl_seconds_after_finished=600,
)


def test_the_volcano_job_has_queue_plugins_policies_and_topology():
    job = build_vcjob(SPEC)
    assert job["metadata"] == {
        "name": "sft",
        "namespace": "tenant-vision",
        "labels": LABELS,
        "annotations": {"gpu-portal.io/owner-name": "bob"},
    }
    spec = dict(job["spec"])
    tasks = spec.pop("tasks")
    assert spec == {
        "schedulerName": "volcano",
        "queue": "tenant-vision",
        "minAvailable": 3,
        "maxRetry": 3,
        "plugins": {"svc": [], "env": []},
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
        "ttlSecondsAfterFinished": 600,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
    }
    assert [(t["name"], t["replicas"]) for t in tasks] == [("master", 1), ("worker", 2)]
    assert tasks[0]["policies"] == [{"event": "TaskCompleted", "action": "CompleteJob"}]
    assert "policies" not in tasks[1]


def test_a_gpu_pod_asks_for_gpus_runs_with_nvidia_and_mounts_its_disks():
    pod = build_vcjob(SPEC)["spec"]["tasks"][0]["template"]
    assert pod["metadata"] == {"labels": LABELS}
    spec = pod["spec"]
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    container = spec["containers"][0]
    assert container["resources"] == {
        "requests": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"},
        "limits": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"},
    }
    assert container["command"] == ["python", "train.py"]
    assert container["ports"] == [{"name": "tensorboard", "containerPort": 6006, "protocol": "TCP"}]
    assert container["volumeMounts"] == [
        {"name": "workspace", "mountPath": "/workspace"},
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "data", "mountPath": "/data"},
        {"name": "ssh-keys", "mountPath": "/var/run/gpu-portal/ssh", "readOnly": True},
    ]
    assert spec["volumes"][0] == {
        "name": "workspace",
        "persistentVolumeClaim": {"claimName": "sft-workspace"},
    }
    assert spec["volumes"][1] == {
        "name": "dshm",
        "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"},
    }
    worker = build_vcjob(SPEC)["spec"]["tasks"][1]["template"]["spec"]
    assert "nodeSelector" not in worker
    assert "ports" not in worker["containers"][0]


def test_a_cpu_only_task_gets_no_gpu_runtime():
    spec = JobSpec(**{**SPEC.__dict__, "tasks": (Task("prep", 1, 0),)})
    pod = build_vcjob(spec)["spec"]["tasks"][0]["template"]["spec"]
    assert "runtimeClassName" not in pod
    assert "tolerations" not in pod
    assert "nvidia.com/gpu" not in pod["containers"][0]["resources"]["limits"]
    # CUDA images ask for every GPU (NVIDIA_VISIBLE_DEVICES=all); the pod's own env wins
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in pod["containers"][0]["env"]


def test_pods_count_against_the_quota_as_the_resource_quota_counts_them():
    tiny = Task("shard", 1000, 0, "0.0001", "1000M")  # 1m and 953.67 MiB a pod, rounded up
    spec = JobSpec(**{**SPEC.__dict__, "tasks": (tiny,)})
    assert spec.total_cpu_millicores == 1000
    assert spec.total_memory_mib == 954 * 1000


def test_a_job_owns_its_secret_and_workspace_and_only_mounts_the_data_disk():
    workspace, secret, vcjob = build_job(SPEC)
    assert secret["stringData"] == {"authorized_keys": "ssh-ed25519 AAAA bob@laptop\n"}
    assert secret["metadata"]["labels"] == LABELS
    assert workspace["metadata"] == {
        "name": "sft-workspace",
        "namespace": "tenant-vision",
        "labels": LABELS,
    }
    assert workspace["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "100Gi"}},
    }
    assert vcjob["kind"] == "Job"
    data = build_data_pvc("corpus", "tenant-vision", "vision", 500)
    assert "gpu-portal.io/job" not in data["metadata"]["labels"]
    assert data["metadata"]["labels"]["gpu-portal.io/component"] == "data-volume"


def test_every_container_knows_its_job_task_and_gpu_count():
    env = build_vcjob(SPEC)["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["env"]
    assert env == [
        {"name": "GPU_PORTAL_JOB", "value": "sft"},
        {"name": "GPU_PORTAL_TASK", "value": "worker"},
        {"name": "GPU_PORTAL_GPUS", "value": "8"},
    ]
