# Reservations are counted per aligned block of this many addresses (a /24 of IPv4): a full
# block is skipped without reading its rows.
BLOCK_SIZE = 256
