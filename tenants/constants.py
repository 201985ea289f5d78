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
MAX_RUNNING_JOBS = 1_000_000
MAX_ENDPOINT_HOURS = 24 * 365
