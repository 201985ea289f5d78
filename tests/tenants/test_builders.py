from k8s_adapters.tenant import TenantSpec, build_queue, build_tenant

LABELS = {
    "app.kubernetes.io/managed-by": "gpu-portal",
    "gpu-portal.io/tenant": "vision",
    "gpu-portal.io/component": "tenant",
}
SPEC = TenantSpec(
    slug="vision",
    namespace="tenant-vision",
    queue="tenant-vision",
    display_name="Vision Lab",
    gpus=16,
    cpu=64,
    memory_gib=512,
    storage_gib=1024,
    pvcs=50,
    pods=300,
    queue_weight=2,
    deserved_gpus=12,
    guarantee_gpus=4,
    reclaimable=False,
    router_namespace="gpu-portal-router",
    egress_deny=("169.254.169.254/32", "10.0.0.0/8", "fd00:ec2::254/128"),
    egress_namespaces=("object-store",),
)


def test_a_tenant_is_a_namespace_quota_limit_range_isolation_policy_and_queue():
    namespace, queue, quota, limits, policy = build_tenant(SPEC)
    assert namespace == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "tenant-vision",
            "labels": {
                **LABELS,
                "pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/warn": "restricted",
                "pod-security.kubernetes.io/audit": "restricted",
            },
            "annotations": {"gpu-portal.io/display-name": "Vision Lab"},
        },
    }
    assert policy == {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": "gpu-portal-isolation",
            "namespace": "tenant-vision",
            "labels": LABELS,
        },
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {
                    "from": [
                        {"podSelector": {}},
                        {
                            "namespaceSelector": {
                                "matchLabels": {"kubernetes.io/metadata.name": "gpu-portal-router"}
                            }
                        },
                    ]
                }
            ],
            "egress": [
                {"to": [{"podSelector": {}}]},  # its own namespace
                {  # DNS, wherever the cluster runs it
                    "to": [{"namespaceSelector": {}}],
                    "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
                },
                {
                    "to": [
                        {
                            "namespaceSelector": {
                                "matchLabels": {"kubernetes.io/metadata.name": "object-store"}
                            }
                        }
                    ]
                },
                {  # anywhere else, but the metadata service and the ranges an admin closed
                    "to": [
                        {
                            "ipBlock": {
                                "cidr": "0.0.0.0/0",
                                "except": ["169.254.169.254/32", "10.0.0.0/8"],
                            }
                        },
                        {"ipBlock": {"cidr": "::/0", "except": ["fd00:ec2::254/128"]}},
                    ]
                },
            ],
        },
    }
    assert quota == {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-portal", "namespace": "tenant-vision", "labels": LABELS},
        "spec": {
            "hard": {
                "requests.nvidia.com/gpu": "16",
                "requests.cpu": "64",
                "requests.memory": "512Gi",
                "requests.storage": "1024Gi",
                "persistentvolumeclaims": "50",
                "pods": "300",
            }
        },
    }
    assert limits["kind"] == "LimitRange"
    assert limits["spec"]["limits"][0]["defaultRequest"] == {"cpu": "500m", "memory": "1Gi"}
    assert queue == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "tenant-vision", "labels": LABELS},
        "spec": {
            "weight": 2,
            "reclaimable": False,
            "capability": {"nvidia.com/gpu": "16", "cpu": "64", "memory": "512Gi"},
            "deserved": {"nvidia.com/gpu": "12", "cpu": "64", "memory": "512Gi"},
            "guarantee": {"resource": {"nvidia.com/gpu": "4"}},
        },
    }


def test_deserved_defaults_to_the_whole_quota_and_a_parent_queue_is_named():
    spec = TenantSpec(**{**SPEC.__dict__, "deserved_gpus": None, "parent_queue": "physics"})
    queue = build_queue(spec)
    assert queue["spec"]["deserved"] == {"nvidia.com/gpu": "16", "cpu": "64", "memory": "512Gi"}
    assert queue["spec"]["parent"] == "physics"


def test_no_parent_key_without_a_parent_queue():
    assert "parent" not in build_queue(SPEC)["spec"]


def test_the_webs_binding_comes_right_after_the_namespace_when_a_role_is_set():
    spec = TenantSpec(
        **{**SPEC.__dict__, "web_role": "portal-prod-web-tenant", "web_account": "prod/web"}
    )
    namespace, binding, queue, *_ = build_tenant(spec)
    assert (namespace["kind"], queue["kind"]) == ("Namespace", "Queue")
    assert binding == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": "portal-prod-web-tenant",
            "namespace": "tenant-vision",
            "labels": LABELS,
        },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "portal-prod-web-tenant",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "web", "namespace": "prod"}],
    }
    assert "RoleBinding" not in [o["kind"] for o in build_tenant(SPEC)]
