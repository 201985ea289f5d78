"""Global templates every installation starts with; `manage.py seed_templates` adds the missing."""

PYTORCH_DDP = {
    "image": "nvcr.io/nvidia/pytorch:24.10-py3",
    "command": [
        "bash",
        "-c",
        "torchrun --nnodes=$((VC_WORKER_NUM + 1)) --nproc-per-node=$GPU_PORTAL_GPUS "
        "--node-rank=${VC_TASK_INDEX:-0} --rdzv-backend=c10d "
        "--rdzv-endpoint=${VC_MASTER_HOSTS%%,*}:29500 train.py",
    ],
    "working_dir": "/workspace",
    "env": {"NCCL_DEBUG": "WARN"},
    "tasks": [
        {
            "name": "master",
            "replicas": 1,
            "gpus": 8,
            "cpu": "32",
            "memory": "256Gi",
            "shm": "64Gi",
            "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
        },
        {"name": "worker", "replicas": 2, "gpus": 8, "cpu": "32", "memory": "256Gi", "shm": "64Gi"},
    ],
    "max_retry": 3,
    "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
    "plugins": ["svc", "env"],
    "expose": [
        {"name": "tensorboard", "task": "master", "container_port": 6006, "protocol": "http"}
    ],
    "volumes": {"workspace_gib": 200},
}

JUPYTER_SSH = {
    "image": "quay.io/jupyter/pytorch-notebook:cuda12-latest",
    "command": [
        "bash",
        "-c",
        "start-notebook.py --IdentityProvider.token=''",
    ],
    "working_dir": "/workspace",
    "tasks": [
        {"name": "dev", "replicas": 1, "gpus": 1, "cpu": "8", "memory": "64Gi", "shm": "16Gi"}
    ],
    "max_retry": 0,
    "plugins": ["env"],
    "expose": [
        # A notebook server is a shell as its owner (no token: the portal's sign-in guards
        # it): only the owner opens it. TensorBoard and web UIs stay open to the tenant.
        {
            "name": "jupyter",
            "task": "dev",
            "container_port": 8888,
            "protocol": "http",
            "private": True,
        },
        {"name": "ssh", "task": "dev", "container_port": 22, "protocol": "ssh"},
    ],
    "volumes": {"workspace_gib": 100},
}

SINGLE_GPU = {
    "image": "nvcr.io/nvidia/pytorch:24.10-py3",
    "command": ["python", "train.py"],
    "working_dir": "/workspace",
    "tasks": [
        {"name": "main", "replicas": 1, "gpus": 1, "cpu": "8", "memory": "32Gi", "shm": "8Gi"}
    ],
    "max_retry": 1,
    "plugins": ["env"],
    "volumes": {"workspace_gib": 50},
}

TEMPLATES = [
    (
        "pytorch-ddp",
        "PyTorch DDP: 1 master + N workers with torchrun, 8 GPUs each.",
        PYTORCH_DDP,
        ["image", "command", "gpus", "replicas", "data_volume", "workspace_gib"],
    ),
    (
        "jupyter-ssh",
        "A Jupyter dev box with SSH, one GPU.",
        JUPYTER_SSH,
        ["image", "gpus", "data_volume", "workspace_gib"],
    ),
    (
        "single-gpu",
        "One script on one GPU.",
        SINGLE_GPU,
        ["image", "command", "gpus", "data_volume", "workspace_gib"],
    ),
]
