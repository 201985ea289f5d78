# Reservations are counted per aligned block of this many addresses (a /24 of IPv4): a full
# block is skipped without reading its rows.
BLOCK_SIZE = 256

# Whereabouts keeps all allocations of a range in one IPPool object, which etcd stores as one
# value (1.5 MiB by default). bench/bench_ipam.py measured about 1.4 MiB at 10,000 allocations,
# the API server refusing the object at 12,000, and ADDs taking over a second (under the
# cluster-wide lease, so for one pod at a time) from about 4,000. Larger pools get a warning.
WHEREABOUTS_MAX_ADDRESSES = 8192
