"""Pure builders for simulated GPU nodes (demo data and tests): Node objects whose status
carries nvidia.com/gpu capacity and the GPU feature discovery labels, as a real node would."""

from dataclasses import dataclass

from .labels import MANAGED_BY


@dataclass(frozen=True)
class SimulatedNode:
    name: str
    gpus: int
    product: str = "NVIDIA-H100-80GB-HBM3"
    gpu_memory_mib: int = 81559
    cpu: int = 96
    memory_gib: int = 1024
    ready: bool = True


def build_node(node: SimulatedNode) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {
                "kubernetes.io/hostname": node.name,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": node.product,
                "nvidia.com/gpu.count": str(node.gpus),
                "nvidia.com/gpu.memory": str(node.gpu_memory_mib),
                MANAGED_BY: "gpu-portal-simulator",
            },
        },
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
    }


def build_node_status(node: SimulatedNode) -> dict:
    resources = {
        "cpu": str(node.cpu),
        "memory": f"{node.memory_gib}Gi",
        "pods": "110",
        "nvidia.com/gpu": str(node.gpus),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if node.ready else "False",
                    "reason": "KubeletReady" if node.ready else "KubeletNotReady",
                    "message": "simulated node",
                }
            ],
        },
    }
