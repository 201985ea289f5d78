# Tenant slugs become namespace and queue names with this prefix, so they cannot collide with
# system namespaces; the prefix plus the slug must still fit a DNS label.
NAMESPACE_PREFIX = "tenant-"
SLUG_MAX_LENGTH = 63 - len(NAMESPACE_PREFIX)

# Upper bounds that catch typos (an extra zero) rather than limit real clusters.
MAX_GPUS = 100_000
MAX_CPU = 10_000_000
MAX_MEMORY_GIB = 100_000_000
MAX_STORAGE_GIB = 1_000_000_000
MAX_PVCS = 1_000_000
MAX_PODS = 1_000_000
MAX_RUNNING_JOBS = 1_000_000
MAX_ENDPOINT_HOURS = 24 * 365

# The tenant fields forms, the API and audit snapshots share: quotas and limits, then queue.
QUOTA_FIELDS = [
    "gpu_quota",
    "cpu_quota",
    "memory_quota_gib",
    "storage_quota_gib",
    "pvc_quota",
    "pod_quota",
    "max_running_jobs",
    "member_gpu_cap",
    "endpoint_default_hours",
    "endpoint_max_hours",
    "allow_direct_exposure",
]
QUEUE_FIELDS = [
    "queue_weight",
    "queue_deserved_gpus",
    "queue_guarantee_gpus",
    "queue_reclaimable",
    "parent_queue",
]
TENANT_FIELDS = ["slug", "display_name", "state", *QUOTA_FIELDS, *QUEUE_FIELDS]
